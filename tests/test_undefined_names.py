"""Every name the code uses is defined somewhere it can be seen (pyflakes).

A misspelled or misplaced name fails only when its line first runs, which is often an error path: a hint copied
into the wrong function stopped `lm-eval-ext check --model " hf"` with a NameError instead of its paragraph.
"""
from __future__ import annotations

from pathlib import Path

from pyflakes import api, messages, reporter

ROOT = Path(__file__).resolve().parents[1]
UNDEFINED = (messages.UndefinedName, messages.UndefinedLocal, messages.UndefinedExport)


class _Collect(reporter.Reporter):
    def __init__(self):
        super().__init__(None, None)
        self.found: list[str] = []

    def flake(self, message) -> None:
        if isinstance(message, UNDEFINED):
            self.found.append(str(message))

    def syntaxError(self, filename, msg, lineno, offset, text) -> None:
        self.found.append(f"{filename}:{lineno}: {msg}")

    def unexpectedError(self, filename, msg) -> None:
        self.found.append(f"{filename}: {msg}")


def test_no_name_is_undefined():
    found = _Collect()
    api.checkRecursive([str(ROOT / folder) for folder in ("lm_eval_ext", "tests", "bench")], found)
    assert not found.found, "\n".join(found.found)
