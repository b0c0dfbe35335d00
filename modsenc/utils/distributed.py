"""Process-group set-up for ``torchrun`` and the few collectives the objectives need.

Objectives compute every term as a *global-batch* quantity, so a step on N processes gives the
same gradients as one process on the same global batch:
- per-example terms (alignment MSE, unmasking cross-entropy) divide their local sums by the
  global count and are multiplied by the world size, which DDP's gradient averaging undoes;
- batch-level terms (KoLeo, InfoNCE) all-gather the sentence vectors with gradient, so every
  process computes the same global value.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistContext:
    rank: int = 0
    world_size: int = 1

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def all_reduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sum over processes, without gradient (counts, logged metrics)."""
        tensor = tensor.detach().clone()
        if self.is_distributed:
            dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor

    def all_gather_with_grad(self, tensor: torch.Tensor) -> torch.Tensor:
        """Concatenate every process's tensor along dim 0, keeping the autograd graph.

        Backward sums the gradients of all processes for each slice, which is what a loss
        computed identically on every process needs (see the module docstring).
        Ranks may hold different batch sizes (a global batch split unevenly).
        """
        if not self.is_distributed:
            return tensor
        from torch.distributed.nn.functional import all_gather  # noqa: PLC0415

        sizes = self.all_reduce_sum(
            torch.nn.functional.one_hot(torch.tensor(self.rank), self.world_size).to(tensor.device)
            * tensor.shape[0]
        ).tolist()
        largest = max(sizes)
        padded = torch.nn.functional.pad(tensor, (0, 0) * (tensor.dim() - 1) + (0, largest - tensor.shape[0]))
        gathered = all_gather(padded)
        return torch.cat([g[:n] for g, n in zip(gathered, sizes)])


def init_distributed() -> DistContext:
    """Join the process group that ``torchrun`` describes in the environment (gloo on CPU, nccl on GPU)."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return DistContext()
    if not dist.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(backend=backend)
    return DistContext(rank=dist.get_rank(), world_size=dist.get_world_size())
