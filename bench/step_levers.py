"""What the candidate speed-ups of issue 14 would buy, each measured in isolation on the e5 shape.

    python bench/step_levers.py --tokens 1300 --reps 20

One transformer layer of multilingual-e5-small's shape (hidden 384, 12 heads, FFN 1536; BERT's
layer from transformers with SDPA attention, in training mode) on a packed batch of ``--tokens``
real tokens (as sequences of ``--length`` tokens), forward + backward, timed as the median of
``--reps`` repetitions with the variants of each comparison interleaved, on the same threads:

1. **fused QKV**: the three H x H query/key/value projections against one H x 3H projection (the
   same arithmetic, one GEMM), forward + backward of the projections alone, and their share of the
   whole layer;
2. **one pass of 2T tokens instead of two of T**: the layer on both MEXMA passes packed together
   against two calls (bigger GEMMs, fewer calls);
3. **torch.compile** (inductor, ``dynamic=True`` because every batch brings new lengths) against
   eager: steady-state time over batches of varying length, and the compile time paid first;
4. **dropout**: the layer with its dropout probabilities (0.1) against the same layer with 0,
   which bounds what a cheaper dropout mask could save.

Each is an upper bound on what the lever brings to a whole MEXMA step: the step's other parts do
not change. docs/benchmarks.md relates them to the profile of the step.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from torch import nn
from transformers import BertConfig
from transformers.models.bert.modeling_bert import BertLayer


def timed(fn: Callable[[], None]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def compare(variants: dict[str, Callable[[], None]], reps: int, warmup: int = 2) -> dict[str, float]:
    """Median seconds of each variant, the variants interleaved rep by rep."""
    for fn in variants.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(reps):
        for name, fn in variants.items():
            times[name].append(timed(fn))
    return {name: statistics.median(t) for name, t in times.items()}


def layer(config: BertConfig, dropout: float) -> BertLayer:
    cfg = BertConfig(
        **{**config.to_dict(), "hidden_dropout_prob": dropout, "attention_probs_dropout_prob": dropout}
    )
    cfg._attn_implementation = "sdpa"
    return BertLayer(cfg).train()


def fwd_bwd(module: nn.Module, x: torch.Tensor) -> Callable[[], None]:
    def run() -> None:
        out = module(x)
        out = out[0] if isinstance(out, tuple) else out
        out.sum().backward()

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=1300, help="real tokens of one pass (A and B)")
    parser.add_argument("--length", type=int, default=26, help="tokens per sequence")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile (minutes on 2 cores)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    config = BertConfig(hidden_size=384, num_attention_heads=12, intermediate_size=1536)
    hidden = config.hidden_size
    batch = max(1, args.tokens // args.length)
    x = torch.randn(batch, args.length, hidden, requires_grad=True)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; "
        f"{batch} sequences x {args.length} tokens"
    )

    # 1. fused QKV
    separate = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(3))
    fused = nn.Linear(hidden, 3 * hidden)
    flat = x.detach().reshape(-1, hidden).requires_grad_()

    def three() -> None:
        sum(m(flat).sum() for m in separate).backward()

    def one() -> None:
        fused(flat).sum().backward()

    full = layer(config, 0.1)
    t = compare({"three": three, "one": one, "layer": fwd_bwd(full, x)}, args.reps)
    print(
        f"1. QKV fwd+bwd: three H x H {t['three'] * 1e3:.2f} ms, one H x 3H {t['one'] * 1e3:.2f} ms "
        f"({t['three'] / t['one']:.2f}x); the QKV projections are {t['three'] / t['layer']:.0%} of the "
        f"layer ({t['layer'] * 1e3:.1f} ms), so fusing saves at most "
        f"{(t['three'] - t['one']) / t['layer']:.1%} of it"
    )

    # 2. one pass of 2T tokens instead of two of T
    x2 = torch.cat([x.detach(), x.detach()]).requires_grad_()

    def two_passes() -> None:
        fwd_bwd(full, x)()
        fwd_bwd(full, x)()

    t = compare({"two": two_passes, "one": fwd_bwd(full, x2)}, args.reps)
    print(
        f"2. layer on 2T tokens: two passes of T {t['two'] * 1e3:.1f} ms, one of 2T {t['one'] * 1e3:.1f} ms "
        f"({t['two'] / t['one']:.2f}x)"
    )

    # 4. dropout
    no_dropout = layer(config, 0.0)
    no_dropout.load_state_dict(full.state_dict())
    t = compare({"dropout": fwd_bwd(full, x), "none": fwd_bwd(no_dropout, x)}, args.reps)
    print(
        f"4. dropout 0.1 {t['dropout'] * 1e3:.1f} ms, none {t['none'] * 1e3:.1f} ms: dropout is "
        f"{1 - t['none'] / t['dropout']:.1%} of the layer"
    )

    # 3. torch.compile with dynamic shapes over varying lengths
    if not args.no_compile:
        compiled = torch.compile(full, dynamic=True)
        lengths = [args.length - 6, args.length, args.length + 7, args.length + 14]
        inputs = [torch.randn(max(1, args.tokens // n), n, hidden, requires_grad=True) for n in lengths]
        start = time.perf_counter()
        for tensor in inputs:
            fwd_bwd(compiled, tensor)()  # compiles (once per dynamic-shape family), then runs
        compile_s = time.perf_counter() - start

        def run_all(module: nn.Module) -> Callable[[], None]:
            return lambda: [fwd_bwd(module, tensor)() for tensor in inputs]

        t = compare({"eager": run_all(full), "compiled": run_all(compiled)}, max(3, args.reps // 4))
        print(
            f"3. torch.compile(dynamic=True): eager {t['eager'] * 1e3:.1f} ms, compiled "
            f"{t['compiled'] * 1e3:.1f} ms over {len(lengths)} lengths ({t['eager'] / t['compiled']:.2f}x); "
            f"first calls incl. compilation {compile_s:.1f} s"
        )


if __name__ == "__main__":
    main()
