"""What the training loop reports as it trains: ``run/metrics.jsonl`` (one JSON record per
``log_every`` steps), a progress bar when interactive (the metrics in its postfix), else a log line
per record. Split from ``loop`` so the loop reads as the steps it takes."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from modsenc.utils.distributed import DistContext
from modsenc.utils.io import atomic_write_text
from modsenc.utils.logs import progress

# The loop's lines keep the loop's logger name: it is what a log shows and a user's filters name.
log = logging.getLogger("modsenc.training.loop")


class MetricsLog:
    """Metrics as JSON lines. On resume, entries past the checkpoint's step are dropped, so the
    log reads as one uninterrupted run."""

    def __init__(self, path: Path, enabled: bool) -> None:
        self.path = path
        self.enabled = enabled

    def records(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [
            json.loads(line) for line in self.path.read_text(encoding="utf-8").splitlines() if line.strip()
        ]

    def truncate_after(self, step: int) -> None:
        if self.enabled and self.path.exists():
            kept = [r for r in self.records() if r.get("step", 0) <= step]
            atomic_write_text(self.path, "".join(json.dumps(r) + "\n" for r in kept))

    def last(self) -> dict[str, Any]:
        records = self.records()
        return records[-1] if records else {}

    def write(self, record: dict[str, Any]) -> None:
        if self.enabled:
            with self.path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")


_SHOWN = ("loss", "align", "mlm", "koleo", "mlm_accuracy", "paraphrase_acc", "parallel_loss")


def _shown(metrics: dict[str, Any]) -> dict[str, str]:
    """The metrics a progress bar or log line shows, formatted."""
    return {k: f"{metrics[k]:.3f}" for k in _SHOWN if k in metrics} | {
        "tok/s": f"{metrics['tokens_per_s']:.0f}"
    }


def _log_line(metrics: dict[str, Any], max_steps: int, elapsed: float, done_steps: int) -> str:
    """One line per ``log_every`` steps for a log without a progress bar:
    ``train step 20/105: loss=0.512 align=0.301 tok/s=1234 lr=2.0e-05 [00:42<02:58]``."""
    step = int(metrics["step"])
    left = elapsed / done_steps * (max_steps - step) if done_steps else 0.0
    values = " ".join(f"{k}={v}" for k, v in _shown(metrics).items())
    return (
        f"train step {step}/{max_steps}: {values} lr={metrics['lr']:.1e} "
        f"[{tqdm.format_interval(elapsed)}<{tqdm.format_interval(left)}]"
    )


class LogWindow:
    """The steps since the last record: each metric's sum and step count (a metric may appear on
    some steps only: alternating batch kinds), the input tokens, and when the window began."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.sums: dict[str, float] = {}
        self.counts: dict[str, int] = {}
        self.tokens = 0
        self.start = time.perf_counter()

    def add(self, step_metrics: dict[str, float], tokens: int) -> None:
        self.tokens += tokens
        for key, value in step_metrics.items():
            self.sums[key] = self.sums.get(key, 0.0) + value
            self.counts[key] = self.counts.get(key, 0) + 1

    def means(self) -> dict[str, float]:
        return {key: value / self.counts[key] for key, value in self.sums.items()}

    def tokens_per_second(self, device: torch.device, dist: DistContext) -> float:
        """Input tokens per second since the window began, summed over the processes."""
        elapsed = time.perf_counter() - self.start
        tokens = float(dist.all_reduce_sum(torch.tensor(float(self.tokens), device=device)))
        return tokens / max(elapsed, 1e-9)


class TrainingProgress:
    """The loop's reports from ``step`` (0, or where a resumed run starts) to ``max_steps``."""

    def __init__(
        self,
        metrics_log: MetricsLog,
        max_steps: int,
        step: int,
        device: torch.device,
        precision: str,
        dist: DistContext,
    ) -> None:
        self.metrics_log, self.max_steps = metrics_log, max_steps
        self.device, self.precision, self.dist = device, precision, dist
        self.bar = progress(
            total=max_steps, initial=step, desc="train", enabled=dist.is_main, dynamic_ncols=True
        )
        self.started, self.first_step = time.perf_counter(), step
        self.window = LogWindow()

    def step_done(self, step_metrics: dict[str, float], tokens: int) -> None:
        self.window.add(step_metrics, tokens)
        self.bar.update(1)

    def record(
        self, step: int, lr: float, grad_norm: torch.Tensor, epoch: int, dev_score: float | None
    ) -> dict[str, float]:
        """Write the window's mean metrics and where training stands at ``step``; returns them."""
        tokens_per_s = self.window.tokens_per_second(self.device, self.dist)
        last: dict[str, Any] = self.window.means()
        last |= {
            "step": step,
            "lr": lr,
            "grad_norm": float(grad_norm),
            "tokens_per_s": tokens_per_s,
            "epoch": epoch,
            "precision": self.precision,
        }
        if dev_score is not None:
            last["dev_score"] = dev_score
        self.metrics_log.write(last)
        self.bar.set_postfix(_shown(last))
        if self.dist.is_main:
            elapsed = time.perf_counter() - self.started
            line = _log_line(last, self.max_steps, elapsed, step - self.first_step)
            log.log(logging.INFO if self.bar.disable else logging.DEBUG, line)
        self.window.reset()
        return last

    def close(self) -> None:
        self.bar.close()
