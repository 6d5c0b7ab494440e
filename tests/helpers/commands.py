"""Running a command for a test as a user runs it: ``lm_eval`` and ``lm-eval-ext`` in this process, anything else in
a process of its own.

:func:`run` calls ``lm_eval ...`` and ``lm-eval-ext ...`` through their console-script functions, in this process
(the test doubles are registered here already, tests/conftest.py), with the command's ``sys.argv``, environment,
working directory, standard streams and exit status, as the interpreter would give them; then it puts back what the
command changed for the process (:func:`_process_state`), so that the next command starts as a fresh one would.
pdb, ``-s`` and a traceback reach the command. Every other command, and one given ``process=True``, runs with
``subprocess.run``, unpatched: that is for what needs a process of its own (signals, torchrun, a file-size limit,
the start-up hook, another interpreter), and the test says why.
"""
from __future__ import annotations

import contextlib
import io
import itertools
import logging
import os
import resource
import signal
import subprocess
import sys
import threading
import warnings
from importlib.metadata import EntryPoint

import pytest

import lm_eval_ext.task_base  # noqa: F401 -- a process that runs plugin tasks has the plugin's exception hook
from lm_eval_ext import answers, boundary

from .files import subprocess_env

# The console scripts (the harness's metadata and setup.py): run in this process.
CONSOLE_SCRIPTS = {"lm_eval": "lm_eval.__main__:cli_evaluate", "lm-eval-ext": "lm_eval_ext.cli:main"}
# Read only as an interpreter starts: a command that needs one of them set needs a process of its own.
STARTUP_ONLY = {"PYTHONPATH", "LM_EVAL_EXT_AUTOLOAD", "OMP_NUM_THREADS"}
_commands = itertools.count(1)


def run(cmd, *, cwd=None, env: dict | None = None, input: str | None = None, process: bool = False,
        timeout: float = 600, file_size_limit: int | None = None, echo: bool = False) -> subprocess.CompletedProcess:
    """Run ``cmd`` (a list) with ``env`` added to this environment; the ``CompletedProcess`` (text stdout and stderr,
    the exit status), asserting nothing. ``lm_eval`` / ``lm-eval-ext`` run in this process unless ``process``;
    ``timeout`` (seconds) and ``file_size_limit`` (bytes, RLIMIT_FSIZE: no file the command writes grows past it,
    as on a full disk) are for a subprocess. ``echo``: also show the command's output as it comes (``pytest -s``)."""
    cmd = [str(part) for part in cmd]
    if cmd[0] in CONSOLE_SCRIPTS and not process:
        assert file_size_limit is None, "a file-size limit needs a process of its own: process=True"
        return _in_process(cmd, cwd=cwd, env=env or {}, input=input, echo=echo)

    def limit() -> None:  # in the child, before it starts
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))

    return subprocess.run(cmd, cwd=cwd, env=subprocess_env(env), input=input, capture_output=True, text=True,
                          timeout=timeout, preexec_fn=None if file_size_limit is None else limit)


class _Output(io.TextIOWrapper):
    """A command's stdout or stderr, kept for the result (and passed on to ``echo`` as it comes)."""

    def __init__(self, echo) -> None:
        super().__init__(io.BytesIO(), encoding="utf-8", write_through=True)
        self.echo = echo

    def write(self, text: str) -> int:
        if self.echo is not None:
            self.echo.write(text)
        return super().write(text)

    def text(self) -> str:  # as subprocess's text mode reads it: universal newlines
        return self.buffer.getvalue().decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


def _in_process(cmd: list[str], *, cwd, env: dict, input: str | None, echo: bool) -> subprocess.CompletedProcess:
    startup = sorted(STARTUP_ONLY & set(env))
    assert not startup, f"{startup} are read as an interpreter starts: run {cmd[0]} with process=True"
    main = EntryPoint(cmd[0], CONSOLE_SCRIPTS[cmd[0]], "console_scripts").load()
    out, err = _Output(sys.stdout if echo else None), _Output(sys.stderr if echo else None)
    with _process_state(out, err), pytest.MonkeyPatch.context() as mp:
        for name, value in env.items():
            mp.setenv(name, str(value))
        mp.chdir(cwd or os.getcwd())
        mp.setattr(sys, "argv", list(cmd))
        mp.setattr(sys, "stdout", out)
        mp.setattr(sys, "stderr", err)
        if input is not None:  # else stdin is this process's, as a subprocess's would be
            mp.setattr(sys, "stdin", io.StringIO(input))
        # what a fresh interpreter reports an exception of a thread or an unraisable one with (not pytest's)
        mp.setattr(threading, "excepthook", threading.__excepthook__)
        mp.setattr(sys, "unraisablehook", sys.__unraisablehook__)
        mp.setattr(answers, "_RUN_ID", f"{answers._RUN_ID}-{next(_commands)}")  # one process, one run
        mp.setattr(answers, "_SAVED", {})
        returncode = _exit_status(main)
    return subprocess.CompletedProcess(cmd, returncode, out.text(), err.text())


