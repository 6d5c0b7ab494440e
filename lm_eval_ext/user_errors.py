"""The plugin's own errors under the harness's ``lm_eval`` and ``simple_evaluate``: one paragraph, exit 2.

``lm-eval-ext`` prints an error a user can fix (:class:`lm_eval_ext.errors.UserError`) as one
paragraph, without a traceback (lm_eval_ext/cli.py). Under the harness's own command, or a script
calling ``lm_eval.simple_evaluate``, the plugin does not hold the top of the stack, so
:func:`install` puts an exception hook in front of ``sys.excepthook`` when the plugin's task code is
first imported (a run that uses no plugin task never gets it). The hook takes only what is the
plugin's:

- a ``UserError``, also one that the harness or a library re-raised as another exception (the
  chain of causes and contexts is followed): ``lm-eval-ext: error: <paragraph>``, exit status 2;
- Ctrl-C or SIGTERM: the paragraph of :mod:`lm_eval_ext.interrupts`, exit status 130 / 143.

Everything else (a bug, an error of the harness's own) goes to the hook that was there before,
unchanged, so it shows exactly as the harness shows it. In an interactive session the paragraph is
printed and the session goes on.
"""
from __future__ import annotations

import sys

from . import interrupts
from .errors import UserError

PREFIX = "lm-eval-ext: error: "
_previous = None  # the hook in place before ours


def plugin_error(exc: BaseException | None) -> UserError | None:
    """The plugin's ``UserError`` that ``exc`` is, or was raised from (its ``__cause__`` / ``__context__``
    chain), else None."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, UserError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    return None


def _hook(kind, value, traceback) -> None:
    if isinstance(value, KeyboardInterrupt):
        interrupts.stop(value)
        return
    error = plugin_error(value)
    if error is None:
        _previous(kind, value, traceback)
        return
    print(PREFIX + str(error), file=sys.stderr)
    if not (hasattr(sys, "ps1") or sys.flags.interactive):
        sys.exit(2)  # raised in the hook, SystemExit ends the interpreter with this status


def install() -> None:
    """Chain the hook (module docstring) in front of ``sys.excepthook``; once per process."""
    global _previous
    if _previous is None:
        _previous = sys.excepthook
        sys.excepthook = _hook
