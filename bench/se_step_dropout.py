"""An add-language SE step in fp32 and bf16, with and without dropout (issue 21's training goal).

    python bench/se_step_dropout.py --backbone runs/e5/backbone \
        --pairs ../shared/data/parallel/kardes-xnli.tsv

The SE stage's step as `add-language-e5` runs it: multilingual-e5-small with a uz LoRA (r 8) on
every linear layer, MNRL on 32 uz paraphrase-style pairs (max length 64). Three dropout settings,
each in fp32 and under bf16 autocast, interleaved step by step in one process on the same threads
(2 warm-up rounds, then the median of ``--steps``):

- as shipped: peft's LoRA dropout 0.1 on every adapted linear's input, and BERT's own dropouts 0.1;
- LoRA dropout 0 (``se.dropout: 0``), BERT's dropouts kept;
- no dropout at all.

It prints a markdown table: seconds per step in fp32 and bf16, and the bf16 speed-up.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from modsenc.backbone.encoder import Backbone  # noqa: E402
from modsenc.backbone.precision import autocast  # noqa: E402
from modsenc.data.readers import read_parallel_tsv  # noqa: E402
from modsenc.modules.configs import sentence_adapter_config  # noqa: E402
from modsenc.modules.modular import ModularBackbone  # noqa: E402
from modsenc.objectives.sentence_pairs import SentencePairObjective, pair_examples  # noqa: E402
from modsenc.utils.distributed import DistContext  # noqa: E402

# (LoRA dropout, BERT's dropouts)
SETTINGS = {
    "as shipped (LoRA 0.1, BERT 0.1)": (0.1, 0.1),
    "LoRA dropout 0": (0.0, 0.1),
    "no dropout": (0.0, 0.0),
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backbone", default="runs/e5/backbone")
    parser.add_argument(
        "--pairs", default="../shared/data/parallel/kardes-xnli.tsv", help="a TSV with a uz column"
    )
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    backbone = Backbone.from_pretrained(args.backbone, attention="sdpa", max_length=64)
    modular = ModularBackbone(backbone)
    modular.add_lora("uz", "se", sentence_adapter_config())
    modular.select("uz", {"se"})
    params = modular.set_trainable("uz", ["se"])
    backbone.train()
    uz = read_parallel_tsv(args.pairs).columns["uz"]

    def tokenize(texts: list[str]) -> list[list[int]]:
        return modular.tokenize("uz", texts, {"se"}, max_length=64)

    examples = pair_examples(tokenize, "paraphrase", uz[:320], [None] * 320, uz[320:640])
    objective, dist = SentencePairObjective(), DistContext()
    optimizer = torch.optim.AdamW(params, lr=1e-4)
    rng = np.random.default_rng(0)
    dropouts = [(name, m) for name, m in backbone.named_modules() if isinstance(m, nn.Dropout)]

    def set_dropout(lora_p: float, own_p: float) -> None:
        for name, module in dropouts:
            module.p = lora_p if "lora_dropout" in name else own_p

    def step(i: int, precision: str) -> float:
        batch = objective.collate(examples[(i % 10) * 32 : (i % 10 + 1) * 32], rng, backbone)
        started = time.perf_counter()
        with autocast("cpu", precision):
            out = objective(backbone, batch, dist)
        out.loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return time.perf_counter() - started

    times: dict[tuple[str, str], list[float]] = {(s, p): [] for s in SETTINGS for p in ("fp32", "bf16")}
    for i in range(args.steps + 2):
        for setting, (lora_p, own_p) in SETTINGS.items():
            set_dropout(lora_p, own_p)
            for precision in ("fp32", "bf16"):
                seconds = step(i, precision)
                if i >= 2:  # the first two rounds warm up
                    times[(setting, precision)].append(seconds)
    lora = sum("lora_dropout" in name for name, _ in dropouts)
    print(
        f"{lora} LoRA dropouts, {len(dropouts) - lora} of BERT's; "
        f"median of {args.steps} steps, {args.threads} threads"
    )
    print("| dropout | fp32 s/step | bf16 s/step | bf16 speed-up |\n|---|---:|---:|---:|")
    for setting in SETTINGS:
        fp32, bf16 = (statistics.median(times[(setting, p)]) for p in ("fp32", "bf16"))
        print(f"| {setting} | {fp32:.2f} | {bf16:.2f} | {fp32 / bf16:.2f}x |")


if __name__ == "__main__":
    main()
