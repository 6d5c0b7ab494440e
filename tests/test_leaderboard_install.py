"""What `lm-eval-ext leaderboard init` makes its workflow install: the release given with --install (a version, a git
URL with a tag, a wheel's URL or file), else where the installed plugin came from (PEP 610's direct_url.json), else an
error that asks for --install; never a version pin that no index serves."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from lm_eval_ext import __version__

WHEEL = f"lm_eval_ext-{__version__}-py3-none-any.whl"
GIT = "git+https://git.example.org/org/lm-eval-ext"


def _cli(argv: list) -> int:
    from lm_eval_ext.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main([str(arg) for arg in argv])
    return exit_info.value.code


def _installs(repo: Path) -> list[str]:
    """The `pip install` lines of both jobs of the repository's workflow."""
    jobs = yaml.safe_load((repo / ".github/workflows/leaderboard.yml").read_text())["jobs"]
    return [step["run"] for job in jobs.values() for step in job["steps"] if "pip install" in step.get("run", "")]


@pytest.mark.parametrize(("given", "requirement"), [
    ("0.1.0", "lm-eval-ext==0.1.0"),
    ("lm-eval-ext==0.2.0rc1", "lm-eval-ext==0.2.0rc1"),
    (f"{GIT}@v0.1.0", f"lm-eval-ext @ {GIT}@v0.1.0"),
    (f"lm-eval-ext @ {GIT}@0123abc", f"lm-eval-ext @ {GIT}@0123abc"),
    (f"https://files.example.org/{WHEEL}", f"lm-eval-ext @ https://files.example.org/{WHEEL}"),
    ("https://files.example.org/lm_eval_ext-0.1.0.tar.gz", "lm-eval-ext @ https://files.example.org/lm_eval_ext-0.1.0.tar.gz"),
])
def test_install_forms_go_into_both_jobs_and_the_readme(tmp_path, capsys, given, requirement):
    repo = tmp_path / "board"
    assert _cli(["leaderboard", "init", repo, "--install", given]) == 0
    assert _installs(repo) == [f'pip install "{requirement}"'] * 2
    assert f'install the same: `pip install "{requirement}"`.' in (repo / "README.md").read_text()
    assert f'the workflow installs: pip install "{requirement}" (--install {given})' in capsys.readouterr().out
    assert not (repo / "wheels").exists()


def test_a_wheel_file_is_copied_into_the_repository(tmp_path, capsys):
    wheel = tmp_path / "dist" / WHEEL
    wheel.parent.mkdir()
    wheel.write_bytes(b"the wheel's bytes")
    repo = tmp_path / "board"
    assert _cli(["leaderboard", "init", repo, "--install", wheel]) == 0
    assert (repo / "wheels" / WHEEL).read_bytes() == b"the wheel's bytes"
    assert _installs(repo) == [f'pip install "./wheels/{WHEEL}"'] * 2  # the checkout's copy, on GitHub's machines
    assert "(in a clone of this repository: the wheel is in `wheels/`)" in (repo / "README.md").read_text()
    assert f"wrote {repo / 'wheels' / WHEEL}" in capsys.readouterr().out
    # a second init into the same place overwrites nothing, the wheel included
    assert _cli(["leaderboard", "init", tmp_path / "other", "--install", wheel]) == 0
    (tmp_path / "third" / "wheels").mkdir(parents=True)
    (tmp_path / "third" / "wheels" / WHEEL).write_bytes(b"another")
    assert _cli(["leaderboard", "init", tmp_path / "third", "--install", wheel]) == 2
    assert f"already has wheels/{WHEEL}" in capsys.readouterr().err
    assert (tmp_path / "third" / "wheels" / WHEEL).read_bytes() == b"another"


