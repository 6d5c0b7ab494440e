"""Shared fixtures: the tiny hf model, the OpenAI stub server, the data mirror, a CLI runner, the plugin's wheel, and
result directories written by the real harness (built by tests/helpers/scripted.py, once per test run).

The test doubles (tests/doubles) are registered with the harness here for this process, where ``run_cli`` runs
``lm_eval`` and ``lm-eval-ext``; a subprocess that needs them runs ``python -m doubles lm_eval ...``
(``doubles.LM_EVAL`` / ``doubles.LM_EVAL_EXT``).

Tests that need the datasets take ``data_dir`` (or carry ``@pytest.mark.requires_data``): they read
them only through ``$LM_EVAL_EXT_DATA_DIR`` and are skipped, with one reason, when it is unset.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.files import OFFLINE, PLUGIN_INSTALLED, PROJECT_ROOT

pytest_plugins = ["pytester"]  # test_scaffolding runs small sessions with this conftest

if not PLUGIN_INSTALLED:  # test the checkout (helpers.files says why an installed copy stays in charge)
    sys.path.insert(0, str(PROJECT_ROOT))

# One torch thread per process (a user's own setting wins): pytest-xdist already runs a worker per core (and one
# more), and torch's default of a thread per core in every worker and harness subprocess oversubscribes the cores, where
# its threads' spin-waiting burns CPU time (measured: the tiny model's runs take 40% less CPU). Set before
# anything imports torch; subprocesses inherit it.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# The harness hands a metric name it does not know (a toy task's, on purpose) to `evaluate.load`, which without
# a network tries the Hub for about 3 s before it gives up; offline it gives up at once, with the same error.
os.environ.setdefault("HF_EVALUATE_OFFLINE", "1")
# No network: commands run in this process read the Hugging Face variables as their libraries are imported, so they
# are set here, before those are, as helpers.files.subprocess_env sets them for a process a test starts.
for _name, _value in OFFLINE.items():
    os.environ.setdefault(_name, _value)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """Directory of the tiny random Llama (2 layers, hidden 64, vocab 1000), built once per test run."""
    from doubles.tiny_model import build_tiny_model
    from helpers.once import built_once

    return built_once(tmp_path_factory, "tiny_model", build_tiny_model)


@pytest.fixture
def stub_openai():
    """A running :class:`StubOpenAIServer` with default options (fixed reply ``"stub reply"``).

    For other options (responder, faults, delay), build one in the test:
    ``with StubOpenAIServer(...) as srv``.
    """
    from doubles.stub_openai import StubOpenAIServer

    with StubOpenAIServer() as srv:
        yield srv


DATA_DIR_ENV = "LM_EVAL_EXT_DATA_DIR"
NO_MIRROR_REASON = f"needs the datasets: {DATA_DIR_ENV} is not set (point it to a data mirror; see docs/testing.md)"


def mirror_dir() -> Path | None:
    """The data mirror from ``$LM_EVAL_EXT_DATA_DIR`` (absolute), or None when it is unset."""
    value = os.environ.get(DATA_DIR_ENV, "").strip()
    return Path(value).expanduser().resolve() if value else None


def pytest_configure(config):
    import doubles

    doubles.register()
    config.addinivalue_line(
        "markers", f"requires_data: the test reads the datasets through {DATA_DIR_ENV}; skipped when it is unset")
    config.addinivalue_line(
        "markers", "browser: the test opens a page in Chromium (helpers.browser.requires_chromium); slow, and skipped "
                   "when Chromium is missing")
    mirror = mirror_dir()
    if mirror is not None and not mirror.is_dir():
        raise pytest.UsageError(f"{DATA_DIR_ENV}={os.environ[DATA_DIR_ENV]} is not a directory. Point it to a data "
                                "mirror, or unset it to skip the tests that need the datasets.")


# Fixtures that run commands (run_cli) or harness runs built once per test run, or start processes.
SLOW_FIXTURES = {"run_cli", "plain_task_listing", "plain_task_listing_with_tasks_dir", "tiny_model_dir", "plugin_wheel",
                 "lieder_scripted", "lieder_tiny", "litm_scripted", "magnifico_scripted", "elitr_scripted"}


@pytest.hookimpl(wrapper=True, optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """``-n auto``: a worker more than pytest-xdist counts cores, unless PYTEST_XDIST_AUTO_NUM_WORKERS says how many.

    About a sixth of the workers' time is waiting that tests do on purpose (judge timeouts, retry pauses, servers and
    harness processes starting): the extra worker keeps the cores busy meanwhile (bench/README.md, the suite)."""
    cores = yield
    return cores if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS") else cores + 1


@pytest.hookimpl(tryfirst=True)  # before `-m` selects by marker (and before pytest-xdist reads xdist_group)
def pytest_collection_modifyitems(items):
    # Every test that takes the mirror is marked, so `-m "not requires_data"` selects the rest; every test that
    # starts a process through a fixture, or a browser, is slow, so `-m "not slow"` is the quick selection
    # (docs/testing.md).
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if "data_dir" in names:
            item.add_marker(pytest.mark.requires_data)
        if names & SLOW_FIXTURES or item.get_closest_marker("browser"):
            item.add_marker(pytest.mark.slow)
    # The slow tests first (a stable sort: each keeps its place among its kind): pytest-xdist deals tests out in
    # this order, so the quick ones fill the end of the run instead of one worker idling behind a long one.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_runtest_setup(item):
    if item.get_closest_marker("requires_data") and mirror_dir() is None:
        pytest.skip(NO_MIRROR_REASON)
    if item.get_closest_marker("browser"):
        from helpers.browser import CHROMIUM, NO_CHROMIUM

        if CHROMIUM is None:
            pytest.skip(NO_CHROMIUM)


@pytest.fixture(scope="session", autouse=True)
def isolated_data_env(tmp_path_factory):
    """The data layer, in every test and subprocess, sees only what the tests give it.

    The mirror is exported as an absolute path (subprocesses run in other
    directories); the cache is a fresh directory, so the user's cache neither
    helps nor hurts; downloads are off (tests that download turn them back on
    against a local server).
    """
    with pytest.MonkeyPatch.context() as mp:
        mirror = mirror_dir()
        if mirror is not None:
            mp.setenv(DATA_DIR_ENV, str(mirror))
        mp.setenv("LM_EVAL_EXT_CACHE_DIR", str(tmp_path_factory.mktemp("lm_eval_ext_cache")))
        mp.setenv("LM_EVAL_EXT_OFFLINE", "1")
        yield


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The data mirror (``$LM_EVAL_EXT_DATA_DIR``); tests taking it are marked ``requires_data``."""
    mirror = mirror_dir()
    assert mirror is not None, "pytest_runtest_setup skips the tests that take data_dir when there is no mirror"
    return mirror


