"""``python -m doubles[.MODULE] ...`` commands forked from a process that has the heavy libraries imported already.

A harness command of the test doubles spends much of its CPU time importing third-party libraries (torch,
transformers, datasets, pandas, scipy, ...: about 6 of the 9 seconds of a short run of the tiny hf model), and the
suite starts many such commands. :func:`run` is ``subprocess.run(cmd, capture_output=True, text=True, ...)``; for a
``python -m doubles`` command it asks a server (``python -m helpers.preforked``, one per pytest process and
environment, started on first use) that imported those libraries once to fork. The child takes the command's
working directory, environment, standard streams and ``sys.argv``, then runs the module as ``python -m`` does and
ends as an interpreter ends (exit status, traceback, ``atexit``), but without tearing down its objects
(:func:`_end_as_an_interpreter`). Nothing of the harness or the plugin is imported before the fork. The server freezes
its objects (``gc.freeze``) before it forks: a child's garbage collections then leave the preloaded objects, and the
memory pages they share with the server, untouched.

A few environment variables are read when those libraries are imported (the Hugging Face and torch settings,
``PYTHONPATH``, ``HOME``, the plugin's start-up switch, those of tests/startup): a command whose values of them differ
gets a server of its own (of the two a pytest process keeps, the one used longest ago makes way).

``torchrun ... -m doubles ...`` starts as usual, and its workers are forked too: torchrun starts each worker with
the interpreter ``PYTHON_EXEC`` names (torch/distributed/run.py), here a launcher script that hands the worker's
standard streams, directory, environment and arguments to the server over a Unix socket and stands in for the
worker (same pid for torchrun to watch, signals passed on, the worker's exit status or signal). torchrun's worker
variables (``RANK``, ``TORCHELASTIC_*``, ...) are read when the run starts its process group, not at import, so the
workers fork from the server of the command's own start-up variables. A command a test signals or kills goes
through :func:`popen`, the same launcher in a ``subprocess.Popen``, whose signals go to the forked command. Every
other command (the installed ``lm_eval`` and ``lm-eval-ext`` a user types, a script) starts a fresh interpreter.
"""
from __future__ import annotations

import atexit
import gc
import io
import json
import locale
import os
import resource
import selectors
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import types
from pathlib import Path
from typing import NoReturn

from doubles import builtin_index, env_report

# The third-party modules harness commands import, by name: transformers loads its parts lazily, so the parts a
# model load needs (the tiny model is a Llama) are named too. Measured: a forked `--model hf` run of lieder_base
# took 6.3-9.5 s of CPU time with only the top-level packages preloaded, 3.4-3.7 s with these and gc.freeze; a
# server takes ~10 s instead of ~4 to start.
PRELOAD = ("torch", "torch.distributed.tensor", "transformers", "transformers.modeling_utils",
           "transformers.models.auto.modeling_auto", "transformers.models.auto.tokenization_auto",
           "transformers.models.llama.modeling_llama", "datasets", "pandas", "scipy.stats", "sacrebleu", "jinja2",
           "httpx", "requests", "accelerate", "pytablewriter", "openai", "pooch", "matplotlib.figure",
           "sqlparse", "jsonschema")
# Variables the preloaded libraries (or the interpreter) read at start-up: a server serves one set of values.
STARTUP_PREFIXES = ("PYTHON", "HF_", "HUGGINGFACE", "TRANSFORMERS", "TORCH", "PYTORCH", "CUDA", "OMP_", "MKL_",
                    "OPENBLAS_", "KMP_", "TOKENIZERS_", "XDG_", "LD_", "LC_")
STARTUP_NAMES = {"HOME", "LANG", "TMPDIR", "LM_EVAL_EXT_AUTOLOAD", "PREFORKED_PRELOAD",
                 builtin_index.ENV, env_report.ENV}  # the suite's start-up hooks (tests/startup) read these two
