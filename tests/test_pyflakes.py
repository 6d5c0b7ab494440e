"""pyflakes finds nothing in the package, the tests and ``bench/``.

Above all no name used but defined nowhere it can be seen: such a name fails only when its line first runs, which is
often an error path (a hint pasted into the wrong function once stopped `lm-eval-ext check --model " hf"` with a
NameError instead of its paragraph). Also no unused import or variable, no redefinition. An import made for its
side effect is marked ``# noqa: F401`` on its line, as flake8 reads it (pyflakes itself reads no such marks).
"""
from __future__ import annotations

from pathlib import Path

from pyflakes import api, messages, reporter

ROOT = Path(__file__).resolve().parents[1]


class _Collect(reporter.Reporter):
    def __init__(self):
        super().__init__(None, None)
        self.found: list[str] = []

    def flake(self, message) -> None:
        if isinstance(message, messages.UnusedImport):
            line = Path(message.filename).read_text(encoding="utf-8").splitlines()[message.lineno - 1]
            if "# noqa: F401" in line:
                return
        self.found.append(str(message))

    def syntaxError(self, filename, msg, lineno, offset, text) -> None:
        self.found.append(f"{filename}:{lineno}: {msg}")

    def unexpectedError(self, filename, msg) -> None:
        self.found.append(f"{filename}: {msg}")


def test_pyflakes_finds_nothing():
    found = _Collect()
    api.checkRecursive([str(ROOT / folder) for folder in ("lm_eval_ext", "tests", "bench")], found)
    assert not found.found, "\n".join(found.found)
