"""The test doubles: scripted harness models, a tiny offline hf model, a stub OpenAI-compatible server.

None of this ships in the wheel; the test suite registers the scripted models with the harness itself:

- in the pytest process: ``tests/conftest.py`` calls :func:`register` at start-up;
- in subprocesses: ``python -m doubles lm_eval run ...`` / ``python -m doubles lm-eval-ext run ...``
  (``doubles/__main__.py``) registers them, then runs the command, so under ``torchrun`` too
  (``torchrun ... -m doubles lm_eval run ...``). ``tests/`` must be on ``PYTHONPATH``
  (``helpers.files.subprocess_env``, which ``run_cli`` uses, puts it there).

docs/testing.md describes each double.
"""
from __future__ import annotations

import sys

# name -> "module:Class", registered as lazy placeholders: a double's module (and torch, for
# ext-scripted-dist) is imported only when a run names it.
MODELS = {
    "ext-loglik-table": "doubles.scripted:LoglikTableLM",
    "ext-canned-gen": "doubles.scripted:CannedGenLM",
    "ext-scripted-dist": "doubles.distributed:ScriptedDistributedLM",
    "ext-recording-hf": "doubles.recording:RecordingHFLM",
}

# The two commands with the doubles registered, for subprocesses: ``[*LM_EVAL, "run", ...]``.
LM_EVAL = (sys.executable, "-m", "doubles", "lm_eval")
LM_EVAL_EXT = (sys.executable, "-m", "doubles", "lm-eval-ext")


def register() -> None:
    """Register the scripted models with the harness's model registry (public API); idempotent."""
    # The harness fills its registry with the built-in models on the first lookup, but only while
    # the registry is empty: registering the doubles first would hide them. So the table goes first.
    import lm_eval.models  # noqa: F401
    from lm_eval.api.registry import model_registry

    for name, target in MODELS.items():
        if name not in model_registry:
            model_registry.register(name, target=target)
