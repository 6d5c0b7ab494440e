"""Ctrl-C and SIGTERM in a run of plugin tasks: one paragraph (what was saved, how to finish), exit 130 / 143.

The paragraph names every directory where this process saved answers before scoring them
(lm_eval_ext.answers) and the ``lm-eval-ext resume DIR`` command that scores them and writes the
results; or says that nothing was saved. The exit status is 128 + the signal's number, what a shell
reports for a process the signal stopped: 130 for SIGINT, 143 for SIGTERM.

- ``lm-eval-ext run`` (and ``resume``) owns its process: :func:`handle_signals` makes SIGTERM raise
  :class:`Terminated` (a ``KeyboardInterrupt``, so that the clean-up of Ctrl-C runs for it too) and
  the command line prints the paragraph (:func:`stop`).
- Under the harness's ``lm_eval`` the plugin handles the signals only in its judging stage
  (:func:`during_scoring`), and a ``KeyboardInterrupt`` through the exception hook
  (lm_eval_ext.user_errors); elsewhere the harness's own behaviour stays.

In both, the first signal resets SIGINT and SIGTERM to the system's default, so that a second Ctrl-C
stops the process at once, whatever its clean-up is doing.
"""
from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from . import answers

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_PYTHON_DEFAULTS = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that the same clean-up runs (the judge's calls stop, files close)."""


def _on_signal(signum, _frame) -> None:
    for each in _SIGNALS:  # a second signal stops the process at once
        signal.signal(each, signal.SIG_DFL)
    raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def handle_signals() -> None:
    """For a process the plugin owns (``lm-eval-ext run``): Ctrl-C and SIGTERM raise (module docstring)."""
    for signum in _SIGNALS:
        signal.signal(signum, _on_signal)


@contextmanager
def during_scoring() -> Iterator[None]:
    """The plugin's scoring stage under the harness's command: Ctrl-C and SIGTERM raise, as with
    :func:`handle_signals`, while their handlers are Python's defaults (a script's own handlers are left
    alone); the defaults come back when the stage ends normally."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        yield
        return
    taken = [signum for signum in _SIGNALS if signal.getsignal(signum) is _PYTHON_DEFAULTS[signum]]
    for signum in taken:
        signal.signal(signum, _on_signal)
    try:
        yield
    finally:
        for signum in taken:
            # after a signal they stay the system's default: a second one during the clean-up stops at once
            if signal.getsignal(signum) is _on_signal:
                signal.signal(signum, _PYTHON_DEFAULTS[signum])


def exit_code(interrupt: KeyboardInterrupt) -> int:
    """130 for Ctrl-C, 143 for SIGTERM (128 + the signal's number)."""
    return 128 + (signal.SIGTERM if isinstance(interrupt, Terminated) else signal.SIGINT)


def paragraph(interrupt: KeyboardInterrupt) -> str:
    """What the user reads: the signal, what was saved, and the command that finishes the run."""
    what = "SIGTERM" if isinstance(interrupt, Terminated) else "Ctrl-C (SIGINT)"
    saved = answers.saved_by_this_process()
    if not saved:
        return (f"Stopped by {what} before any model answer was saved: there is nothing to resume; run the command "
                "again (with --use_cache PATH the harness keeps each answer as the model gives it, so a rerun with the "
                "same PATH asks the model only for the rest).")
    kept = "; ".join(f"the answers of {', '.join(tasks)} are saved in {folder}: `lm-eval-ext resume {folder}` scores "
                     "them and writes the run's results" for folder, tasks in saved.items())
    return (f"Stopped by {what}; {kept} (judge verdicts already given come from the judge's cache; tasks not "
            "answered yet must be run again).")


def stop(interrupt: KeyboardInterrupt) -> None:
    """Print :func:`paragraph` and end the process with :func:`exit_code` (in an interactive session: only print)."""
    # on a line of its own: the signal usually cuts a progress bar short, leaving its line open
    print(f"\nlm-eval-ext: {paragraph(interrupt)}", file=sys.stderr)
    if hasattr(sys, "ps1") or sys.flags.interactive:
        if signal.getsignal(signal.SIGINT) is signal.SIG_DFL:  # the session goes on: Ctrl-C as Python has it
            signal.signal(signal.SIGINT, signal.default_int_handler)
        return
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    # Not sys.exit: the judge's calls in flight would hold the exit (the interpreter joins their threads) for as
    # long as the judge takes to answer. What was saved is on disk already (answers, judge cache: autocommit).
    os._exit(exit_code(interrupt))
