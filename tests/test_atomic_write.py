"""Files like the harness's: every file the plugin writes has the mode the user's umask gives new files, and a
write that fails leaves nothing under the final name (lm_eval_ext/atomic_write.py)."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from helpers.files import FIXTURES

RESULTS = FIXTURES / "results"


@pytest.fixture
def umask():
    """Set the process's umask for one test (``umask(0o022)``), then restore the one before."""
    before = os.umask(0o022)
    os.umask(before)
    yield os.umask
    os.umask(before)


def _cli(argv: list[str]) -> None:
    from lm_eval_ext.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main([str(arg) for arg in argv])
    assert exit_info.value.code == 0, argv


def _modes(root: Path) -> dict[str, int]:
    """Permission bits of every file under ``root``, by path relative to it."""
    return {str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode) for p in sorted(root.rglob("*")) if p.is_file()}


def test_report_export_and_site_files_have_the_umask_mode(umask, tmp_path, data_dir, capsys):
    umask(0o022)
    mode = 0o644
    sources = [f"{name}={RESULTS / name}" for name in ("lieder_limit", "elitr")]
    _cli(["report", "--no-published", *sources, "-o", tmp_path / "report"])
    _cli(["export", "--allow-partial", "--judge-validation", FIXTURES / "judge_validation.json", *sources,
          "-o", tmp_path / "records"])
    _cli(["leaderboard", "build", "--no-published", tmp_path / "records", "-o", tmp_path / "site"])
    capsys.readouterr()
    for output, at_least in (("report", 15), ("records", 3), ("site", 10)):
        modes = _modes(tmp_path / output)
        assert len(modes) >= at_least, modes  # the figures, tables, records, pages and assets
        assert {name: m for name, m in modes.items() if m != mode} == {}, f"{output}: not {oct(mode)}"
        assert not [name for name in modes if Path(name).name.startswith(".")]  # no temp file left beside them


def test_answers_judge_validation_and_stimuli_have_the_umask_mode(umask, tmp_path, data_dir, capsys):
    from types import SimpleNamespace

    from lm_eval_ext import answers

    umask(0o022)
    instance = SimpleNamespace(doc_id=0, idx=0, request_type="generate_until", resps=["an answer"])
    saved = answers.save(tmp_path / "answers", "some_task", [instance])
    _cli(["judge", "validate", "--from-file", "--output-dir", tmp_path / "validation"])
    lexicon = tmp_path / "lexicon.json"
    lexicon.write_text(json.dumps(json.loads((FIXTURES / "lieder_published_lexicon.json").read_text())[:1]))
    _cli(["lieder", "generate", lexicon, "--output", tmp_path / "stimuli" / "mine.jsonl"])
    capsys.readouterr()
    assert answers.load(saved.parent).responses == {"some_task": {(0, 0): ["an answer"]}}
    modes = {**_modes(tmp_path / "answers"), **_modes(tmp_path / "validation"), **_modes(tmp_path / "stimuli")}
    assert modes == {"some_task.jsonl": 0o644, "correlations.csv": 0o644, "gold_bins.csv": 0o644,
                     "gold_bins.png": 0o644, "validation.json": 0o644, "mine.jsonl": 0o644}


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_the_mode_follows_the_umask(mask, mode, umask, tmp_path):
    from lm_eval_ext.atomic_write import atomic_write_bytes

    umask(mask)
    atomic_write_bytes(tmp_path / "file", b"data")
    assert stat.S_IMODE((tmp_path / "file").stat().st_mode) == mode


class _DiskFull(OSError):
    pass


@pytest.mark.parametrize("mode", ["wb", "w"])
def test_a_write_that_fails_midway_leaves_nothing_under_the_final_name(mode, tmp_path):
    from lm_eval_ext.atomic_write import atomic_open

    final = tmp_path / "out" / "page.html"
    with pytest.raises(_DiskFull):
        with atomic_open(final, mode) as handle:
            handle.write(b"<html>half" if mode == "wb" else "<html>half")
            raise _DiskFull("no space left")
    assert not final.exists() and list(final.parent.iterdir()) == []


def test_a_failed_rewrite_keeps_the_old_file_and_an_interrupt_leaves_no_temp_file(tmp_path):
    from lm_eval_ext.atomic_write import atomic_open, write_text

    final = tmp_path / "record.json"
    write_text(final, '{"old": true}\n')
    for error in (_DiskFull("no space left"), KeyboardInterrupt()):
        with pytest.raises(type(error)):
            with atomic_open(final, "w", encoding="utf-8") as handle:
                handle.write('{"new": ')
                raise error
        assert final.read_text() == '{"old": true}\n'
        assert [p.name for p in tmp_path.iterdir()] == ["record.json"]


def test_only_whole_new_files(tmp_path):
    from lm_eval_ext.atomic_write import atomic_open

    with pytest.raises(ValueError, match="mode 'w' or 'wb', not 'a'"):
        with atomic_open(tmp_path / "log.jsonl", "a"):
            pass
    assert list(tmp_path.iterdir()) == []
