"""``ext-replay``: a harness model that answers every request from a run's saved answers (lm_eval_ext.answers).

``lm-eval-ext resume DIR`` runs the saved run's command again with ``--model ext-replay`` and
``--model_args`` holding ``answers=DIR``, ``replayed_model=<the run's --model>`` and every one of
the run's own model arguments, which this model accepts and ignores: the harness then names the
resumed run as it named the original (``model_name`` and the results folder come from
``pretrained=``, ``model=``, ...), the tasks get the same ``--metadata`` (context length, tokenizer),
and the results' ``config`` records the original model and arguments with ``resumed_from`` naming
``DIR``. Generation is not repeated, only scoring. A request is matched to its saved response by
task, document and request index; one without a saved response is an error (the run being resumed
did not ask it).
"""
from __future__ import annotations

from lm_eval.api.model import LM

from ..answers import SavedAnswersError, load
from . import NAME, OWN_ARGS


class ReplayLM(LM):
    """Answers from saved responses (module docstring)."""

    def __init__(self, answers: str, replayed_model: str | None = None, batch_size=None, max_batch_size=None,
                 device=None, **replayed_args) -> None:
        super().__init__()
        self.saved = load(answers)
        self.original = {"resumed_from": str(self.saved.folder)}
        if replayed_model is not None:
            self.original |= {"model": replayed_model, "model_args": replayed_args}

    def _answer(self, request):
        try:
            resps = self.saved.responses[request.task_name][request.doc_id, request.idx]
        except KeyError:
            raise SavedAnswersError(
                f"{self.saved.folder} holds no saved answer for {request.task_name} document {request.doc_id} "
                f"(request {request.idx}): resume a run with the command it was started with (same --tasks, "
                "--limit, --samples).") from None
        (response,) = resps  # one response per request (repeats are not replayed)
        return tuple(response) if request.request_type.startswith("loglikelihood") else response

    def loglikelihood(self, requests):
        """The saved (log-probability, is-greedy) of each request."""
        return [self._answer(r) for r in requests]

    def loglikelihood_rolling(self, requests):
        """The saved rolling log-likelihood of each request."""
        return [self._answer(r) for r in requests]

    def generate_until(self, requests):
        """The saved generation of each request."""
        return [self._answer(r) for r in requests]

    def ext_conversation(self, requests):
        """The saved record of each conversation turn (the request type boundary.CONVERSATION)."""
        return [self._answer(r) for r in requests]

    def get_model_info(self) -> dict:
        """The replayed model's name and arguments (when given), and where its answers were replayed from."""
        return dict(self.original)
