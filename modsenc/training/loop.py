"""The training loop: gradient accumulation, clipping, bf16 autocast where native, logging,
atomic checkpoints and exact resumption. Model, objective and data come in as components."""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from modsenc.backbone.encoder import Backbone
from modsenc.backbone.precision import autocast, resolve_precision
from modsenc.data.batching import BatchStream, StreamItem
from modsenc.objectives.base import Objective, ObjectiveOutput, TokenizedPair
from modsenc.training.checkpoint import (
    latest_checkpoint,
    load_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from modsenc.training.configs import Schedule, TrainingConfig
from modsenc.training.early_stopping import EarlyStopping
from modsenc.training.optim import build_optimizer, build_scheduler
from modsenc.training.progress import MetricsLog, TrainingProgress
from modsenc.utils.distributed import DistContext, init_distributed

log = logging.getLogger(__name__)


@dataclass
class LoopConfig:
    """The loop's settings; their defaults are ``TrainingConfig``'s (the recipe's ``training``)."""

    max_steps: int
    grad_accum: int = TrainingConfig.grad_accum
    max_grad_norm: float | None = TrainingConfig.max_grad_norm
    log_every: int = TrainingConfig.log_every
    checkpoint_every: int = TrainingConfig.checkpoint_every
    keep_checkpoints: int = TrainingConfig.keep_checkpoints
    seed: int = 0
    precision: str = TrainingConfig.precision  # auto: bf16 autocast where native (modsenc.backbone.precision)
    # Checkpoint only trainable parameters (adapter stages: the frozen backbone is already on disk).
    trainable_only: bool = False

    @classmethod
    def from_training(
        cls, training: TrainingConfig, max_steps: int, seed: int, trainable_only: bool = False
    ) -> LoopConfig:
        return cls(
            max_steps=max_steps,
            grad_accum=training.grad_accum,
            max_grad_norm=training.max_grad_norm,
            log_every=training.log_every,
            checkpoint_every=training.checkpoint_every,
            keep_checkpoints=training.keep_checkpoints,
            seed=seed,
            precision=training.precision,
            trainable_only=trainable_only,
        )


class TrainModule(nn.Module):
    """Backbone + objective as one module, so DDP sees (and syncs) every trained parameter."""

    def __init__(self, backbone: Backbone, objective: Objective, dist: DistContext) -> None:
        super().__init__()
        self.backbone = backbone
        self.objective = objective
        self.dist = dist

    def forward(self, batch: Any) -> ObjectiveOutput:
        return self.objective(self.backbone, batch, self.dist)


StepCallback = Callable[[int, dict[str, float]], None]


def _model_state(module: nn.Module, trainable_only: bool) -> dict[str, torch.Tensor]:
    if not trainable_only:
        return module.state_dict()
    return {k: v.detach() for k, v in module.state_dict(keep_vars=True).items() if v.requires_grad}


def _load_model_state(module: nn.Module, state: dict[str, torch.Tensor], trainable_only: bool) -> None:
    if not trainable_only:
        module.load_state_dict(state)
        return
    expected = set(_model_state(module, True))
    if set(state) != expected:
        raise ValueError(
            f"checkpoint holds {len(state)} trainable tensors, the model expects {len(expected)}: "
            f"missing {sorted(expected - set(state))[:3]}, unexpected {sorted(set(state) - expected)[:3]}"
        )
    module.load_state_dict(state, strict=False)


def _prepare_run(
    config: LoopConfig, run_dir: Path, device: torch.device, dist: DistContext
) -> tuple[str, MetricsLog]:
    """The precision the loop trains in and its metrics log, with the run folder created."""
    # Resolved once: bf16 autocast for the GEMMs where the device computes bf16 natively; weights,
    # optimiser state and checkpoints stay fp32, so a resumed run continues exactly.
    precision = resolve_precision(config.precision, device)
    if dist.is_main:
        log.info("training precision: %s (asked: %s)", precision, config.precision)
    if dist.is_main:
        run_dir.mkdir(parents=True, exist_ok=True)
    return precision, MetricsLog(run_dir / "metrics.jsonl", enabled=dist.is_main)


def _load_latest_checkpoint(
    run_dir: Path, module: TrainModule, trainable_only: bool
) -> tuple[Path, int, dict[str, Any]]:
    """Load the run's latest checkpoint into ``module``: (its path, its step, the rest of its state)."""
    checkpoint = latest_checkpoint(run_dir)
    if checkpoint is None:
        raise FileNotFoundError(
            f"--resume: no checkpoint under {run_dir / 'checkpoints'}; start without --resume"
        )
    step, model_state, state = load_checkpoint(checkpoint)
    _load_model_state(module, model_state, trainable_only)
    return checkpoint, step, state


def _restore_training_state(
    state: dict[str, Any],
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    stream: BatchStream,
    stopper: EarlyStopping | None,
) -> BatchStream:
    """Put back a checkpoint's optimiser, schedule, RNG and early-stopping state; returns the
    batch stream positioned where the checkpointed run would have read next."""
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    set_rng_state(state["rng"])
    stream = BatchStream.from_state(stream.sampler, state["data"])
    if stopper is not None and state.get("early_stopping") is not None:
        stopper.load_state_dict(state["early_stopping"])
    return stream


def _micro_batches(
    module: TrainModule,
    examples: Sequence[TokenizedPair],
    iterator: Iterator[StreamItem],
    config: LoopConfig,
    step: int,
    dist: DistContext,
) -> Iterator[tuple[StreamItem, Any]]:
    """The ``grad_accum`` micro-batches of optimizer step ``step``, each drawn from the stream and
    collated on the model's device only when the previous one is done: (stream item, batch)."""
    for micro in range(config.grad_accum):
        item = next(iterator)
        rng = np.random.default_rng([config.seed, step, micro])  # masks independent of resume point
        batch = module.objective.collate(
            [examples[i] for i in item.indices], rng, module.backbone, dist.rank, dist.world_size
        ).to(module.backbone.device)
        yield item, batch


def _forward_backward(
    ddp_module: nn.Module,
    batches: Iterator[tuple[StreamItem, Any]],
    config: LoopConfig,
    device: torch.device,
    precision: str,
    dist: DistContext,
) -> tuple[dict[str, float], int, int]:
    """Accumulate one optimizer step's gradients over its micro-batches (DDP syncs on the last
    only): (the step's metrics, averaged over micro-batches; its tokens; the last batch's epoch)."""
    step_metrics: dict[str, float] = {}
    tokens = 0
    for micro, (item, batch) in enumerate(batches):
        epoch = item.epoch
        sync = micro == config.grad_accum - 1 or not dist.is_distributed
        with (
            contextlib.nullcontext() if sync else ddp_module.no_sync(),
            autocast(device, precision),
        ):
            out = ddp_module(batch)
            (out.loss / config.grad_accum).backward()
        tokens += out.num_tokens
        for key, value in out.metrics.items():
            step_metrics[key] = step_metrics.get(key, 0.0) + value / config.grad_accum
    return step_metrics, tokens, epoch


def _optimizer_step(
    module: TrainModule,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    max_grad_norm: float | None,
    step_metrics: dict[str, float],
    step: int,
) -> torch.Tensor:
    """Refuse a non-finite loss, then clip the gradients, step the optimiser and the schedule and
    clear the gradients; returns the gradient norm before clipping (0 without clipping)."""
    if not all(math.isfinite(v) for v in step_metrics.values()):
        raise FloatingPointError(
            f"non-finite loss at step {step + 1}: {step_metrics}; lower the learning rate"
        )
    grad_norm = (
        torch.nn.utils.clip_grad_norm_(module.parameters(), max_grad_norm)
        if max_grad_norm
        else torch.tensor(0.0)
    )
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return grad_norm


def _checkpoint_state(
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    iterator: BatchStream,
    stopper: EarlyStopping | None,
) -> dict[str, Any]:
    """Everything besides the model that a resumed run needs to continue exactly."""
    return {
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "rng": rng_state(),
        "data": iterator.state_dict(),
        "early_stopping": stopper.state_dict() if stopper is not None else None,
    }


def _save_checkpoint(
    run_dir: Path, step: int, module: TrainModule, state: dict[str, Any], config: LoopConfig
) -> None:
    """Write a checkpoint of ``module`` and ``state`` at ``step``, keeping the latest few."""
    saved = save_checkpoint(
        run_dir,
        step,
        _model_state(module, config.trainable_only),
        state,
        keep=config.keep_checkpoints,
    )
    log.debug("checkpoint written to %s", saved)


def _restore_best_weights(
    module: TrainModule,
    stopper: EarlyStopping | None,
    last: dict[str, float],
    step: int,
    dist: DistContext,
) -> dict[str, float]:
    """Put back the weights of the best dev score, when early stopping kept some; returns the
    last metrics with the stopper's summary added."""
    if stopper is None or stopper.best_state is None:
        return last
    module.load_state_dict(stopper.best_state, strict=False)  # the best dev score's weights
    last = {**last, **stopper.summary()}
    if dist.is_main:
        log.info(
            "dev score: best %.4f at step %d of %d%s",
            stopper.best_score,
            stopper.best_step,
            step,
            " (stopped early)" if stopper.stopped else "",
        )
    return last


def _resume(
    run_dir: Path,
    module: TrainModule,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    stream: BatchStream,
    stopper: EarlyStopping | None,
    metrics_log: MetricsLog,
    config: LoopConfig,
    dist: DistContext,
) -> tuple[int, BatchStream]:
    """Continue from the run's latest checkpoint: (its step, the batch stream positioned there);
    the metrics logged past it are dropped."""
    checkpoint, step, state = _load_latest_checkpoint(run_dir, module, config.trainable_only)
    stream = _restore_training_state(state, optimizer, scheduler, stream, stopper)
    metrics_log.truncate_after(step)
    if dist.is_main:
        log.info("resumed from %s at step %d", checkpoint, step)
    return step, stream


def train_loop(
    module: TrainModule,
    ddp_module: nn.Module,
    examples: Sequence[TokenizedPair],
    stream: BatchStream,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    config: LoopConfig,
    run_dir: Path,
    dist: DistContext,
    resume: bool = False,
    callbacks: Sequence[StepCallback] = (),
    stopper: EarlyStopping | None = None,
) -> dict[str, float]:
    """Train until ``config.max_steps`` optimizer steps, or until ``stopper`` says the dev score
    stopped improving (its best weights are then put back); returns the last logged metrics."""
    device = module.backbone.device
    precision, metrics_log = _prepare_run(config, run_dir, device, dist)
    step = 0
    if resume:
        step, stream = _resume(
            run_dir, module, optimizer, scheduler, stream, stopper, metrics_log, config, dist
        )
    module.train()
    iterator = iter(stream)
    report = TrainingProgress(metrics_log, config.max_steps, step, device, precision, dist)
    last: dict[str, float] = {}
    stopped = stopper is not None and stopper.stopped
    if step >= config.max_steps or stopped:
        last = metrics_log.last()  # resumed a finished run: nothing to train, keep its final metrics
    while step < config.max_steps and not stopped:
        # Dropout's generator is re-seeded from (seed, step, rank) every step, so a resumed run
        # (and every rank of a data-parallel one) replays exactly the randomness it would have used.
        torch.manual_seed(int(np.random.SeedSequence([config.seed, step, dist.rank]).generate_state(1)[0]))
        batches = _micro_batches(module, examples, iterator, config, step, dist)
        step_metrics, tokens, epoch = _forward_backward(ddp_module, batches, config, device, precision, dist)
        grad_norm = _optimizer_step(module, optimizer, scheduler, config.max_grad_norm, step_metrics, step)
        step += 1
        report.step_done(step_metrics, tokens)
        dev_score = None
        if stopper is not None and stopper.due(step, config.max_steps):
            dev_score, stopped = _evaluate(module, stopper, step, device, precision, config.trainable_only)
        if step % config.log_every == 0 or step == config.max_steps or dev_score is not None:
            last = report.record(step, scheduler.get_last_lr()[0], grad_norm, epoch, dev_score)
        if step % config.checkpoint_every == 0 or step == config.max_steps or stopped:
            if dist.is_main:
                state = _checkpoint_state(optimizer, scheduler, iterator, stopper)
                _save_checkpoint(run_dir, step, module, state, config)
            if dist.is_distributed:
                torch.distributed.barrier()
        for callback in callbacks:
            callback(step, step_metrics)
    report.close()
    return _restore_best_weights(module, stopper, last, step, dist)


def _evaluate(
    module: TrainModule,
    stopper: EarlyStopping,
    step: int,
    device: torch.device,
    precision: str,
    trainable_only: bool,
) -> tuple[float, bool]:
    """Score the model on the dev data for early stopping: (score, stop now?)."""
    if not trainable_only:
        raise ValueError("early stopping keeps the best trainable weights: use it for adapter stages")
    module.eval()
    with torch.no_grad(), autocast(device, precision):
        score = float(stopper.evaluate())
    module.train()
    stop = stopper.record(step, score, _model_state(module, True))
    best = (stopper.best_score, stopper.best_step)
    log.debug("dev score at step %d: %.4f (best %.4f at %d)", step, score, *best)
    return score, stop


def dev_loss(module: TrainModule, examples: Sequence[Any], batch_size: int, seed: int) -> float:
    """The objective's mean loss over ``examples`` in fixed batches of one kind each (in-batch
    negatives need batches, and the same batches every time make the scores comparable)."""
    by_kind: dict[str, list[Any]] = {}
    for example in examples:
        by_kind.setdefault(getattr(example, "kind", ""), []).append(example)
    total, count = 0.0, 0
    for group in by_kind.values():
        for start in range(0, len(group), batch_size):
            chunk = group[start : start + batch_size]
            rng = np.random.default_rng([seed, start])
            batch = module.objective.collate(chunk, rng, module.backbone).to(module.backbone.device)
            total += float(module(batch).loss) * len(chunk)
            count += len(chunk)
    return total / count


def fit_stage(
    backbone: Backbone,
    objective: Objective,
    examples: Sequence[Any],
    sampler: Any,
    cfg: Schedule,
    train_cfg: TrainingConfig,
    run_dir: Path,
    resume: bool,
    seed: int,
    callbacks: Sequence[StepCallback] = (),
    trainable_only: bool = True,
    dev_examples: Sequence[Any] = (),
) -> dict[str, float]:
    """One single-process training stage from recipe sections: ``cfg`` holds the stage's budget
    (epochs or max_steps), lr, scheduler and warmup_ratio; ``train_cfg`` the shared loop settings.
    Used by add-language (adapters: only trainable tensors are checkpointed) and full fine-tuning.

    With ``cfg.eval_every``, the objective's loss on ``dev_examples`` (held out of the training
    files) is measured every that many steps; the weights of the lowest dev loss are kept, and with
    ``cfg.patience`` training stops after that many evaluations without a lower one."""
    dist = init_distributed()
    module = TrainModule(backbone, objective, dist)
    stopper = None
    if cfg.eval_every:
        if not dev_examples:
            raise ValueError(
                "eval_every is set but the stage has no dev pairs: set data.dev_pairs or data.dev_parallel"
            )
        batch_size = cfg.batch_size
        stopper = EarlyStopping(
            lambda: -dev_loss(module, dev_examples, batch_size, seed), cfg.eval_every, cfg.patience
        )
    max_steps = cfg.steps(len(sampler))
    loop_cfg = LoopConfig.from_training(train_cfg, max_steps, seed, trainable_only)
    optimizer = build_optimizer(module, lr=cfg.lr, weight_decay=train_cfg.weight_decay)
    warmup = int(cfg.warmup_ratio * max_steps)
    scheduler = build_scheduler(optimizer, cfg.scheduler, warmup, max_steps)
    return train_loop(
        module,
        module,
        examples,
        BatchStream(sampler),
        optimizer,
        scheduler,
        loop_cfg,
        run_dir,
        dist,
        resume=resume and latest_checkpoint(run_dir) is not None,
        callbacks=callbacks,
        stopper=stopper,
    )