def _exit_status(main) -> int:
    """What the interpreter makes of ``sys.exit(main())``: the status, or an uncaught exception shown by
    ``sys.excepthook`` (status 1, unless the hook exits with its own)."""
    try:
        code = main()
    except SystemExit as exit:
        code = exit.code
    except KeyboardInterrupt:  # a Ctrl-C of the test run itself
        raise
    except BaseException as error:  # noqa: BLE001 -- the interpreter's last resort
        try:
            sys.excepthook(type(error), error, error.__traceback__)
            return 1
        except SystemExit as exit:
            code = exit.code
    if code is None or isinstance(code, int):
        return code or 0
    print(code, file=sys.stderr)
    return 1


@contextlib.contextmanager
def _process_state(out: _Output, err: _Output):
    """Put back, once the command ended, what it set for its process: the environment, ``sys.path``,
    ``sys.excepthook``, signal handlers, warning filters, logging, the plugin's task-index setting. While it runs,
    logging and warnings are as in a fresh interpreter: no root handler (warnings print through
    ``logging.lastResort``), the default warning filters, the harness's once-only warnings not yet given."""
    from lm_eval.utils import info_once, warning_once

    environ, path, hook, settings = dict(os.environ), sys.path[:], sys.excepthook, dict(boundary._settings)
    handlers = {signum: signal.getsignal(signum) for signum in signal.valid_signals()}
    loggers = {logger: (logger.level, logger.propagate, logger.disabled, logger.filters[:], logger.handlers[:])
               for logger in [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
               if isinstance(logger, logging.Logger)}
    outer = logging.getLogger().handlers[:]  # pytest's log capture, on the root and every non-propagating logger
    for logger in loggers:
        logger.handlers[:] = [handler for handler in logger.handlers if handler not in outer]
    logging.getLogger().setLevel(logging.WARNING)
    _rebind({id(sys.stdout): out, id(sys.stderr): err, id(sys.__stdout__): out, id(sys.__stderr__): err})
    back = {id(out): sys.stdout, id(err): sys.stderr}
    for once in (info_once, warning_once):
        once.cache_clear()
    with warnings.catch_warnings():
        warnings.resetwarnings()
        for category in (ResourceWarning, ImportWarning, PendingDeprecationWarning, DeprecationWarning):
            warnings.filterwarnings("ignore", category=category)
        warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")
        warnings.showwarning = _show_warning
        try:
            yield
        finally:
            _rebind(back)  # a handler the command set up stays, as in a process, writing where the process writes
            for logger, (level, propagate, disabled, filters, before) in loggers.items():
                logger.setLevel(level)
                logger.propagate, logger.disabled, logger.filters[:] = propagate, disabled, filters
                logger.handlers[:] = before + [handler for handler in logger.handlers if handler not in before]
            for signum, handler in handlers.items():
                if handler is not None and signal.getsignal(signum) is not handler:
                    signal.signal(signum, handler)
            sys.excepthook, sys.path[:] = hook, path
            boundary._settings.clear()
            boundary._settings.update(settings)
            for name in set(os.environ) - set(environ):
                del os.environ[name]
            os.environ.update(environ)


def _rebind(streams: dict) -> None:
    """Point every logging handler that writes to one of ``streams`` (by id) to the stream it maps to."""
    for logger in [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]:
        for handler in getattr(logger, "handlers", ()):
            # (logging.lastResort's kind has no stream of its own: it writes to sys.stderr as it is then)
            if isinstance(handler, logging.StreamHandler) and id(vars(handler).get("stream")) in streams:
                handler.setStream(streams[id(handler.stream)])


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """As the interpreter shows a warning: on the (command's) stderr."""
    (file or sys.stderr).write(warnings.formatwarning(message, category, filename, lineno, line))