# Set by a library in its own process, as the command would set it: torch the inductor cache folder (to the default
# its children would compute), scikit-learn KMP_DUPLICATE_LIB_OK (os.environ.setdefault at import; only the Intel and
# LLVM OpenMP runtimes read it, when a second copy of one loads). Keyed on, a pytest worker that imported scikit-learn
# would start a second server for the same commands.
NOT_STARTUP = {"TORCHINDUCTOR_CACHE_DIR", "KMP_DUPLICATE_LIB_OK"}
TORCHRUN = os.path.join(os.path.dirname(sys.executable), "torchrun")
MAX_SERVERS = 2  # per pytest process: each holds the libraries in memory (about 0.6 GB)

_servers: dict[tuple, _Server] = {}  # by their environment's start-up variables, the most recently used last
served = 0  # commands forked so far in this process
_lock = threading.Lock()


def _doubles_module(cmd: list[str]) -> str | None:
    """The module of a ``python -m doubles[.MODULE] ...`` command, else None."""
    if cmd[:2] == [sys.executable, "-m"] and len(cmd) > 2 and cmd[2].split(".")[0] == "doubles":
        return cmd[2]
    return None


def _limit_file_size(limit: int | None):
    """A ``preexec_fn`` under which no file grows past ``limit`` bytes (RLIMIT_FSIZE), or None."""
    return None if limit is None else lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def run(cmd, *, cwd=None, env: dict | None = None, timeout: float | None = None, input: str | None = None,
        fresh: bool = False, file_size_limit: int | None = None) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, cwd=cwd, env=env, input=input, capture_output=True, text=True, timeout=timeout)``,
    a ``python -m doubles[.MODULE]`` command forked from a preloaded server unless ``fresh``. With
    ``file_size_limit``, no file the command writes grows past that many bytes (RLIMIT_FSIZE: a write past it
    fails as on a full disk); ``torchrun`` then starts its workers as usual, so that they inherit the limit."""
    global served
    cmd = [str(c) for c in cmd]
    env = dict(os.environ if env is None else env)
    workers = (cmd[0] == TORCHRUN and "-m" in cmd and cmd[cmd.index("-m") + 1:][:1] == ["doubles"]
               and file_size_limit is None)
    server = None if fresh or not (workers or _doubles_module(cmd)) else _server(env, idle=True)
    if server is None:
        return subprocess.run(cmd, cwd=cwd, env=env, input=input, capture_output=True, text=True, timeout=timeout,
                              preexec_fn=_limit_file_size(file_size_limit))
    try:
        if workers:  # torchrun itself starts as usual; its workers fork from the server (module docstring)
            before = server.forked()
            proc = subprocess.run(cmd, cwd=cwd, env={**env, "PYTHON_EXEC": server.launcher}, input=input,
                                  capture_output=True, text=True, timeout=timeout)
            served += server.forked() - before
        else:
            proc = server.run(cmd, cwd=os.fspath(cwd or os.getcwd()), env=env, timeout=timeout, input=input,
                              file_size_limit=file_size_limit)
            served += 1
    finally:
        server.busy.release()
    return proc


def popen(cmd, *, env: dict | None = None, **kwargs) -> subprocess.Popen:
    """``subprocess.Popen(cmd, env=env, **kwargs)``; a ``python -m doubles`` command is forked from a preloaded
    server: the ``Popen`` is then that of a launcher standing in for it (helpers/fork_launcher.py: it takes the
    ``Popen``'s standard streams, directory, environment and ``preexec_fn`` to the command and ends as the command
    ends), and :meth:`~subprocess.Popen.send_signal`, ``terminate`` and ``kill`` signal the command itself."""
    global served
    cmd = [str(c) for c in cmd]
    env = dict(os.environ if env is None else env)
    server = _server(env, idle=False) if _doubles_module(cmd) else None
    if server is None:
        return subprocess.Popen(cmd, env=env, **kwargs)
    proc = _Launched(server, cmd, env=env, **kwargs)
    served += 1
    return proc


def _server(env: dict, idle: bool) -> _Server | None:
    """The server for ``env``'s start-up variables (started if need be), None if there is no room for one; with
    ``idle``, only if no other thread's command is using it, and then held (``busy``) for the caller."""
    key = tuple(sorted((k, v) for k, v in env.items()
                       if (k.startswith(STARTUP_PREFIXES) or k in STARTUP_NAMES) and k not in NOT_STARTUP))
    with _lock:
        server = _servers.pop(key, None)
        if server is None and len(_servers) >= MAX_SERVERS:  # the server used longest ago makes room, if idle
            oldest = next(iter(_servers))
            if _servers[oldest].busy.acquire(blocking=False):
                _servers.pop(oldest).stop()
        if server is None and len(_servers) < MAX_SERVERS:
            server = _Server(env)
        if server is not None:
            _servers[key] = server  # the most recently used last
    if server is not None and idle and not server.busy.acquire(blocking=False):  # another thread's command uses it
        return None
    return server


