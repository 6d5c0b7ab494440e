"""The harness's own tests pass and fail alike with the plugin active and without it (``LM_EVAL_EXT_AUTOLOAD=0``).

The tests are those of the installed harness version, from its sdist (``pip download``; the test is skipped
when the package index cannot be reached): the task manager's, the registry's and the command line's, run
in a pytest process of its own, outside this project (none of its conftest): the start-up hook is on or off for a
whole interpreter. The one expected difference is a test whose expectation the harness's own plugin discovery
(EleutherAI/lm-evaluation-harness PR #4015) changes the same way; each is listed in docs/architecture.md with the
reason.

The outcomes without the plugin are recorded per harness version (tests/fixtures/harness_own_tests.json, written
by ``python tests/test_harness_own_tests.py`` with that version installed): the plugin's run is compared with them,
and a version without a recording is run both ways. With a recording, the tests that did not pass without the plugin
are left out of the plugin's run: they read files the sdist does not ship or download from the Hub, so they fail
whatever the plugin does.
"""
from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from helpers.files import FIXTURES, subprocess_env

RECORDED = FIXTURES / "harness_own_tests.json"  # harness version -> test id -> outcome without the plugin
HARNESS_TEST_FILES = ("test_task_manager.py", "test_registry.py", "test_cli_subcommands.py")
# test id -> why the plugin changes its outcome (docs/architecture.md, "The harness's own tests")
CHANGED_BY_PLUGIN_DISCOVERY = {
    "tests.test_task_manager.TestTaskManagerIntegration::test_include_defaults_false_with_custom_path":
        "counts every task of a TaskManager(include_defaults=False, include_path=...): #4015 adds the plugins' tasks",
}
# what pip prints when the package index cannot be reached (then the test is skipped, not failed)
UNREACHABLE = ("NewConnectionError", "Could not fetch URL", "Temporary failure in name resolution",
               "Network is unreachable", "ConnectTimeout", "ProxyError", "Max retries exceeded")


def _run(cmd: list, cwd: Path, env: dict | None = None, timeout: float = 3600) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=subprocess_env(env), capture_output=True, text=True,
                          timeout=timeout)


def download_harness_tests(download: Path, root: Path) -> Path:
    """``root`` holding the installed harness version's tests (from its sdist, downloaded into ``download``) and an
    empty pytest config; skips the test when the package index cannot be reached."""
    version = importlib.metadata.version("lm_eval")
    proc = _run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps", "--no-build-isolation",
                 f"lm-eval=={version}", "-d", download], cwd=download, timeout=900)
    if proc.returncode != 0:
        if any(marker in proc.stdout + proc.stderr for marker in UNREACHABLE):
            pytest.skip(f"the package index cannot be reached to download the sdist of lm-eval {version}")
        pytest.fail(f"pip download of lm-eval {version}'s sdist failed:\n{proc.stderr[-3000:]}")
    (sdist,) = download.glob("lm_eval-*.tar.gz")
    with tarfile.open(sdist) as archive:
        members = {Path(m.name).name: m for m in archive.getmembers() if Path(m.name).parent.name == "tests"}
        missing = [name for name in HARNESS_TEST_FILES if name not in members]
        assert not missing, f"the sdist of lm-eval {version} has no tests/{', tests/'.join(missing)}"
        for name in HARNESS_TEST_FILES:
            (root / "tests").mkdir(exist_ok=True)
            (root / "tests" / name).write_bytes(archive.extractfile(members[name]).read())
    (root / "pytest.ini").write_text("[pytest]\n")  # the rootdir: neither the sdist's config nor this project's
    return root


@pytest.fixture(scope="module")
def harness_tests(tmp_path_factory) -> Path:
    """A directory holding the installed harness version's tests and an empty pytest config."""
    return download_harness_tests(tmp_path_factory.mktemp("sdist"), tmp_path_factory.mktemp("harness_tests"))


def _node_id(test: str) -> str:
    """The pytest node id of a test id of the JUnit report (``tests.test_x.Class::name`` -> ``tests/test_x.py::Class::
    name``)."""
    classname, name = test.split("::", 1)
    folder, module, *classes = classname.split(".")
    return "::".join([f"{folder}/{module}.py", *classes, name])


def _start(root: Path, label: str, env: dict, only=None) -> tuple[subprocess.Popen, Path]:
    """One pytest run of the harness's tests (``only`` these test ids, if given), started (two runs go side by side,
    one per core)."""
    report = root / f"{label}.xml"
    # --tb=native: outcomes are what is compared, and pytest's own traceback style parses the source of each frame of
    # every failing test (CPU seconds when a version without a recording runs its failing tests both ways)
    tests = [str(root / "tests" / name) for name in HARNESS_TEST_FILES] if only is None else list(map(_node_id, only))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=native", "-c", str(root / "pytest.ini"),
           "--rootdir", str(root), f"--junitxml={report}", *tests]
    proc = subprocess.Popen(cmd, cwd=root, env=subprocess_env(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    return proc, report


def _outcomes(run: tuple[subprocess.Popen, Path], label: str) -> dict[str, str]:
    """Each test's outcome (passed, failed, error, skipped) in one pytest run of the harness's tests."""
    proc, report = run
    output, _ = proc.communicate(timeout=3600)
    assert report.is_file(), f"the harness's tests did not run ({label}):\n{output[-3000:]}"
    outcomes = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        outcomes[f"{case.get('classname')}::{case.get('name')}"] = {"failure": "failed"}.get(kinds[0], kinds[0]) \
            if kinds else "passed"
    return outcomes


def recorded_alone() -> dict[str, str] | None:
    """The recorded outcomes of the installed harness version's tests without the plugin, if any."""
    if not RECORDED.is_file():
        return None
    return json.loads(RECORDED.read_text()).get(importlib.metadata.version("lm_eval"))


@pytest.mark.slow
def test_the_harness_own_tests_give_the_same_outcomes_with_the_plugin(harness_tests):
    recorded = recorded_alone()
    if recorded is None:
        plugin = _start(harness_tests, "plugin", {})
        alone = _outcomes(_start(harness_tests, "alone", {"LM_EVAL_EXT_AUTOLOAD": "0"}), "alone")
    else:
        alone = {test: outcome for test, outcome in recorded.items() if outcome == "passed"}
        plugin = _start(harness_tests, "plugin", {}, only=sorted(alone))
    active = _outcomes(plugin, "plugin")
    assert active.keys() == alone.keys() and len(alone) > 100
    differ = {test: (alone[test], active[test]) for test in alone if alone[test] != active[test]}
    assert differ.keys() == CHANGED_BY_PLUGIN_DISCOVERY.keys(), (
        "outcome (without the plugin, with it) of the harness's tests that differ, besides the listed ones: "
        f"{ {t: o for t, o in differ.items() if t not in CHANGED_BY_PLUGIN_DISCOVERY} }; listed but alike: "
        f"{sorted(CHANGED_BY_PLUGIN_DISCOVERY.keys() - differ.keys())}")
    assert set(differ.values()) == {("passed", "failed")}


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "sdist").mkdir()
        (Path(tmp) / "tests").mkdir()
        root = download_harness_tests(Path(tmp) / "sdist", Path(tmp) / "tests")
        recorded = json.loads(RECORDED.read_text()) if RECORDED.is_file() else {}
        recorded[importlib.metadata.version("lm_eval")] = _outcomes(
            _start(root, "alone", {"LM_EVAL_EXT_AUTOLOAD": "0"}), "alone")
    RECORDED.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
