"""Shared fixtures: the tiny hf model, the OpenAI stub server, the data mirror, a CLI runner, and result
directories written by the real harness (built by tests/helpers/scripted.py, once per session)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[1]

# Test the checkout even when the package is not installed. When it is
# installed (e.g. `pip install .`), the installed copy is left in charge, so a
# wheel test is not silently shadowed by the source tree.
_FROM_CHECKOUT = importlib.util.find_spec("lm_eval_ext") is None
if _FROM_CHECKOUT:
    sys.path.insert(0, str(PROJECT_ROOT))

# Subprocesses started by run_cli get these on top of the current environment.
OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """Directory of the tiny random Llama (2 layers, hidden 64, vocab 1000), built once per session."""
    from lm_eval_ext.testing.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny_model"))


@pytest.fixture
def stub_openai():
    """A running :class:`StubOpenAIServer` with default options (fixed reply ``"stub reply"``).

    For other options (responder, faults, delay), build one in the test:
    ``with StubOpenAIServer(...) as srv``.
    """
    from lm_eval_ext.testing.stub_openai import StubOpenAIServer

    with StubOpenAIServer() as srv:
        yield srv


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The data mirror: ``$LM_EVAL_EXT_DATA_DIR``, else ``<project root>/../shared/data``.

    Exported (as an absolute path) as ``LM_EVAL_EXT_DATA_DIR`` for the session,
    so subprocesses see it. Skips the test when the directory does not exist.
    """
    path = Path(os.environ.get("LM_EVAL_EXT_DATA_DIR") or PROJECT_ROOT.parent / "shared" / "data").resolve()
    if not path.is_dir():
        pytest.skip(f"data mirror not found at {path}; set LM_EVAL_EXT_DATA_DIR to the mirror directory")
    with pytest.MonkeyPatch.context() as mp:
        # absolute, so subprocesses running in other directories find it too
        mp.setenv("LM_EVAL_EXT_DATA_DIR", str(path))
        yield path


@pytest.fixture
def run_cli(tmp_path):
    """Run a command (list of str) in a subprocess; returns the ``CompletedProcess``, asserts nothing.

    The subprocess gets the current environment plus :data:`OFFLINE_ENV`, this
    interpreter's bin dir first on ``PATH`` (so ``lm_eval`` and ``lm-eval-ext``
    are this venv's), the checkout on ``PYTHONPATH`` when the package is not
    installed, and ``cwd`` = a fresh tmp dir unless given. stdout/stderr are
    captured as text. Usage: ``run_cli(["lm_eval", "--help"], env={...}, timeout=300)``.
    """

    def run(cmd, *, env: dict | None = None, cwd=None, timeout: float = 600, input: str | None = None):
        full_env = {**os.environ, **OFFLINE_ENV}
        full_env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), full_env.get("PATH", "")])
        if _FROM_CHECKOUT:
            full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), full_env.get("PYTHONPATH")]))
        full_env.update(env or {})
        return subprocess.run(
            [str(c) for c in cmd],
            cwd=cwd or tmp_path,
            env=full_env,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    return run


# -- result directories written by the real harness (report, export and leaderboard tests) ----------------


@pytest.fixture(scope="session")
def lieder_scripted(tmp_path_factory, data_dir) -> Path:
    """lieder (base + diff) and lieder_two with a scripted log-likelihood table (helpers/scripted.py)."""
    from helpers import scripted

    return scripted.lieder_scripted(tmp_path_factory.mktemp("lieder_scripted"), data_dir)


@pytest.fixture(scope="session")
def lieder_tiny(tmp_path_factory, data_dir, tiny_model_dir) -> Path:
    """lieder (base + diff) with the tiny random hf model."""
    from helpers import scripted

    return scripted.lieder_tiny(tmp_path_factory.mktemp("lieder_tiny"), tiny_model_dir)


@pytest.fixture(scope="session")
def litm_scripted(tmp_path_factory, data_dir, tiny_model_dir) -> Path:
    """Four Lost in the Middle runs of one scripted model (helpers/scripted.py); their parent directory."""
    from helpers import scripted

    return scripted.litm_scripted(tmp_path_factory.mktemp("litm_scripted"), data_dir, tiny_model_dir)


@pytest.fixture(scope="session")
def magnifico_scripted(tmp_path_factory, data_dir) -> Path:
    """Three MAGNIFICo runs of one scripted model (helpers/scripted.py); their parent directory."""
    from helpers import scripted

    return scripted.magnifico_scripted(tmp_path_factory.mktemp("magnifico_scripted"), data_dir)


@pytest.fixture(scope="session")
def elitr_scripted(tmp_path_factory, data_dir) -> Path:
    """Two seed runs of the ELITR-Bench dev tasks judged by a stub judge (helpers/scripted.py)."""
    from helpers import scripted

    return scripted.elitr_scripted(tmp_path_factory.mktemp("elitr_scripted"))
