"""Plot a training run's metrics.jsonl (loss terms per step) to a PNG.

python -m experiments.plot_metrics runs/cpu-small/run/metrics.jsonl -o docs/img/cpu-small-loss.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

TERMS = ("loss", "align", "mlm", "koleo")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("metrics", type=Path, help="metrics.jsonl written by modsenc train-backbone")
    parser.add_argument("-o", "--output", type=Path, required=True, help="PNG to write")
    parser.add_argument("--title", default=None)
    args = parser.parse_args()

    records = [
        json.loads(line) for line in args.metrics.read_text(encoding="utf-8").splitlines() if line.strip()
    ]
    if not records:
        raise SystemExit(f"{args.metrics} holds no metrics")
    steps = [r["step"] for r in records]
    fig, axes = plt.subplots(1, len(TERMS), figsize=(4 * len(TERMS), 3.2))
    for ax, term in zip(axes, TERMS):
        ax.plot(steps, [r.get(term, float("nan")) for r in records], lw=1.2)
        ax.set_title(term)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    fig.suptitle(args.title or str(args.metrics))
    fig.tight_layout()
    args.output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.output, dpi=110)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
