"""Early stopping on a dev score, keeping the best weights.

``train_loop`` asks ``due(step)`` after every optimiser step; when it is, it scores the model with
``evaluate`` (higher is better) and calls ``record``. The trainable weights of the best score are
kept (in memory, and in every checkpoint, so a resumed run knows them); after ``patience``
evaluations without an improvement of more than ``min_delta`` the loop stops, and at the end the
best weights are put back. The dev data must come from the *training* files (add-language carves
it: ``data.dev_pairs``, ``data.dev_parallel``), never from the evaluation sets.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class EarlyStopping:
    evaluate: Callable[[], float]  # the dev score of the model as it is now; higher is better
    every: int  # optimiser steps between evaluations (and after the last step)
    patience: int | None = None  # evaluations without improvement before stopping; None: never stop
    min_delta: float = 0.0
    best_score: float = -math.inf
    best_step: int = 0
    bad_evaluations: int = 0
    stopped: bool = False
    history: list[tuple[int, float]] = field(default_factory=list)
    best_state: dict[str, torch.Tensor] | None = None

    def __post_init__(self) -> None:
        if self.every < 1:
            raise ValueError(f"early stopping: evaluate every >= 1 steps, got {self.every}")
        if self.patience is not None and self.patience < 1:
            raise ValueError(f"early stopping: patience must be >= 1 evaluations, got {self.patience}")

    def due(self, step: int, max_steps: int) -> bool:
        return step % self.every == 0 or step == max_steps

    def record(self, step: int, score: float, trainable: dict[str, torch.Tensor]) -> bool:
        """Note ``score`` at ``step``; True when training should stop."""
        if not math.isfinite(score):
            raise FloatingPointError(f"dev score at step {step} is {score}")
        self.history.append((step, score))
        if score > self.best_score + self.min_delta:
            self.best_score, self.best_step, self.bad_evaluations = score, step, 0
            self.best_state = {k: v.detach().clone() for k, v in trainable.items()}
        else:
            self.bad_evaluations += 1
            self.stopped = self.patience is not None and self.bad_evaluations >= self.patience
        return self.stopped

    def state_dict(self) -> dict[str, Any]:
        return {
            "best_score": self.best_score,
            "best_step": self.best_step,
            "bad_evaluations": self.bad_evaluations,
            "stopped": self.stopped,
            "history": [list(h) for h in self.history],
            "best_state": self.best_state,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best_score = float(state["best_score"])
        self.best_step = int(state["best_step"])
        self.bad_evaluations = int(state["bad_evaluations"])
        self.stopped = bool(state["stopped"])
        self.history = [(int(s), float(v)) for s, v in state["history"]]
        self.best_state = state["best_state"]

    def summary(self) -> dict[str, float]:
        return {
            "dev_best_score": self.best_score,
            "dev_best_step": float(self.best_step),
            "dev_evaluations": float(len(self.history)),
            "stopped_early": float(self.stopped),
        }
