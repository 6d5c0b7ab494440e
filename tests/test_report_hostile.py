"""What a user can get wrong with `report` and `export -o`: one paragraph and a non-zero exit, never a traceback,
no output directory made from wrong inputs, and never a half-written file.

A read-only or full disk is simulated in-process (the tests may run as root, whom permissions do not stop):
the system call that fails on such a disk raises the errno it would raise there.
"""
from __future__ import annotations

import errno
import os
import pathlib

import pytest

from helpers.files import FIXTURES

RESULTS = FIXTURES / "results"


def _main(argv: list[str], capsys) -> tuple[int, str]:
    from lm_eval_ext.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    return exit_info.value.code, capsys.readouterr().err


def _one_paragraph(err: str) -> None:
    assert err.startswith("lm-eval-ext: error: ") and err.count("\n") == 1 and "Traceback" not in err, err


def _read_only_below(monkeypatch, root: pathlib.Path) -> None:
    """mkdir and new files under ``root`` fail as on a read-only file system."""
    real_mkdir, real_open = pathlib.Path.mkdir, os.open

    def mkdir(self, *args, **kwargs):
        if str(self).startswith(str(root)):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))
        return real_mkdir(self, *args, **kwargs)

    def os_open(path, flags, *args, **kwargs):
        if flags & os.O_CREAT and str(path).startswith(str(root)):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "mkdir", mkdir)
    monkeypatch.setattr(os, "open", os_open)


def _full_disk(monkeypatch, root: pathlib.Path) -> list[str]:
    """Every file's final flush fails with ENOSPC (the disk filled up while writing); returns the temp files made
    under ``root``."""
    made, real_open = [], os.open

    def os_open(path, flags, *args, **kwargs):
        if flags & os.O_CREAT and str(path).startswith(str(root)):
            made.append(str(path))
        return real_open(path, flags, *args, **kwargs)

    def fsync(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "open", os_open)
    monkeypatch.setattr(os, "fsync", fsync)
    return made


@pytest.mark.parametrize("command", [["report", "--no-published"], ["export", "--format", "leaderboard", "--allow-partial"]])
def test_read_only_output_is_one_paragraph(command, tmp_path, monkeypatch, capsys, data_dir):
    out = tmp_path / "ro" / "out"
    _read_only_below(monkeypatch, tmp_path / "ro")
    code, err = _main([*command, str(RESULTS / "lieder_limit"), "-o", str(out)], capsys)
    assert code == 2
    _one_paragraph(err)
    assert f"Cannot write {out}: Read-only file system (errno {errno.EROFS})" in err and "--output" in err


@pytest.mark.parametrize("command", [["report", "--no-published"], ["export", "--format", "leaderboard", "--allow-partial"]])
def test_full_disk_is_one_paragraph_and_leaves_no_partial_file(command, tmp_path, monkeypatch, capsys, data_dir):
    out = tmp_path / "out"
    made = _full_disk(monkeypatch, out)
    code, err = _main([*command, str(RESULTS / "lieder_limit"), "-o", str(out)], capsys)
    assert code == 2
    _one_paragraph(err)
    assert "No space left on device" in err and made
    assert not any(os.path.exists(name) for name in made)  # every temp file was removed
    assert [p for p in out.rglob("*") if p.is_file()] == []  # nothing half-written under a final name


def test_output_path_is_a_file(tmp_path, capsys, data_dir):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    for argv in (["report", "--no-published", str(RESULTS / "lieder_limit"), "-o", str(blocker)],
                 ["export", "--allow-partial", str(RESULTS / "lieder_limit"), "-o", str(blocker / "sub")]):
        code, err = _main(argv, capsys)
        assert code == 2
        _one_paragraph(err)
        assert "Cannot write" in err
    assert blocker.read_text() == "not a directory\n"


def test_wrong_inputs_make_no_output_directory(tmp_path, capsys):
    out = tmp_path / "report"
    code, err = _main(["report", str(tmp_path / "missing"), "-o", str(out)], capsys)
    assert code == 2 and "does not exist" in err
    _one_paragraph(err)
    assert not out.exists()
    code, err = _main(["export", str(tmp_path / "missing"), "-o", str(out)], capsys)
    assert code == 2 and not out.exists()


def test_files_are_replaced_whole(tmp_path, data_dir):
    """A second report into the same directory replaces each file by a rename: no temp file is left beside them."""
    from lm_eval_ext.report.build import build_report

    out = tmp_path / "report"
    for _ in range(2):
        build_report([str(RESULTS / "lieder_limit")], out, published=False)
    names = sorted(p.name for p in out.rglob("*") if p.is_file())
    assert not any(name.endswith(".part") or name.startswith(".") for name in names)
    assert "report.html" in names and "lieder_properties.csv" in names