@pytest.mark.parametrize(("given", "says"), [
    (GIT, f"names no tag or commit, so the workflow would install whatever the branch holds on the day; pin one: "
          f"{GIT}@v{__version__} (a tag) or {GIT}@COMMIT."),
    ("lm-eval-ext>=0.1", "is not something the leaderboard's workflow can install: give a version (0.1.0), a git URL"),
    ("latest", "is not something the leaderboard's workflow can install"),
    ("missing/lm_eval_ext-0.1.0-py3-none-any.whl", "no such wheel file"),
    ("0.1.0 && curl evil", "is not something the leaderboard's workflow can install"),
    (f"{GIT}@v0.1.0$(whoami)", "quotes, blanks, '$' and backslashes cannot go into the workflow's install line"),
])
def test_what_cannot_be_installed_is_one_paragraph_and_writes_nothing(tmp_path, capsys, given, says):
    repo = tmp_path / "board"
    assert _cli(["leaderboard", "init", repo, "--install", given]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1
    assert not repo.exists()


def test_a_wheel_of_another_package_is_refused(tmp_path, capsys):
    other = tmp_path / "other_package-1.0-py3-none-any.whl"
    other.write_bytes(b"x")
    assert _cli(["leaderboard", "init", tmp_path / "board", "--install", other]) == 2
    assert "not a wheel of lm-eval-ext" in capsys.readouterr().err


def _installed_as(monkeypatch, tmp_path: Path, direct_url: dict | None) -> None:
    """Make `importlib.metadata` find an lm-eval-ext distribution installed this way (its dist-info first on the
    path, as an install would put it)."""
    site = tmp_path / "site"
    info = site / f"lm_eval_ext-{__version__}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: lm-eval-ext\nVersion: {__version__}\n")
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url))
    monkeypatch.syspath_prepend(str(site))


def test_default_from_a_git_install_pins_the_installed_commit(tmp_path, monkeypatch, capsys):
    commit = "4f1c2d3e4f1c2d3e4f1c2d3e4f1c2d3e4f1c2d3e"
    _installed_as(monkeypatch, tmp_path, {"url": "https://git.example.org/org/lm-eval-ext", "vcs_info": {
        "vcs": "git", "requested_revision": "v0.1.0", "commit_id": commit}})
    assert _cli(["leaderboard", "init", tmp_path / "board"]) == 0
    assert _installs(tmp_path / "board") == [f'pip install "lm-eval-ext @ {GIT}@{commit}"'] * 2
    assert f"(the installed lm-eval-ext, from https://git.example.org/org/lm-eval-ext at commit {commit})" in (
        capsys.readouterr().out)


def test_default_from_a_wheel_or_an_index(tmp_path, monkeypatch):
    wheel = tmp_path / "dist" / WHEEL
    wheel.parent.mkdir()
    wheel.write_bytes(b"built here")
    _installed_as(monkeypatch, tmp_path / "a", {"url": wheel.as_uri(), "archive_info": {}})
    assert _cli(["leaderboard", "init", tmp_path / "board"]) == 0
    assert (tmp_path / "board" / "wheels" / WHEEL).read_bytes() == b"built here"
    monkeypatch.undo()
    _installed_as(monkeypatch, tmp_path / "b", {"url": f"https://files.example.org/{WHEEL}", "archive_info": {}})
    assert _cli(["leaderboard", "init", tmp_path / "board2"]) == 0
    assert _installs(tmp_path / "board2")[0] == f'pip install "lm-eval-ext @ https://files.example.org/{WHEEL}"'
    monkeypatch.undo()
    _installed_as(monkeypatch, tmp_path / "c", None)  # from a package index: its version is there
    assert _cli(["leaderboard", "init", tmp_path / "board3"]) == 0
    assert _installs(tmp_path / "board3")[0] == f'pip install "lm-eval-ext=={__version__}"'


@pytest.mark.parametrize("direct_url", [
    {"url": "file:///home/me/lm-eval-ext", "dir_info": {"editable": True}},  # pip install -e .
    {"url": "file:///home/me/lm-eval-ext", "dir_info": {}},  # pip install . (what the README says today)
    {"url": "file:///home/me/gone/lm_eval_ext-0.1.0-py3-none-any.whl", "archive_info": {}},
])
def test_default_from_a_checkout_asks_for_install(tmp_path, monkeypatch, capsys, direct_url):
    _installed_as(monkeypatch, tmp_path, direct_url)
    assert _cli(["leaderboard", "init", tmp_path / "board"]) == 2
    err = capsys.readouterr().err
    assert "Give what the leaderboard's workflow should install with --install: a version (0.1.0)" in err
    assert err.count("\n") == 1 and not (tmp_path / "board").exists()
