"""vLLM's data parallelism on SmolLM2-135M-Instruct: two replicas give the numbers of one engine.

The harness's `vllm` model with `data_parallel_size=2` runs each replica as a Ray task that asks for
`tensor_parallel_size` GPUs. A machine without GPUs has none to give, and the task would wait forever; a Ray cluster
that declares two logical GPUs (`ray start --head --num-gpus 2`, docs/scaling.md) lets both replicas start, and vLLM,
built for the CPU, runs them there. The harness's multi-process `hf` cannot be shown here: it splits the documents
only when the machine has more than one GPU (docs/scaling.md says why); tests/test_multiprocess.py covers the
plugin's side of a multi-process run with a test double.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import real

pytestmark = pytest.mark.xdist_group("real_engines")  # after Lost in the Middle and MAGNIFICo, on their engine
LIMIT = 8


@pytest.fixture
def ray_cluster(vllm_ready):
    """A local Ray cluster with two logical GPUs, for the harness's replicas; its address for the command."""
    if shutil.which("ray", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("needs Ray for vLLM's data parallelism (`pip install ray`)")
    ray = str(Path(sys.executable).parent / "ray")
    started = subprocess.run([ray, "start", "--head", "--num-cpus", "2", "--num-gpus", "2", "--include-dashboard=false",
                             "--disable-usage-stats"],
                            capture_output=True, text=True, timeout=300)
    assert started.returncode == 0, started.stderr[-3000:]
    yield "auto"
    subprocess.run([ray, "stop", "--force"], capture_output=True, timeout=120)


def test_two_replicas_give_the_numbers_of_one_engine(real_model_dir, vllm_lm, ray_cluster, tmp_path):
    one = real.evaluate(vllm_lm, ["lieder_base"], limit=LIMIT)["results"]["lieder_base"]
    args = real.model_args({**real.vllm_args(real_model_dir), "data_parallel_size": 2})
    with real.LmEvalRun(["--model", "vllm", "--model_args", args, "--batch_size", "auto", "--tasks", "lieder_base",
                         "--limit", LIMIT], tmp_path, env={"RAY_ADDRESS": ray_cluster}) as run:
        two = run.results()["results"]["lieder_base"]
    numbers = {key: value for key, value in one.items() if isinstance(value, (int, float))}
    assert len(numbers) > 40 and numbers == {key: two[key] for key in numbers}
