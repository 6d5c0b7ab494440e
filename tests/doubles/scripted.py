"""Scripted harness models: answers chosen in advance, so a test knows the exact expected score.

``ext-loglik-table``
    ``--model_args table=/path/table.json``. The table is
    ``{"entries": [{"context": str, "continuation": str, "logprob": float,
    "is_greedy": bool}], "default": null | float}`` (``is_greedy`` optional,
    default false). ``loglikelihood`` looks up the exact (context,
    continuation) pair; a missing pair uses ``default`` (with
    ``is_greedy=False``) or, when ``default`` is null, raises
    :class:`ScriptedModelError` naming the pair.

``ext-canned-gen``
    ``--model_args responses=/path/responses.json[,calls_log=/path/calls.jsonl]``.
    The responses file is ``{"rules": [{"contains": str, "response": str}],
    "default": str | null, "turn_marker": str (optional)}``. The first rule
    whose ``contains`` is a substring of the prompt wins. ``{turn}`` in a
    response is replaced by the number of occurrences of ``turn_marker`` in
    the prompt. Generation kwargs (``until``, ...) are ignored: the response is
    returned verbatim. ``calls_log`` gets one JSON line per ``generate_until``
    call: ``{"n_requests": int, "prompts": [str], "gen_kwargs": [dict]}``.
    Chat templating (``--apply_chat_template``) renders messages as
    ``"<role>: <content>\\n"`` lines; its chat template (which the harness
    records, with its sha256) is :data:`CHAT_TEMPLATE`, the Jinja text of that.

Both accept (and ignore) the ``batch_size``, ``max_batch_size`` and ``device``
arguments the harness passes to every model, and ``pretrained=NAME``: nothing is
loaded, but the harness names the run after it (``model_name``, the results
folder) as it names a real model's run.
"""

from __future__ import annotations

import json
from pathlib import Path

from lm_eval.api.model import LM


# CannedGenLM.apply_chat_template's rendering as a Jinja chat template
CHAT_TEMPLATE = "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n{% endfor %}"


class ScriptedModelError(ValueError):
    """A scripted model was given a request or a script it cannot answer."""


def _load_json(path: str | Path, model: str, what: str) -> dict:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ScriptedModelError(f"{model}: cannot read the {what} file {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ScriptedModelError(f"{model}: the {what} file {path} must hold a JSON object")
    return data


class _ScriptedLM(LM):
    """Common part: single process, harness pass-through arguments ignored."""

    name = ""

    def __init__(self, batch_size=None, max_batch_size=None, device=None, pretrained=None) -> None:
        super().__init__()
        self._rank = 0
        self._world_size = 1

    def _unsupported(self, method: str):
        raise NotImplementedError(f"{self.name} is a scripted test model and does not implement {method}")

    def loglikelihood(self, requests):
        self._unsupported("loglikelihood (use ext-loglik-table)")

    def loglikelihood_rolling(self, requests):
        self._unsupported("loglikelihood_rolling")

    def generate_until(self, requests):
        self._unsupported("generate_until (use ext-canned-gen)")


class LoglikTableLM(_ScriptedLM):
    """Returns log-likelihoods looked up in a JSON table (see the module docstring)."""

    name = "ext-loglik-table"

    def __init__(self, table: str, **harness_args) -> None:
        super().__init__(**harness_args)
        self.table_path = str(table)
        data = _load_json(table, self.name, "table")
        self.default = data.get("default")
        self.table: dict[tuple[str, str], tuple[float, bool]] = {}
        try:
            for entry in data["entries"]:
                key = (entry["context"], entry["continuation"])
                value = (float(entry["logprob"]), bool(entry.get("is_greedy", False)))
                if self.table.get(key, value) != value:
                    raise ScriptedModelError(f"{self.name}: conflicting entries for {key!r} in {table}")
                self.table[key] = value
        except (KeyError, TypeError) as exc:
            raise ScriptedModelError(
                f"{self.name}: malformed table {table}: expected "
                '{"entries": [{"context", "continuation", "logprob"}...], "default": ...}'
                f" ({exc!r})"
            ) from exc

    def loglikelihood(self, requests):
        """``(logprob, is_greedy)`` per request, from the table."""
        results = []
        for req in requests:
            context, continuation = req.args
            result = self.table.get((context, continuation))
            if result is None:
                if self.default is None:
                    raise ScriptedModelError(
                        f"{self.name}: no entry for context={context!r}, continuation={continuation!r} "
                        f"in {self.table_path}, and its 'default' is null; add the pair or set a default"
                    )
                result = (float(self.default), False)
            self.cache_hook.add_partial("loglikelihood", req.args, result)
            results.append(result)
        return results


class CannedGenLM(_ScriptedLM):
    """Returns canned generations chosen by substring rules (see the module docstring)."""

    name = "ext-canned-gen"

    def __init__(self, responses: str, calls_log: str | None = None, **harness_args) -> None:
        super().__init__(**harness_args)
        self.responses_path = str(responses)
        data = _load_json(responses, self.name, "responses")
        self.rules = data.get("rules", [])
        if not all(isinstance(r, dict) and {"contains", "response"} <= r.keys() for r in self.rules):
            raise ScriptedModelError(f"{self.name}: every rule in {responses} needs 'contains' and 'response'")
        self.default = data.get("default")
        self.turn_marker = data.get("turn_marker")
        self.calls_log = calls_log

    def _respond(self, prompt: str) -> str:
        for rule in self.rules:
            if rule["contains"] in prompt:
                response = rule["response"]
                break
        else:
            if self.default is None:
                raise ScriptedModelError(
                    f"{self.name}: no rule of {self.responses_path} matches the prompt and its 'default' "
                    f"is null; prompt={prompt!r}"
                )
            response = self.default
        if self.turn_marker:
            response = response.replace("{turn}", str(prompt.count(self.turn_marker)))
        return response

    def generate_until(self, requests):
        """The canned response for each request's prompt, verbatim."""
        prompts = [req.args[0] for req in requests]
        if self.calls_log:
            record = {"n_requests": len(requests), "prompts": prompts, "gen_kwargs": [req.args[1] for req in requests]}
            with open(self.calls_log, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(record, default=str) + "\n")
        results = []
        for req, prompt in zip(requests, prompts):
            response = self._respond(prompt)
            self.cache_hook.add_partial("generate_until", req.args, response)
            results.append(response)
        return results

    @property
    def tokenizer_name(self) -> str:
        """Fingerprint for the harness's request cache."""
        return self.name

    def chat_template(self, chat_template=False) -> str:
        """:data:`CHAT_TEMPLATE`, which the harness records for a run with ``--apply_chat_template``."""
        return CHAT_TEMPLATE

    def apply_chat_template(self, chat_history, add_generation_prompt=True) -> str:
        """Render messages as ``"<role>: <content>\\n"`` lines.

        Nothing is appended for ``add_generation_prompt``: prompts stay exactly
        the concatenated lines, which keeps the rules in tests simple.
        """
        return "".join(f"{m['role']}: {m['content']}\n" for m in chat_history)
