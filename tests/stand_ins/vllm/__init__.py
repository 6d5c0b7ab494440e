"""A stand-in for the ``vllm`` package: exactly the objects ``lm_eval.models.vllm_causallms`` uses, scripted.

Put ``tests/stand_ins`` on ``PYTHONPATH`` (only the vLLM tests do) and ``--model vllm`` runs the harness's
own vLLM model class unchanged: it tokenizes, batches, truncates and parses outputs as it does with the real
engine; only :class:`LLM` answers from a script instead of a GPU. The script is the JSON file named by
``$VLLM_STAND_IN_SCRIPT`` (the same formats as the scripted harness models, tests/doubles/scripted.py):

- ``entries`` / ``default_logprob``: log-likelihoods, looked up by the decoded text of a prompt-logprobs request
  (context + continuation); the whole value is put on the last token, so the harness's sum over the
  continuation's tokens gives it exactly; ``is_greedy: false`` (and the default) puts a likelier token beside it;
- ``rules`` / ``default`` / ``turn_marker``: generations, the first rule whose ``contains`` is in the decoded
  prompt; ``{turn}`` becomes the number of ``turn_marker`` in the prompt. Stop strings end a generation and
  ``max_tokens`` cuts it, as in vLLM;
- ``calls_log``: a JSON line per ``generate`` call (``n_requests``, decoded ``prompts``, ``max_tokens``).

What it does not model: sampling (every rule is deterministic), batching limits, GPUs, LoRA.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import TypedDict

__version__ = "0.18.0"
SCRIPT_ENV = "VLLM_STAND_IN_SCRIPT"

# vLLM's SamplingParams fields (a fixed set: an unknown keyword is an error there too).
_SAMPLING_FIELDS = {
    "n": 1, "presence_penalty": 0.0, "frequency_penalty": 0.0, "repetition_penalty": 1.0, "temperature": 1.0,
    "top_p": 1.0, "top_k": 0, "min_p": 0.0, "seed": None, "stop": None, "stop_token_ids": None, "ignore_eos": False,
    "max_tokens": 16, "min_tokens": 0, "logprobs": None, "prompt_logprobs": None, "detokenize": True,
    "skip_special_tokens": True, "spaces_between_special_tokens": True, "include_stop_str_in_output": False,
}


class SamplingParams:
    """vLLM's sampling parameters: the same keywords, their defaults, TypeError on any other."""

    def __init__(self, **kwargs) -> None:
        unknown = set(kwargs) - set(_SAMPLING_FIELDS)
        if unknown:
            raise TypeError(f"SamplingParams got unexpected keyword arguments {sorted(unknown)}")
        self.__dict__.update({**_SAMPLING_FIELDS, **kwargs})


class TokensPrompt(TypedDict):
    """A prompt given as token ids."""

    prompt_token_ids: list[int]


@dataclass
class Logprob:
    """One token's log-probability in a ``prompt_logprobs`` entry."""

    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


class LLM:
    """The engine: loads the tokenizer of ``model`` and answers from ``$VLLM_STAND_IN_SCRIPT``."""

    def __init__(self, model: str, tokenizer: str | None = None, max_model_len: int | None = None,
                 trust_remote_code: bool = False, **engine_args) -> None:
        from transformers import AutoConfig, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(tokenizer or model, trust_remote_code=trust_remote_code)
        config = AutoConfig.from_pretrained(model, trust_remote_code=trust_remote_code)
        self.llm_engine = SimpleNamespace(model_config=SimpleNamespace(
            max_model_len=max_model_len or config.max_position_embeddings, trust_remote_code=trust_remote_code))
        script = json.loads(Path(os.environ[SCRIPT_ENV]).read_text(encoding="utf-8"))
        self.logprobs = {e["context"] + e["continuation"]: (float(e["logprob"]), bool(e.get("is_greedy", False)))
                         for e in script.get("entries", [])}
        self.default_logprob = script.get("default_logprob")
        self.rules, self.default = script.get("rules", []), script.get("default")
        self.turn_marker, self.calls_log = script.get("turn_marker"), script.get("calls_log")

    def _text(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)

    def _prompt_logprobs(self, ids: list[int]) -> list:
        text = self._text(ids)
        value, greedy = self.logprobs.get(text, (self.default_logprob, False))
        if value is None:
            raise KeyError(f"vLLM stand-in: no log-likelihood for {text!r} and no default_logprob in the script")
        entries: list = [None] + [{token: Logprob(0.0, 1)} for token in ids[1:]]
        entries[-1] = {ids[-1]: Logprob(value, 1 if greedy else 2)}
        if not greedy:  # a likelier token than the continuation's last one
            entries[-1][(ids[-1] + 1) % len(self.tokenizer)] = Logprob(value + 1.0, 1)
        return entries

    def _generate(self, ids: list[int], params: SamplingParams) -> str:
        prompt = self._text(ids)
        response = next((rule["response"] for rule in self.rules if rule["contains"] in prompt), self.default)
        if response is None:
            raise KeyError(f"vLLM stand-in: no rule matches the prompt and no default: {prompt[-300:]!r}")
        if self.turn_marker:
            response = response.replace("{turn}", str(prompt.count(self.turn_marker)))
        for stop in params.stop or []:
            if stop and stop in response:
                response = response[: response.index(stop)]
        tokens = self.tokenizer(response, add_special_tokens=False)["input_ids"]
        return self._text(tokens[: params.max_tokens]) if len(tokens) > params.max_tokens else response

    def generate(self, prompts: list[TokensPrompt], sampling_params=None, use_tqdm=True, lora_request=None) -> list:
        """One output per prompt: ``prompt_logprobs`` when asked for, else ``outputs[0].text``."""
        params = sampling_params if isinstance(sampling_params, list) else [sampling_params] * len(prompts)
        outputs = []
        for prompt, sampling in zip(prompts, params, strict=True):
            ids = prompt["prompt_token_ids"]
            if sampling.prompt_logprobs:
                outputs.append(SimpleNamespace(prompt_token_ids=ids, prompt_logprobs=self._prompt_logprobs(ids),
                                               outputs=[SimpleNamespace(text="", token_ids=[])]))
            else:
                text = self._generate(ids, sampling)
                outputs.append(SimpleNamespace(prompt_token_ids=ids, prompt_logprobs=None,
                                               outputs=[SimpleNamespace(text=text, token_ids=[])]))
        if self.calls_log and not any(s.prompt_logprobs for s in params):
            with open(self.calls_log, "a", encoding="utf-8") as handle:
                handle.write(json.dumps({"n_requests": len(prompts),
                                         "prompts": [self._text(p["prompt_token_ids"]) for p in prompts],
                                         "max_tokens": [s.max_tokens for s in params]}) + "\n")
        return outputs