@pytest.fixture
def run_cli(tmp_path, request):
    """Run a command (a list) and return its ``CompletedProcess`` (text stdout and stderr); asserts nothing.

    ``lm_eval ...`` and ``lm-eval-ext ...`` run in this process as their console scripts run them, the test doubles
    registered; anything else, or with ``process=True``, in a subprocess (helpers/commands.py). ``cwd`` is a fresh
    tmp dir unless given; ``env`` is added to the environment. Usage: ``run_cli(["lm-eval-ext", "--help"])``,
    ``run_cli([*doubles.LM_EVAL, "run", ...], timeout=300)`` (a subprocess with the doubles).
    """
    from helpers import commands

    echo = request.config.getoption("capture") == "no"  # with -s, the command's output shows as it comes

    def run(cmd, *, cwd=None, **options):
        return commands.run(cmd, cwd=cwd or tmp_path, echo=echo, **options)

    return run


@pytest.fixture(scope="session")
def source_tree_builds(tmp_path_factory):
    """A lock (filelock) to hold while pip builds the plugin from the checkout: setuptools writes the checkout's own
    ``build/`` and ``lm_eval_ext.egg-info/``, so two builds at once (one per xdist worker) spoil each other's files."""
    from filelock import FileLock

    return FileLock(str(tmp_path_factory.getbasetemp().parent / "source-tree-builds.lock"))


@pytest.fixture(scope="session")
def plugin_wheel(tmp_path_factory, source_tree_builds) -> Path:
    """The plugin's wheel, ``pip wheel`` of this checkout, built once per test run (asserts that it builds)."""
    from helpers.once import built_once

    def build(directory: Path) -> Path:
        with source_tree_builds:
            proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w",
                                   str(directory), str(PROJECT_ROOT)], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        (built,) = directory.glob("lm_eval_ext-*.whl")
        return built

    return built_once(tmp_path_factory, "plugin_wheel", build)


