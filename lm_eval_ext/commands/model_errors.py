"""A model's failure inside the harness's request methods, as one paragraph under ``lm-eval-ext run``.

``lm-eval-ext`` holds the top of the stack (lm_eval_ext/cli.py): beside the plugin's own errors
(lm_eval_ext/user_errors.py) it reports two failures of the run's model that a user can act on. Both are found
from the traceback: the innermost call of a request method (``loglikelihood``, ``generate_until``, ...) on a
harness model, and the model object of that call.

- The model refuses the kind of request: ``NotImplementedError`` (a chat-completions API asked for LIEDER's
  log-likelihoods).
- An API model's server stopped answering during the run: the request method failed, however the harness's
  adapter failed, and ``GET /v1/models`` at the model's ``base_url`` now gets no reply either.

Anything else keeps its traceback, as does plain ``lm_eval`` (the harness's own errors stay the harness's there).
"""
from __future__ import annotations

from ..errors import UserError

REQUEST_TYPES = ("loglikelihood", "loglikelihood_rolling", "generate_until")


def model_error(exc: BaseException) -> UserError | None:
    """One paragraph for a failure of the run's model (module docstring), else None."""
    call = _request_call(exc)
    if call is None:
        return None
    kind, model = call
    if isinstance(exc, NotImplementedError):
        return _refused(exc, kind, model)
    base_url = getattr(model, "base_url", None)
    return _server_lost(exc, kind, base_url) if isinstance(base_url, str) and base_url else None


def _request_call(exc: BaseException) -> tuple[str, object] | None:
    """The innermost request method of a harness model that ``exc`` went through, and the model."""
    from lm_eval.api.model import LM

    found, frames = None, exc.__traceback__
    while frames is not None:
        frame = frames.tb_frame
        if frame.f_code.co_name in REQUEST_TYPES and isinstance(frame.f_locals.get("self"), LM):
            found = frame.f_code.co_name, frame.f_locals["self"]
        frames = frames.tb_next
    return found


def _refused(exc: NotImplementedError, kind: str, model) -> UserError:
    what_to_do = ("LIEDER's tasks and the harness's multiple-choice tasks send these requests: run them with a model "
                  "that gives log-likelihoods, i.e. `hf`, `vllm`, or `local-completions` against a server that "
                  "returns the prompt's log-probabilities (docs/lieder.md)." if kind.startswith("loglikelihood") else
                  "Generation tasks send these requests: run them with a model that generates text.")
    return UserError(f"The model ({type(model).__name__}) does not answer the harness's {kind} requests, which a task "
                     f"of this run needs; it says: \"{str(exc).strip() or 'not implemented'}\" {what_to_do}")


def _server_lost(exc: BaseException, kind: str, base_url: str) -> UserError | None:
    from ..served_model import ServerUnavailable, check_reachable, endpoints

    try:
        check_reachable(base_url)
    except ServerUnavailable as now:
        said = (str(exc).strip().splitlines() or [""])[0][:200]
        return UserError(
            f"The model's server at {endpoints(base_url).where} (--model_args base_url) stopped answering during the "
            f"run: its {kind} requests failed ({type(exc).__name__}{f': {said}' if said else ''}), and it now "
            f"{now}. Nothing was scored or written. Start the server again and rerun the command; with --use_cache "
            "PATH the harness keeps every answer it receives, so a rerun asks the server only for the rest.")
    return None  # the server answers: the failure is something else, shown as the harness shows it
