"""Optimizer and schedule: AdamW with weight decay on matrices only, warm-up then decay."""

from __future__ import annotations

import torch
from torch import nn
from transformers import get_scheduler


def build_optimizer(
    module: nn.Module,
    lr: float,
    weight_decay: float = 0.01,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8,
) -> torch.optim.AdamW:
    """Biases and LayerNorm gains (1-D tensors) are not decayed: shrinking them only hurts."""
    decay, no_decay = [], []
    for _, param in sorted(module.named_parameters(), key=lambda item: item[0]):
        if param.requires_grad:
            (decay if param.ndim >= 2 else no_decay).append(param)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps)


def build_scheduler(
    optimizer: torch.optim.Optimizer, name: str, warmup_steps: int, total_steps: int
) -> torch.optim.lr_scheduler.LRScheduler:
    """Any schedule ``transformers.get_scheduler`` knows (linear, cosine, constant_with_warmup, ...)."""
    return get_scheduler(name, optimizer, num_warmup_steps=warmup_steps, num_training_steps=total_steps)
