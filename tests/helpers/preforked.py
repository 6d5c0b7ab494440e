"""``python -m doubles ...`` commands forked from a process that has the heavy libraries imported already.

A harness command of the test doubles spends much of its CPU time importing third-party libraries (torch,
transformers, datasets, pandas, scipy, ...: about 6 of the 9 seconds of a short run of the tiny hf model), and the
suite starts many such commands. :func:`run` is ``subprocess.run(cmd, capture_output=True, text=True, ...)``; for a
``python -m doubles`` command it asks a server (``python -m helpers.preforked``, one per pytest process and
environment, started on first use) that imported those libraries once to fork. The child takes the command's
working directory, environment, standard streams and ``sys.argv``, then runs ``doubles`` as ``python -m`` does and
ends as an interpreter ends (exit status, traceback, ``atexit``). Nothing of the harness or the plugin is imported
before the fork. The server freezes its objects (``gc.freeze``) before it forks: a child's garbage collections then
leave the preloaded objects, and the memory pages they share with the server, untouched.

A few environment variables are read when those libraries are imported (the Hugging Face and torch settings,
``PYTHONPATH``, ``HOME``, the plugin's start-up switch, those of tests/startup): a command whose values of them differ
gets a server of its own (of the two a pytest process keeps, the one used longest ago makes way). Every other
command (the installed ``lm_eval`` and ``lm-eval-ext`` a user types, ``torchrun``, a script) starts a fresh
interpreter, as do commands the tests signal or kill (they use ``subprocess.Popen``).
"""
from __future__ import annotations

import atexit
import gc
import json
import locale
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from doubles import builtin_index, env_report

# The third-party modules harness commands import, by name: transformers loads its parts lazily, so the parts a
# model load needs (the tiny model is a Llama) are named too. Measured: a forked `--model hf` run of lieder_base
# took 6.3-9.5 s of CPU time with only the top-level packages preloaded, 3.4-3.7 s with these and gc.freeze; a
# server takes ~10 s instead of ~4 to start.
PRELOAD = ("torch", "torch.distributed.tensor", "transformers", "transformers.modeling_utils",
           "transformers.models.auto.modeling_auto", "transformers.models.auto.tokenization_auto",
           "transformers.models.llama.modeling_llama", "datasets", "pandas", "scipy.stats", "sacrebleu", "jinja2",
           "httpx", "requests", "accelerate", "pytablewriter", "aiohttp", "tenacity", "pooch", "matplotlib.figure",
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
MAX_SERVERS = 2  # per pytest process: each holds the libraries in memory (about 0.6 GB)

_servers: dict[tuple, _Server] = {}  # by their environment's start-up variables, the most recently used last
served = 0  # commands forked so far in this process
_lock = threading.Lock()


def run(cmd, *, cwd=None, env: dict | None = None, timeout: float | None = None, input: str | None = None,
        fresh: bool = False) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, cwd=cwd, env=env, input=input, capture_output=True, text=True, timeout=timeout)``,
    a ``python -m doubles`` command forked from a preloaded server unless ``fresh``."""
    global served
    cmd = [str(c) for c in cmd]
    env = dict(os.environ if env is None else env)
    if fresh or cmd[:3] != [sys.executable, "-m", "doubles"]:
        return subprocess.run(cmd, cwd=cwd, env=env, input=input, capture_output=True, text=True, timeout=timeout)
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
    if server is None or not server.busy.acquire(blocking=False):  # another thread's command is running on it
        return subprocess.run(cmd, cwd=cwd, env=env, input=input, capture_output=True, text=True, timeout=timeout)
    try:
        proc = server.run(cmd, cwd=os.fspath(cwd or os.getcwd()), env=env, timeout=timeout, input=input)
    finally:
        server.busy.release()
    served += 1
    return proc


class _Server:
    """The client side of one server: requests and replies are JSON lines on its stdin and stdout."""

    def __init__(self, env: dict):
        self.proc = subprocess.Popen([sys.executable, "-m", "helpers.preforked"], env=env, cwd=tempfile.gettempdir(),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True)
        self.busy = threading.Lock()
        ready = self.proc.stdout.readline()
        assert ready.strip() == "ready", f"the preloaded server did not start ({ready!r})"
        atexit.register(self.stop)

    def stop(self) -> None:
        """End the server (it ends when its stdin closes) and wait for it."""
        if not self.proc.stdin.closed:
            self.proc.stdin.close()
        self.proc.wait(60)
        self.proc.stdout.close()

    def run(self, cmd: list[str], *, cwd: str, env: dict, timeout: float | None,
            input: str | None) -> subprocess.CompletedProcess:
        with tempfile.TemporaryDirectory(prefix="preforked-") as scratch:
            streams = {name: os.path.join(scratch, name) for name in ("stdin", "stdout", "stderr")}
            Path(streams["stdin"]).write_text(input or "", encoding=locale.getpreferredencoding(False))
            request = {"argv": cmd[3:], "cwd": cwd, "env": env, **streams}
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


def _serve() -> dict:
    """The server: import the libraries, then fork once per request; returns only in a child, with its request."""
    import importlib

    names = os.environ.get("PREFORKED_PRELOAD")  # comma-separated, instead of PRELOAD (the helper's own test)
    for name in PRELOAD if names is None else filter(None, names.split(",")):
        importlib.import_module(name)
    gc.freeze()
    print("ready", flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            return request
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"status": status}), flush=True)
    sys.exit(0)


def _become(request: dict) -> None:
    """In the forked child: take the command's directory, environment and streams, and run ``python -m doubles``."""
    import runpy

    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    for fd, name, flags in ((0, "stdin", os.O_RDONLY), (1, "stdout", os.O_WRONLY), (2, "stderr", os.O_WRONLY)):
        target = os.open(request[name], flags | (os.O_CREAT | os.O_TRUNC if fd else 0), 0o600)
        os.dup2(target, fd)
        os.close(target)
    sys.path[0] = os.getcwd()  # as `python -m` puts the working directory first
    sys.argv = ["-m", *request["argv"]]
    runpy.run_module("doubles", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    _become(_serve())
