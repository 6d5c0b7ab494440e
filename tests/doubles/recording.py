"""``ext-recording-hf``: the harness's own ``hf`` model, unchanged, that also records what it is asked to generate.

``--model_args calls_log=FILE,pretrained=...`` (every other argument is the ``hf`` model's): each
``generate_until`` call appends one JSON line to FILE, the ``[context, generation]`` pair of each request in the
order the harness gave them. For tests that check the exact contexts reaching a real model (the tiny one).
"""
from __future__ import annotations

import json
from pathlib import Path

from lm_eval.models.huggingface import HFLM


class RecordingHFLM(HFLM):
    """``hf`` with a log of its ``generate_until`` calls (module docstring)."""

    def __init__(self, calls_log: str, **hf_args) -> None:
        super().__init__(**hf_args)
        self._calls_log = Path(calls_log)

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        outputs = super().generate_until(requests, disable_tqdm)
        with self._calls_log.open("a", encoding="utf-8") as log:
            log.write(json.dumps([[request.args[0], output] for request, output in zip(requests, outputs)]) + "\n")
        return outputs


def read_calls(path: Path) -> list[list[tuple[str, str]]]:
    """The calls recorded in ``path`` (none when the model was never asked to generate)."""
    if not path.exists():
        return []
    return [[tuple(pair) for pair in json.loads(line)] for line in path.read_text(encoding="utf-8").splitlines()]
