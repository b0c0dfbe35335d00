"""Padding-free attention on a CUDA GPU: which backend a MEXMA-base-shaped backbone should train with.

A benchmark, not a test (needs a CUDA GPU; run it where one is lent). In one process, on one GPU,
for an XLM-R base shape (12 layers, hidden 768, 12 heads, FFN 3072) on a SentencePiece vocabulary
trained here, it times one forward + backward of the backbone (bf16 autocast, as training runs on
CUDA) over the same batches of real sentences (``--batch`` sentences drawn from the TSV's columns,
a new draw each step, so every arm meets the same mix of lengths):

- ``packed-sdpa``: modsenc's per-length path (one ``scaled_dot_product_attention`` call per run of
  equal lengths), the CPU default; on CUDA it keeps SDPA off cuDNN's kernel;
- ``packed-sdpa-cudnn``: the same path with SDPA's own kernel choice, cuDNN's included (cuDNN
  builds an execution plan per new shape, and every step brings new (sequences, length) shapes);
- ``packed-varlen``: torch's flash kernel over cumulative offsets (``attention: varlen``);
- ``packed-xformers``: xformers' block-diagonal ``memory_efficient_attention``, when its kernel
  runs here;
- ``padded-hf``: the Hugging Face model on the padded batch with an attention mask (SDPA), the
  baseline a padded trainer runs.

Arms run interleaved step by step after warm-up steps; the figure is real tokens per second
(padding not counted) and milliseconds per step (median). Before timing, the packed arms' states
on one batch are compared with the padded reference (max abs difference over real tokens).

    python -m bench.attention_cuda --data ../shared/data/parallel/kardes-xnli.tsv --json out.json
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import tempfile
import time
from collections.abc import Callable

import torch

from modsenc.backbone import Backbone
from modsenc.backbone.attention import SdpaVarlenAttention, available_backends
from modsenc.backbone.tokenizer import train_sentencepiece
from modsenc.data.readers import read_parallel_tsv

BASE_SHAPE = {
    "model_type": "xlm-roberta",
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "max_position_embeddings": 514,
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.0,
}


def _sentences(path: str) -> list[str]:
    corpus = read_parallel_tsv(path)
    return [s for column in corpus.columns.values() for s in column if s.strip()]


def _bf16(backbone: Backbone) -> torch.autocast:
    return torch.autocast(backbone.device.type, dtype=torch.bfloat16)


def _padded_ids(backbone: Backbone, ids: list[list[int]]) -> torch.Tensor:
    longest = max(len(s) for s in ids)
    pad = backbone.tokenizer.pad_token_id
    return torch.tensor([s + [pad] * (longest - len(s)) for s in ids], device=backbone.device)


def _set_arm_attention(backbone: Backbone, backend: str) -> None:
    if backend == "sdpa-cudnn":
        backbone.set_attention("sdpa")
        backbone.attention = SdpaVarlenAttention(cuda_kernels=None)  # SDPA's own kernel choice
    else:
        backbone.set_attention(backend)


def _packed_step(backbone: Backbone, backend: str, ids: list[list[int]]) -> Callable[[], int]:
    def step() -> int:
        _set_arm_attention(backbone, backend)
        batch = backbone.pack(ids)
        with _bf16(backbone):
            states = backbone(batch)
        states.float().square().mean().backward()
        return batch.num_tokens

    return step


def _padded_step(backbone: Backbone, ids: list[list[int]]) -> Callable[[], int]:
    def step() -> int:
        input_ids = _padded_ids(backbone, ids)
        mask = (input_ids != backbone.tokenizer.pad_token_id).long()
        with _bf16(backbone):
            states = backbone.model(input_ids, mask).last_hidden_state
        states.float()[mask.bool()].square().mean().backward()
        return int(mask.sum())

    return step


def _max_difference(backbone: Backbone, backend: str, ids: list[list[int]]) -> float:
    """Max abs difference of the packed states to the padded forward's, dropout off."""
    _set_arm_attention(backbone, backend)
    backbone.eval()
    batch = backbone.pack(ids)
    input_ids = _padded_ids(backbone, ids)
    mask = input_ids != backbone.tokenizer.pad_token_id
    with torch.no_grad(), _bf16(backbone):
        packed, packed_mask = batch.pad(backbone(batch))
        reference = backbone.model(input_ids, mask.long()).last_hidden_state
    backbone.train()
    assert torch.equal(packed_mask, mask)
    return (packed.float() - reference.float())[mask].abs().max().item()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True, help="a parallel TSV; every column's sentences are drawn")
    parser.add_argument("--batch", type=int, default=2048, help="sentences a step (1024 pairs' two sides)")
    parser.add_argument("--max-length", type=int, default=200)
    parser.add_argument("--vocab-size", type=int, default=16000)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--device", default="cuda", help="cpu only to check the script itself")
    parser.add_argument("--layers", type=int, default=12, help="fewer only to check the script itself")
    return parser


