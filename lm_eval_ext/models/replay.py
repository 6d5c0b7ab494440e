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

With ``--apply_chat_template`` the model gives what the replayed run's model gave the harness, which the
saved answers record (lm_eval_ext.answers.ChatPrompts): its ``tokenizer_name``, its chat template (so the
results record the same ``chat_template`` and ``chat_template_sha``) and, for each chat, the prompt it
rendered, so that the tasks build the replayed run's prompts byte for byte. The chat template recorded is
the one the model gives for ``--apply_chat_template`` without a template name (a task is not told the name):
a run that named one of a model's several templates is resumed with the model's default one in its results.
"""
from __future__ import annotations

from lm_eval.api.model import LM

from ..answers import SavedAnswersError, chat_key, load
from ..boundary import restored_prompt


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

    def _chat(self) -> dict:
        if self.saved.chat is None:
            raise SavedAnswersError(
                f"{self.saved.folder} records no chat-formatted prompts (the run that saved these answers applied no "
                "chat template, or recorded none), so they cannot be replayed with --apply_chat_template: resume the "
                "run with the command it was started with.")
        return self.saved.chat

    @property
    def tokenizer_name(self) -> str:
        """The replayed run's ``tokenizer_name`` (the harness's request-cache fingerprint of a chat run)."""
        return self._chat()["tokenizer_name"]

    def chat_template(self, chat_template: bool | str = False) -> str | None:
        """The chat template the replayed run's model gave the harness, which the results record."""
        chat = self._chat()
        if "chat_template" not in chat:
            raise SavedAnswersError(
                f"{self.saved.folder} does not record the chat template of the run that saved it (its model gave "
                "none for --apply_chat_template without a template name), so the results could not name it: score "
                "the run again with the model itself.")
        return chat["chat_template"]

    def apply_chat_template(self, chat_history, add_generation_prompt: bool = True):
        """The prompt the replayed run's model rendered from ``chat_history``."""
        stored = self._chat()["prompts"].get(chat_key(chat_history, add_generation_prompt))
        if stored is None:
            raise SavedAnswersError(
                f"{self.saved.folder} holds no prompt of the replayed run for a chat of {len(chat_history)} "
                "message(s) that this run builds: resume a run with the command it was started with (same "
                "--apply_chat_template, --system_instruction, --fewshot_as_multiturn, --num_fewshot, --metadata).")
        return restored_prompt(stored)

    def get_model_info(self) -> dict:
        """The replayed model's name and arguments (when given), and where its answers were replayed from."""
        return dict(self.original)
