"""What add-language is about to train on, printed before the first stage: the data files and the
rows each gave the language, the pairs (or sentences) and steps of every stage, and a rough time.

The time is an estimate: the steps of every stage (an upper bound where a stage stops early on
dev pairs) times one step's time, taken as three forward passes of one batch through the backbone,
timed here once. The training log then gives each stage's own time left.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from modsenc.backbone.truncation import counting_truncations
from modsenc.training.stages import stage_recipe

if TYPE_CHECKING:
    from modsenc.training.configs import Schedule
    from modsenc.training.context import StageContext

BACKWARD_FACTOR = 3.0  # a training step (forward, backward, update) as forward passes, roughly


@dataclass(frozen=True)
class StagePlan:
    """One stage's training set size (``what``: pairs or sentences) and its steps."""

    stage: str
    examples: int
    what: str
    steps: int
    batch_size: int
    early_stopping: bool
    note: str = ""  # a stage without training steps: what it makes (the vocabulary's)

    def line(self) -> str:
        if self.note:
            return f"{self.stage}: {self.note} {self.examples:,} {self.what}"
        bound = "at most " if self.early_stopping else ""
        return (
            f"{self.stage}: {self.examples:,} {self.what}, {bound}{self.steps:,} steps of {self.batch_size}"
        )


def _steps(cfg: Schedule, examples: int, drop_last: bool) -> int:
    if examples == 0:
        return 0
    batches = examples // cfg.batch_size if drop_last and examples > cfg.batch_size else None
    return cfg.steps(batches or math.ceil(examples / cfg.batch_size))


def stage_plans(job: StageContext, stages: list[str]) -> list[StagePlan]:
    """The training set and step count of each of ``stages``, as the stages will see them (each
    stage's ``plan``; a stage without one has no line)."""
    plans = []
    for stage in stages:
        plan = stage_recipe(stage).plan(job)
        if plan is None:
            continue
        cfg = job.settings(stage)
        steps = _steps(cfg, plan.examples, plan.drop_last) if plan.trains else 0
        early = bool(getattr(cfg, "eval_every", None) and getattr(cfg, "patience", None))
        batch = getattr(cfg, "batch_size", 0)
        plans.append(StagePlan(stage, plan.examples, plan.what, steps, batch, early, plan.note))
    return plans


def step_seconds(job: StageContext, batch_size: int) -> float | None:
    """One training step's time on this machine, roughly: a forward pass of ``batch_size`` of the
    language's sentences through the backbone (the second of two, timed) times BACKWARD_FACTOR."""
    texts = job.data.texts()[:batch_size]
    if not texts:
        return None
    with counting_truncations(), torch.no_grad():
        job.modular.encode(texts, None, set(), batch_size=batch_size)  # warm-up
        start = time.perf_counter()
        job.modular.encode(texts, None, set(), batch_size=batch_size)
    return (time.perf_counter() - start) * BACKWARD_FACTOR


def _file_lines(job: StageContext) -> list[str]:
    lines = []
    for kind, records in job.data.files.items():
        for record in records:
            name = record.get("path") or record.get("spec", "?")
            rows = f"{record['count']:,} {kind} {'sentences' if kind == 'mono' else 'pairs'}"
            lines.append(f"  {kind} {name}: {rows} for {job.lang}")
    return lines


def data_summary(job: StageContext, stages: list[str]) -> list[str]:
    """The lines printed before training (files, rows per file, pairs and steps per stage, ETA)."""
    recipe = Path(job.recipe_path).name if job.recipe_path else "the recipe"
    lines = [f"data ({recipe}{f', --data {job.data_dir}' if job.data_dir else ''}):", *_file_lines(job)]
    plans = stage_plans(job, stages)
    lines += [f"  {plan.line()}" for plan in plans]
    steps = sum(p.steps for p in plans)
    if steps:
        seconds = step_seconds(job, max(p.batch_size for p in plans if p.steps))
        if seconds:
            lines.append(
                f"  time: about {_duration(steps * seconds)} for {steps:,} steps (an estimate: "
                f"{seconds:.2f} s a step, from one timed batch; dev scoring and checkpoints add to it, "
                "early stopping can end sooner)"
            )
    if not plans:
        lines.append("  no stages to train: the bundle keeps the backbone as is")
    return lines


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