def _timed(
    backbone: Backbone, arms: dict[str, str | None], draws: list, args: argparse.Namespace
) -> tuple[dict[str, list[float]], dict[str, int]]:
    """Every arm's step on every draw, interleaved; the steps after the warm-up timed."""
    synchronize = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    times: dict[str, list[float]] = {arm: [] for arm in arms}
    tokens: dict[str, int] = dict.fromkeys(arms, 0)
    for i, ids in enumerate(draws):
        for arm, spec in arms.items():
            step = _padded_step(backbone, ids) if spec is None else _packed_step(backbone, spec, ids)
            backbone.zero_grad(set_to_none=True)
            synchronize()
            start = time.perf_counter()
            n = step()
            synchronize()
            if i >= args.warmup:
                times[arm].append(time.perf_counter() - start)
                tokens[arm] += n
    return times, tokens


def main() -> None:
    args = _parser().parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("bench/attention_cuda.py needs a CUDA GPU")

    sentences = _sentences(args.data)
    with tempfile.TemporaryDirectory() as tmp:
        sample = random.Random(0).sample(sentences, min(20000, len(sentences)))
        tokenizer = train_sentencepiece(sample, tmp, vocab_size=args.vocab_size)
    shape = BASE_SHAPE | {"num_hidden_layers": args.layers}
    backbone = Backbone.from_config(shape, tokenizer, attention="sdpa", seed=0).to(args.device).train()
    backbone.max_length = args.max_length
    rng = random.Random(0)
    draws = [backbone.tokenize(rng.sample(sentences, args.batch)) for _ in range(args.warmup + args.steps)]

    # arm -> attention backend; None: the padded Hugging Face forward.
    arms: dict[str, str | None] = {"packed-sdpa": "sdpa", "packed-sdpa-cudnn": "sdpa-cudnn"}
    arms |= {f"packed-{name}": name for name in available_backends() if name != "sdpa"}
    arms["padded-hf"] = None

    differences = {arm: _max_difference(backbone, spec, draws[0]) for arm, spec in arms.items() if spec}
    times, tokens = _timed(backbone, arms, draws, args)

    rows = {
        arm: {
            "ms_per_step": 1000 * statistics.median(times[arm]),
            "tokens_per_s": tokens[arm] / sum(times[arm]),
            "max_abs_diff_to_padded": differences.get(arm),
        }
        for arm in arms
    }
    padded = rows["padded-hf"]["tokens_per_s"]
    for row in rows.values():
        row["vs_padded"] = row["tokens_per_s"] / padded
    result = {
        "gpu": torch.cuda.get_device_name() if args.device == "cuda" else None,
        "torch": torch.__version__,
        "cpu": platform.processor() or platform.machine(),
        "batch": args.batch,
        "steps": args.steps,
        "mean_tokens": sum(len(s) for s in draws[0]) / len(draws[0]),
        "arms": rows,
    }
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