def _listing_once(tmp_path_factory, name: str, with_tasks_dir: bool) -> subprocess.CompletedProcess:
    """``lm_eval ls tasks`` as a user types it, run once per test run; or with ``--include_path`` of ``lm-eval-ext
    tasks-dir`` and the plugin's start-up hook off."""
    from helpers import commands
    from helpers.once import built_once

    def build(directory: Path) -> Path:
        cmd, options = ["lm_eval", "ls", "tasks"], {}
        if with_tasks_dir:
            tasks_dir = commands.run(["lm-eval-ext", "tasks-dir"], cwd=directory)
            assert tasks_dir.returncode == 0, tasks_dir.stderr
            cmd += ["--include_path", tasks_dir.stdout.strip()]
            # a process of its own: the start-up hook is off (its tasks come from --include_path) only in a process
            # that starts with LM_EVAL_EXT_AUTOLOAD=0
            options = {"env": {"LM_EVAL_EXT_AUTOLOAD": "0"}, "process": True}
        proc = commands.run(cmd, cwd=directory, **options)
        saved = directory / "listing.json"
        saved.write_text(json.dumps({"args": cmd, "returncode": proc.returncode, "stdout": proc.stdout,
                                     "stderr": proc.stderr}))
        return saved

    return subprocess.CompletedProcess(**json.loads(built_once(tmp_path_factory, name, build).read_text()))


@pytest.fixture(scope="session")
def plain_task_listing(tmp_path_factory) -> subprocess.CompletedProcess:
    """``lm_eval ls tasks``: the plain harness, the plugin found through its start-up hook, as a user types it (it
    parses the harness's ~14,700 built-in task YAMLs itself). Run once per test run for every test that checks what
    it lists; asserts nothing."""
    return _listing_once(tmp_path_factory, "lm_eval_ls_tasks", with_tasks_dir=False)


@pytest.fixture(scope="session")
def plain_task_listing_with_tasks_dir(tmp_path_factory) -> subprocess.CompletedProcess:
    """``lm_eval ls tasks --include_path DIR``, DIR printed by ``lm-eval-ext tasks-dir``, with the start-up hook off
    (``LM_EVAL_EXT_AUTOLOAD=0``: what it lists of the plugin comes from DIR); like :func:`plain_task_listing`, run
    once per test run; asserts nothing."""
    return _listing_once(tmp_path_factory, "lm_eval_ls_tasks_dir", with_tasks_dir=True)


# -- result directories written by the real harness (report, export and leaderboard tests) ----------------


@pytest.fixture(scope="session")
def lieder_scripted(tmp_path_factory, data_dir) -> Path:
    """lieder (base + diff) and lieder_two with a scripted log-likelihood table (helpers/scripted.py)."""
    from helpers import scripted
    from helpers.once import built_once

    return built_once(tmp_path_factory, "lieder_scripted", lambda tmp: scripted.lieder_scripted(tmp, data_dir))


@pytest.fixture(scope="session")
def lieder_tiny(tmp_path_factory, data_dir, tiny_model_dir) -> Path:
    """lieder (base + diff) with the tiny random hf model."""
    from helpers import scripted
    from helpers.once import built_once

    return built_once(tmp_path_factory, "lieder_tiny", lambda tmp: scripted.lieder_tiny(tmp, tiny_model_dir))


@pytest.fixture(scope="session")
def litm_scripted(tmp_path_factory, data_dir, tiny_model_dir) -> Path:
    """Four Lost in the Middle runs of one scripted model (helpers/scripted.py); their parent directory."""
    from helpers import scripted
    from helpers.once import built_once

    return built_once(tmp_path_factory, "litm_scripted", lambda tmp: scripted.litm_scripted(tmp, data_dir, tiny_model_dir))


@pytest.fixture(scope="session")
def magnifico_scripted(tmp_path_factory, data_dir) -> Path:
    """Three MAGNIFICo runs of one scripted model (helpers/scripted.py); their parent directory."""
    from helpers import scripted
    from helpers.once import built_once

    return built_once(tmp_path_factory, "magnifico_scripted", lambda tmp: scripted.magnifico_scripted(tmp, data_dir))


@pytest.fixture(scope="session")
def elitr_scripted(tmp_path_factory, data_dir) -> Path:
    """Two seed runs of the ELITR-Bench dev tasks judged by a stub judge (helpers/scripted.py)."""
    from helpers import scripted
    from helpers.once import built_once

    return built_once(tmp_path_factory, "elitr_scripted", lambda tmp: scripted.elitr_scripted(tmp))
