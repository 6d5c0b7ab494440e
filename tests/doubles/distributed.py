"""``ext-scripted-dist``: the scripted models (:mod:`.scripted`) as one data-parallel harness model.

The harness splits documents between processes and gathers their results only when the model
reports ``world_size > 1`` and implements ``all_gather``, ``gather_object`` and ``barrier``
(``lm_eval.evaluator.evaluate``). Its ``hf`` model does that only on accelerators, so this double
lets a CPU machine run the harness's own split and gather code: launched with
``torchrun --nproc_per_node N -m doubles lm_eval run --model ext-scripted-dist ...``, each process joins a
``gloo`` process group (rank and world size from torchrun's environment) and answers

- ``loglikelihood`` as ``ext-loglik-table`` (``table=FILE``),
- ``generate_until`` (and so multi-turn conversations) as ``ext-canned-gen``
  (``responses=FILE``; in a multi-process run ``calls_log=FILE`` becomes ``FILE.rank<r>``: one log
  per process).

Either argument may be left out when a run needs only the other request type. Launched without
torchrun it is a single process (rank 0 of 1) that answers exactly the same, so a 1-process and
an N-process run of one command can be compared.
"""
from __future__ import annotations

import os

import torch
import torch.distributed as dist

from .scripted import CannedGenLM, LoglikTableLM, ScriptedModelError, _ScriptedLM


class ScriptedDistributedLM(_ScriptedLM):
    """Scripted log-likelihoods and generations on every rank of a torchrun launch (module docstring)."""

    name = "ext-scripted-dist"

    def __init__(self, table: str | None = None, responses: str | None = None, calls_log: str | None = None,
                 **harness_args) -> None:
        super().__init__(**harness_args)
        if table is None and responses is None:
            raise ScriptedModelError(f"{self.name}: give table=FILE (log-likelihoods), responses=FILE (generations) "
                                     "or both in --model_args")
        if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not dist.is_initialized():
            dist.init_process_group("gloo")  # torchrun sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT
        if dist.is_initialized():
            self._rank, self._world_size = dist.get_rank(), dist.get_world_size()
        if calls_log and self._world_size > 1:
            calls_log = f"{calls_log}.rank{self._rank}"
        self._table = LoglikTableLM(table) if table else None
        self._canned = CannedGenLM(responses, calls_log=calls_log) if responses else None

    @property
    def device(self) -> torch.device:
        """Where the harness puts the tensors it gathers: the CPU (gloo)."""
        return torch.device("cpu")

    def all_gather(self, tensor: torch.Tensor) -> torch.Tensor:
        """Every rank's ``tensor``, concatenated in rank order (a 0-d tensor gives a vector), as accelerate does."""
        if self._world_size == 1:
            return tensor
        parts = [torch.zeros_like(tensor) for _ in range(self._world_size)]
        dist.all_gather(parts, tensor)
        return torch.stack(parts) if tensor.dim() == 0 else torch.cat(parts)

    def gather_object(self, obj, dst: int = 0):
        """The list of every rank's ``obj`` on ``dst``, None elsewhere (as the hf model does)."""
        if self._world_size == 1:
            return [obj]
        result = [None] * self._world_size if self._rank == dst else None
        dist.gather_object(obj, result, dst=dst)
        return result

    def barrier(self) -> None:
        """Wait for every rank."""
        if self._world_size > 1:
            dist.barrier()

    def _delegate(self, model, method: str):
        if model is None:
            self._unsupported(f"{method} without {'table' if method == 'loglikelihood' else 'responses'}=FILE")
        model.cache_hook = self.cache_hook  # the harness's response cache (--use_cache) is given to this model
        return model

    def loglikelihood(self, requests):
        """``(logprob, is_greedy)`` per request, from the table."""
        return self._delegate(self._table, "loglikelihood").loglikelihood(requests)

    def generate_until(self, requests):
        """The canned response for each request's prompt (logged in this rank's calls log)."""
        return self._delegate(self._canned, "generate_until").generate_until(requests)

    @property
    def tokenizer_name(self) -> str:
        """Fingerprint for the harness's request cache."""
        return self.name

    def apply_chat_template(self, chat_history, add_generation_prompt=True) -> str:
        """As ``ext-canned-gen``: ``"<role>: <content>\\n"`` lines."""
        return CannedGenLM.apply_chat_template(self, chat_history, add_generation_prompt)