class _Launched(subprocess.Popen):
    """The ``Popen`` of a launcher whose command the server forked; signals go to the forked command (``forked_pid``),
    the one that can handle them (a SIGKILL can only be passed on by sending it there)."""

    def __init__(self, server: _Server, cmd: list[str], **kwargs):
        pid_read, pid_write = os.pipe()
        try:
            super().__init__([*server.launch, "--pid-fd", str(pid_write), *cmd[1:]],
                             pass_fds=(*kwargs.pop("pass_fds", ()), pid_write), **kwargs)
        finally:
            os.close(pid_write)
        with open(pid_read, encoding="ascii") as reply:
            pid = reply.readline()
        self.args = cmd
        self.forked_pid = int(pid) if pid else None  # None: the launcher failed before the fork (its stderr says why)

    def send_signal(self, sig: int) -> None:
        """Send ``sig`` to the forked command (to the launcher if there is none)."""
        self.poll()
        if self.returncode is not None:
            return
        try:
            os.kill(self.forked_pid or self.pid, sig)
        except ProcessLookupError:  # it has just ended; the launcher ends with its status
            pass


class _Server:
    """The client side of one server: requests and replies are JSON lines on its stdin and stdout (torchrun's
    launchers send theirs on its socket)."""

    def __init__(self, env: dict):
        self.scratch = tempfile.TemporaryDirectory(prefix="preforked-server-")
        address = os.path.join(self.scratch.name, "socket")
        self.proc = subprocess.Popen([sys.executable, "-m", "helpers.preforked", address], env=env,
                                     cwd=tempfile.gettempdir(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        self.busy = threading.Lock()
        ready = self.proc.stdout.readline()
        assert ready.strip() == "ready", f"the preloaded server did not start ({ready!r})"
        # torchrun's PYTHON_EXEC: one executable, so a script that runs the launcher without site-packages
        self.launch = [sys.executable, "-S", str(Path(__file__).with_name("fork_launcher.py")), address]
        self.launcher = os.path.join(self.scratch.name, "python")
        Path(self.launcher).write_text(f'#!/bin/sh\nexec {shlex.join(self.launch)} "$@"\n')
        os.chmod(self.launcher, 0o700)
        atexit.register(self.stop)

    def stop(self) -> None:
        """End the server (it ends when its stdin closes) and wait for it."""
        if not self.proc.stdin.closed:
            self.proc.stdin.close()
        self.proc.wait(60)
        self.proc.stdout.close()
        self.scratch.cleanup()

    def forked(self) -> int:
        """How many commands the server has forked, for this process's and for torchrun's launchers."""
        self.proc.stdin.write(json.dumps({"count": True}) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())["forked"]

    def run(self, cmd: list[str], *, cwd: str, env: dict, timeout: float | None, input: str | None,
            file_size_limit: int | None) -> subprocess.CompletedProcess:
        with tempfile.TemporaryDirectory(prefix="preforked-") as scratch:
            streams = {name: os.path.join(scratch, name) for name in ("stdin", "stdout", "stderr")}
            Path(streams["stdin"]).write_text(input or "", encoding=locale.getpreferredencoding(False))
            request = {"module": cmd[2], "argv": cmd[3:], "cwd": cwd, "env": env, **streams,
                       "file_size_limit": file_size_limit}
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            pid = json.loads(self.proc.stdout.readline())["pid"]
            timed_out = threading.Event()

            def kill() -> None:
                timed_out.set()
                os.kill(pid, signal.SIGKILL)

            timer = threading.Timer(timeout, kill) if timeout else None
            if timer:
                timer.start()
            try:
                reply = self.proc.stdout.readline()
            finally:
                if timer:
                    timer.cancel()
            assert reply, "the preloaded server stopped"
            returncode = os.waitstatus_to_exitcode(json.loads(reply)["status"])
            stdout, stderr = (_read_text(streams[name]) for name in ("stdout", "stderr"))
        if timed_out.is_set():
            raise subprocess.TimeoutExpired(cmd, timeout, output=stdout, stderr=stderr)
        return subprocess.CompletedProcess(cmd, returncode, stdout, stderr)


def _read_text(path: str) -> str:
    # as subprocess's text mode decodes: the locale's encoding, universal newlines
    with open(path, encoding=locale.getpreferredencoding(False), newline=None) as handle:
        return handle.read()


def _serve(address: str) -> dict:
    """The server: import the libraries, then fork once per request (its pytest process's, on stdin, one at a time;
    torchrun's launchers', on the socket at ``address``, any number at once); returns only in a child, with its
    request."""
    import importlib

    names = os.environ.get("PREFORKED_PRELOAD")  # comma-separated, instead of PRELOAD (the helper's own test)
    for name in PRELOAD if names is None else filter(None, names.split(",")):
        importlib.import_module(name)
    gc.freeze()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen()
    wakeup, wake = os.pipe()  # a child's end wakes the loop (SIGCHLD)
    os.set_blocking(wake, False)
    signal.set_wakeup_fd(wake)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    events = selectors.DefaultSelector()
    for source in (sys.stdin, listener, wakeup):
        events.register(source, selectors.EVENT_READ)
    waiting: dict[int, socket.socket | None] = {}  # child -> the launcher to tell (None: the pytest process)
    forked, stopping = 0, False
    print("ready", flush=True)
    while not (stopping and not waiting):
        for key, _ in events.select():
            if key.fileobj is wakeup:
                os.read(wakeup, 4096)
                continue
            if key.fileobj is listener:
                client = listener.accept()[0]
                request, fds = _receive(client)
                request["fds"] = fds
            else:
                line = sys.stdin.readline()
                if not line:  # the pytest process is done with this server: end once its commands have ended
                    events.unregister(sys.stdin)
                    events.unregister(listener)
                    stopping = True
                    continue
                client, request = None, json.loads(line)
                if request.get("count"):
                    print(json.dumps({"forked": forked}), flush=True)
                    continue
            sys.stdout.flush()
            pid = os.fork()
            if pid == 0:
                for resource in (events, listener, *filter(None, (*waiting.values(), client))):
                    resource.close()
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                os.close(wakeup)
                os.close(wake)
                return request
            forked += 1
            for fd in request.get("fds", ()):
                os.close(fd)
            waiting[pid] = client
            _reply(client, {"pid": pid})
        while waiting:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            client = waiting.pop(pid)
            _reply(client, {"status": status})
            if client is not None:
                client.close()
    sys.exit(0)


def _receive(client: socket.socket) -> tuple[dict, list[int]]:
    """A launcher's request: one JSON line, its standard streams as file descriptors alongside."""
    data, fds = b"", []
    while not data.endswith(b"\n"):
        chunk, more, _, _ = socket.recv_fds(client, 1 << 16, 3)
        assert chunk, "a launcher closed its connection before its request"
        data, fds = data + chunk, fds + more
    return json.loads(data), fds


def _reply(client: socket.socket | None, message: dict) -> None:
    line = json.dumps(message) + "\n"
    if client is None:
        print(line, end="", flush=True)
        return
    try:
        client.sendall(line.encode())
    except OSError:  # the launcher is gone (torchrun killed it): nobody waits for this worker
        pass


def _become(request: dict) -> None:
    """In the forked child: take the command's directory, environment and streams, and run its module as
    ``python -m`` does."""
    import runpy

    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    if request.get("file_size_limit") is not None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (request["file_size_limit"],) * 2)
    if "fds" in request:  # a launcher's command: its streams, and SIGINT as the launcher's interpreter started with
        for fd, target in enumerate(request["fds"]):
            os.dup2(target, fd)
            os.close(target)
        signal.signal(signal.SIGINT, signal.SIG_IGN if request["sigint_ignored"] else signal.default_int_handler)
        for fd, name in ((1, "stdout"), (2, "stderr")) if request["unbuffered"] else ():  # as `python -u` makes them
            stream = getattr(sys, name)
            setattr(sys, name, io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), encoding=stream.encoding,
                                                errors=stream.errors, write_through=True))
    else:
        for fd, name, flags in ((0, "stdin", os.O_RDONLY), (1, "stdout", os.O_WRONLY), (2, "stderr", os.O_WRONLY)):
            target = os.open(request[name], flags | (os.O_CREAT | os.O_TRUNC if fd else 0), 0o600)
            os.dup2(target, fd)
            os.close(target)
    sys.path[0] = os.getcwd()  # as `python -m` puts the working directory first
    sys.argv = ["-m", *request["argv"]]
    _end_as_an_interpreter(lambda: runpy.run_module(request["module"], run_name="__main__", alter_sys=True))


def _end_as_an_interpreter(main) -> NoReturn:
    """Run ``main()``, then end the process as ``python -m`` ends it (Modules/main.c, Py_FinalizeEx): the uncaught
    exception's traceback or SystemExit's message and status, non-daemon threads joined, ``atexit`` handlers, the
    files it left open flushed, the standard streams flushed (120 if that fails), an uncaught KeyboardInterrupt
    ending it by SIGINT. Then the process leaves without tearing down its objects: that would free the server's
    preloaded objects one reference count at a time, writing to nearly every memory page the fork shares with the
    server (measured: 0.4 to 0.5 CPU seconds of copy-on-write page faults per command, for nothing observable)."""
    import ctypes

    interrupted = False
    try:
        main()
        status = 0
    except SystemExit as exit:
        status = _exit_status(exit.code)
    except BaseException as err:  # noqa: BLE001 -- the interpreter's last resort, as python -m has it
        interrupted = isinstance(err, KeyboardInterrupt)
        sys.excepthook(type(err), err, err.__traceback__)
        status = 1
    threading._shutdown()  # what Py_FinalizeEx does first: wait for the non-daemon threads
    atexit._run_exitfuncs()
    # a file left open is flushed when the teardown frees it: flush those the command opened (the server's objects
    # are frozen, so gc.get_objects() lists only what the fork made). Told by their type, each type asked once:
    # isinstance() would also ask each object's __class__, which openai's 42 module-level proxies answer by loading
    # what they stand for (1.1 CPU seconds in a command that imported openai).
    objects = gc.get_objects()
    files = {kind for kind in set(map(type, objects)) if issubclass(kind, io.IOBase)}
    for obj in objects:
        if type(obj) in files and obj not in (sys.stdout, sys.stderr):
            try:
                if not obj.closed and obj.writable():
                    obj.flush()
            except (OSError, ValueError):  # a detached or failing stream: its teardown would fail as quietly
                pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception as err:  # noqa: BLE001 -- Py_FinalizeEx reports a failed flush, and ends with 120
            sys.unraisablehook(types.SimpleNamespace(exc_type=type(err), exc_value=err, exc_traceback=None,
                                                     err_msg=None, object=stream))
            status = status or 120
    ctypes.CDLL(None).fflush(None)  # what C's exit() flushes: a library's own printf output
    if interrupted:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        status = 130
    os._exit(status)


def _exit_status(code) -> int:
    """The exit status of ``SystemExit(code)`` (Python/pythonrun.c, _Py_HandleSystemExit); a code that is not a number
    is a message, printed to stderr as the interpreter prints it."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


if __name__ == "__main__":
    _become(_serve(sys.argv[1]))
