"""Production encoding benchmark: speed, memory and language-ID accuracy of ModularEncoder.

    python -m bench.encode --zoo runs/zoo-cpu-jt --lang uz \
        --sentences ../shared/data/parallel/ntrex.tsv --n 2000

1. sentences/s of ``ModularEncoder.encode`` (LoRAs unmerged, packed attention) against
   ``SentenceTransformer.encode`` on the model ``modsenc export`` writes for the same language
   (modules merged: same size as the backbone), on the same sentences, alternating A/B runs;
2. process RSS of the backbone alone, then after adding each installed language in turn (a fresh
   process; freed heap is returned to the OS before every reading, so RSS counts live memory);
3. language-ID accuracy of the router on the held-out columns of ``--sentences`` for every
   installed language (the bundles' profiles are built from other files);
4. side by side (issue 21), on the weights ``modsenc export`` writes for ``--lang`` and the same
   sentences, every arm pinned to ``--threads`` threads: modsenc's routed ``ModularEncoder.encode``
   in fp32, bf16 (autocast), int8 (torchao; fp32 or bf16 around it); sentence-transformers' torch
   backend in fp32 and under bf16 autocast; its ONNX backend in fp32 and dynamic int8
   (``export_dynamic_quantized_onnx_model``); its OpenVINO backend in fp32, bf16 and static int8
   (``export_static_quantized_openvino_model``, calibrated on local sentences, not the hub's). Arms
   run interleaved (one pass of each per round, the order rotated), the median pass counts, and
   each arm's vectors are compared with modsenc fp32's on the same sentences (cosine mean / min).
   ``--markdown`` writes the table with the CPU's model name and flags (lscpu). Arms whose package
   is missing are listed as skipped: ``pip install -e '.[onnx,openvino]'``.

    nice python -m bench.encode --zoo runs/zoo --lang uz --sentences ntrex.tsv --n 512 \
        --sections side --rounds 5 --markdown /tmp/side.md
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bench.common import RELEVANT_FLAGS, lscpu
from bench.encode_backends import Arm, onnx_arms, openvino_arms, st_arms, versions


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


MEMORY_PROBE = """
import ctypes, gc, json, sys
from bench.encode import rss_mb  # the parent's working directory and PYTHONPATH: bench is importable
from modsenc.encoder import ModularEncoder
libc = ctypes.CDLL("libc.so.6")
def settled_rss():
    gc.collect()
    libc.malloc_trim(0)  # hand freed heap back to the OS, so RSS counts live memory only
    return rss_mb()
zoo, languages, texts, runtime = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4]
enc = ModularEncoder.from_pretrained(zoo, device="cpu", verify=False, runtime=runtime)
enc.modular.encode(texts, None)  # the bare backbone
steps = [("backbone", settled_rss())]
for lang in languages:
    enc.encode(texts, lang=lang)  # loads the language on first use
    steps.append((lang, settled_rss()))
print(json.dumps(steps))
"""


def memory(zoo: str, languages: list[str], texts: list[str], runtime: str) -> list[tuple[str, float]]:
    out = subprocess.run(
        [sys.executable, "-c", MEMORY_PROBE, zoo, json.dumps(languages), json.dumps(texts), runtime],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def timed(fn, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def speed(args: argparse.Namespace, texts: list[str]) -> None:
    from sentence_transformers import SentenceTransformer  # noqa: PLC0415

    from modsenc.encoder import ModularEncoder  # noqa: PLC0415
    from modsenc.modules.export import export_sentence_transformer  # noqa: PLC0415

    encoder = ModularEncoder.from_pretrained(args.zoo, device="cpu", languages=[args.lang])
    mode = "cross"
    with tempfile.TemporaryDirectory() as tmp:
        try:
            export_sentence_transformer(args.zoo, args.lang, Path(tmp) / "st", mode="cross")
        except ValueError as err:
            print(f"cross export refused ({err}); comparing mode=mono")
            mode = "mono"
            export_sentence_transformer(args.zoo, args.lang, Path(tmp) / "st", mode="mono")
        st = SentenceTransformer(str(Path(tmp) / "st"), device="cpu")
        st.max_seq_length = encoder.modular.backbone.max_length
        modular_times, st_times, routed_times = [], [], []

        def run_modular(lang: str) -> None:
            encoder.encode(texts, lang=lang, batch_size=args.batch_size, mode=mode)

        for _ in range(args.repeats):  # alternate, so drift in machine load hits both sides alike
            modular_times += timed(lambda: run_modular(args.lang), 1)
            st_times += timed(lambda: st.encode(texts, batch_size=args.batch_size), 1)
            routed_times += timed(lambda: run_modular("auto"), 1)
        a = st.encode(texts[:64], batch_size=args.batch_size)
        b = encoder.encode(texts[:64], lang=args.lang, mode=mode)
    n = len(texts)
    best = {
        name: n / min(t)
        for name, t in (("modular", modular_times), ("st", st_times), ("routed", routed_times))
    }
    print(
        f"\n## speed ({n} {args.lang} sentences, batch {args.batch_size}, mode {mode}, "
        f"best of {args.repeats})"
    )
    print(f"ModularEncoder.encode(lang={args.lang!r})     {best['modular']:8.1f} sentences/s")
    print(f"ModularEncoder.encode(lang='auto')    {best['routed']:8.1f} sentences/s (language ID included)")
    print(f"SentenceTransformer.encode (export)   {best['st']:8.1f} sentences/s")
    print(
        f"ratio modular / sentence-transformers {best['modular'] / best['st']:.2f}x "
        f"(routed: {best['routed'] / best['st']:.2f}x); max |difference| {abs(a - b).max():.2e}"
    )


# ---------------------------------------------------------------------------- 4. side by side
# Every arm: (name, what it runs). modsenc-* go through ModularEncoder.encode (the torch runtime
# with the modules merged per language unless the arm says live; the openvino runtime's graphs);
# modsenc-default is ``from_pretrained(zoo)`` with every default (runtime and dtype auto), and
# router-only times its router alone on the same sentences (what routing costs); st-*, onnx-*,
# openvino-* run SentenceTransformer on the export.
ARMS = (
    "modsenc-default",
    "router-only",
    "router-only-unscreened",
    "modsenc-fp32",
    "modsenc-fp32-live",
    "modsenc-bf16-live",
    "modsenc-bf16",
    "modsenc-int8",
    "modsenc-int8-bf16",
    "modsenc-openvino-fp32",
    "modsenc-openvino-bf16",
    "modsenc-openvino-int8",
    "modsenc-openvino-int8-bf16",
    "modsenc-openvino-int8-mixed-bf16",
    "modsenc-openvino-int8-weights-bf16",
    "st-fp32",
    "st-bf16",
    "onnx-fp32",
    "onnx-int8",
    "openvino-fp32",
    "openvino-bf16",
    "openvino-int8",
)
# The sentence-transformers arms every arm's speed is divided by: its torch backend in fp32 and in
# bf16, and its OpenVINO backend in fp32 and bf16 (the fastest of its arms at cosine >= 0.999: bf16
# where the CPU has it natively, fp32 on AVX2); a base that did not run shows "-".
RATIO_BASES = ("st-fp32", "st-bf16", "openvino-fp32", "openvino-bf16")


def row_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def _default_arms(args: argparse.Namespace, mode: str, lang: str, wanted: list[str]) -> list[Arm]:
    """modsenc-default (``from_pretrained(zoo)`` with every default) and router-only (its router
    alone on the same sentences)."""
    from modsenc.encoder import ModularEncoder  # noqa: PLC0415

    arms: list[Arm] = []
    if {"modsenc-default", "router-only", "router-only-unscreened"} & set(wanted):
        default = ModularEncoder.from_pretrained(args.zoo, languages=[args.lang])
        default.encode(["warm-up"], lang=args.lang, mode=mode)  # compiles the language, if openvino
        choice = f"runtime {default.runtime}, {default.precision}"
        if "modsenc-default" in wanted:
            arms.append(
                Arm(
                    "modsenc-default",
                    lambda texts: default.encode(texts, lang=lang, batch_size=args.batch_size, mode=mode),
                    f"from_pretrained(zoo) with every default ({choice}), lang={lang!r}, mode={mode}",
                )
            )
        if "router-only" in wanted:
            arms.append(
                Arm(
                    "router-only",
                    lambda texts: default.router.route(texts),
                    "the default encoder's router.route(texts) alone: what routing costs",
                    vectors=False,
                )
            )
        if "router-only-unscreened" in wanted:
            unscreened = copy.copy(default.router)  # the same profiles, tables and gate
            unscreened.screen_readings = False
            arms.append(
                Arm(
                    "router-only-unscreened",
                    lambda texts: unscreened.route(texts),
                    "the same router reading every converted view in full (screen_readings=False)",
                    vectors=False,
                )
            )
    return arms


def _modsenc_arms(args: argparse.Namespace, mode: str, wanted: list[str]) -> tuple[list[Arm], str]:
    from modsenc.encoder import ModularEncoder  # noqa: PLC0415
    from modsenc.runtimes.torch import TorchRuntime  # noqa: PLC0415

    lang = args.lang if args.route == "given" else "auto"
    arms, skipped = _default_arms(args, mode, lang, wanted), []
    settings = {  # name: (dtype, quantize, runtime[, modules])
        "modsenc-fp32": ("fp32", None, "torch"),
        "modsenc-fp32-live": ("fp32", None, "torch", "live"),
        "modsenc-bf16-live": ("bf16", None, "torch", "live"),
        "modsenc-bf16": ("bf16", None, "torch"),
        "modsenc-int8": ("fp32", "int8", "torch"),
        "modsenc-int8-bf16": ("bf16", "int8", "torch"),
        "modsenc-openvino-fp32": ("fp32", None, "openvino"),
        "modsenc-openvino-bf16": ("bf16", None, "openvino"),
        # NNCF static int8, calibrated as a user's would be: on the bundle's own sentences, or
        # (bundles older than calibration.txt, the shipped zoo's) the demo corpus
        "modsenc-openvino-int8": ("fp32", "int8", "openvino"),
        "modsenc-openvino-int8-bf16": ("bf16", "int8", "openvino"),
        "modsenc-openvino-int8-mixed-bf16": ("bf16", "int8-mixed", "openvino"),
        "modsenc-openvino-int8-weights-bf16": ("bf16", "int8-weights", "openvino"),
    }
    for name, (dtype, quantize, runtime, *live) in settings.items():
        if name not in wanted:
            continue
        try:
            encoder = ModularEncoder.from_pretrained(
                args.zoo,
                device="cpu",
                languages=[args.lang],
                dtype=dtype,
                quantize=quantize,
                verify=False,
                runtime=runtime,
            )
        except ImportError as err:  # torchao, openvino
            skipped.append(f"{name} ({err})")
            continue
        if live:  # the same encoder with the torch runtime's modules run live (unmerged)
            encoder = ModularEncoder(
                encoder.zoo,
                encoder.modular,
                encoder.router,
                TorchRuntime(encoder.modular, encoder.precision, modules="live"),
                verify=False,
            )

        def run(texts: list[str], encoder: ModularEncoder = encoder) -> np.ndarray:
            return encoder.encode(texts, lang=lang, batch_size=args.batch_size, mode=mode)

        run(["warm-up"])  # the openvino runtime compiles a language on its first use
        int8 = ", torchao int8 linears" if runtime == "torch" else f", NNCF {quantize}"
        what = f"lang={lang!r}, mode={mode}" + (int8 if quantize else "")
        what += ", runtime=torch, modules live (unmerged)" if live else ""
        what += ", runtime=openvino (modules merged, compiled per language)" if runtime == "openvino" else ""
        arms.append(Arm(name, run, what))
    return arms, "; ".join(skipped)


def side_by_side(args: argparse.Namespace, texts: list[str], calib: list[str]) -> str:
    """Run the arms interleaved and return the markdown report."""
    from modsenc.encoder import ModularEncoder  # noqa: PLC0415
    from modsenc.modules.export import export_sentence_transformer  # noqa: PLC0415

    wanted = [a.strip() for a in args.arms.split(",")] if args.arms else list(ARMS)
    unknown = sorted(set(wanted) - set(ARMS))
    if unknown:
        raise SystemExit(f"unknown arms {unknown}; choose from {', '.join(ARMS)}")
    skipped: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        mode = "cross"
        try:
            export_sentence_transformer(args.zoo, args.lang, work / "export", mode="cross")
        except ValueError as err:
            print(f"cross export refused ({err}); comparing mode=mono")
            mode = "mono"
            export_sentence_transformer(args.zoo, args.lang, work / "export", mode="mono")
        reference_encoder = ModularEncoder.from_pretrained(
            args.zoo, device="cpu", languages=[args.lang], dtype="fp32", verify=False
        )
        max_length = reference_encoder.modular.backbone.max_length
        lang = args.lang if args.route == "given" else "auto"
        reference = reference_encoder.encode(texts, lang=lang, batch_size=args.batch_size, mode=mode)
        del reference_encoder

        arms, note = _modsenc_arms(args, mode, wanted)
        skipped += [note] if note else []
        arms += st_arms(work / "export", args, max_length, wanted)
        more, note = onnx_arms(work / "export", work, args, max_length, wanted)
        arms += more
        skipped += [note] if note else []
        more, note = openvino_arms(work / "export", work, args, max_length, wanted, calib)
        arms += more
        skipped += [note] if note else []
        torch.set_num_threads(args.threads)  # again: a backend's set-up may have changed it

        cosines = {}
        for arm in arms:  # a warm-up pass, whose vectors are the ones compared
            found = arm.encode(texts)
            cosines[arm.name] = row_cosines(reference, found) if arm.vectors else None
        times: dict[str, list[float]] = {arm.name: [] for arm in arms}
        for r in range(args.rounds):  # interleaved: a drift in load hits every arm alike
            order = arms[r % len(arms) :] + arms[: r % len(arms)]
            for arm in order:
                times[arm.name] += timed(lambda arm=arm: arm.encode(texts), 1)

    rate = {name: len(texts) / statistics.median(t) for name, t in times.items()}
    return _side_table(args, len(texts), (max_length, mode), arms, rate, cosines, skipped)


def _side_table(
    args: argparse.Namespace,
    n: int,
    shape: tuple[int, str],
    arms: list[Arm],
    rate: dict[str, float],
    cosines: dict[str, np.ndarray],
    skipped: list[str],
) -> str:
    """The side-by-side markdown: each arm's rate, its ratios to st-fp32 and onnx-int8, and its
    vectors' cosines to modsenc fp32's; ``shape``: the max length and the mode."""
    max_length, mode = shape
    model, flags = lscpu()
    lines = [
        f"### Side by side: {n} {args.lang} sentences, batch {args.batch_size}, "
        f"max length {max_length}, mode {mode}, {args.threads} threads, "
        f"median of {args.rounds} interleaved rounds",
        "",
        f"CPU: {model}; flags of note: {' '.join(f for f in RELEVANT_FLAGS if f in flags) or 'none'}",
        f"zoo {args.zoo}; {versions()}",
        "",
        "| arm | sentences/s | "
        + " | ".join(f"x {base}" for base in RATIO_BASES)
        + " | cosine to modsenc fp32 mean / min | how |",
        "| --- | ---: | " + "---: | " * len(RATIO_BASES) + "--- | --- |",
    ]
    for arm in arms:
        ratio = {base: f"{rate[arm.name] / rate[base]:.2f}" if base in rate else "-" for base in RATIO_BASES}
        c = cosines[arm.name]
        closeness = "-" if c is None else f"{c.mean():.5f} / {c.min():.5f}"
        lines.append(
            f"| {arm.name} | {rate[arm.name]:.1f} | {' | '.join(ratio.values())} | {closeness} | {arm.note} |"
        )
    if "router-only" in rate and "modsenc-default" in rate:
        share = rate["modsenc-default"] / rate["router-only"]
        lines += ["", f"Routing is {100 * share:.1f}% of the default encoder's routed encode time."]
    if skipped:
        lines += ["", "Skipped: " + "; ".join(skipped)]
    lines += ["", f"All CPU flags: {' '.join(flags)}", ""]
    return "\n".join(lines)


SECTIONS = ("speed", "memory", "langid", "side")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--zoo", required=True)
    parser.add_argument("--lang", default="uz", help="language of the speed comparison")
    parser.add_argument("--sentences", required=True, help="multi-parallel TSV with held-out sentences")
    parser.add_argument("--n", type=int, default=2000, help="sentences per speed run")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--runtime", default="torch", choices=("torch", "openvino"), help="the memory section's runtime"
    )
    parser.add_argument(
        "--sections", default=",".join(SECTIONS), help=f"which to run, comma-separated: {', '.join(SECTIONS)}"
    )
    side = parser.add_argument_group("side by side (section 'side')")
    side.add_argument(
        "--arms", default=None, help=f"comma-separated subset of {', '.join(ARMS)} (default all)"
    )
    side.add_argument("--rounds", type=int, default=5, help="interleaved timed rounds; the median counts")
    side.add_argument(
        "--route", choices=("given", "auto"), default="given", help="modsenc arms: lang=--lang, or detected"
    )
    side.add_argument(
        "--onnx-quant", default="avx512_vnni", choices=("arm64", "avx2", "avx512", "avx512_vnni")
    )
    side.add_argument(
        "--calib", type=int, default=300, help="OpenVINO int8 calibration sentences (after the --n measured)"
    )
    side.add_argument("--markdown", default=None, help="also write the side-by-side table to this file")
    return parser


def memory_section(args: argparse.Namespace, zoo: Any, installed: list[str], texts: list[str]) -> None:
    """2. Process RSS as the installed languages are added one by one."""
    probe = texts[:64]
    sizes = {lang: zoo.bundle_bytes(lang) / 2**20 for lang in installed}
    steps = memory(args.zoo, installed, probe, args.runtime)
    print(f"\n## process RSS, runtime {args.runtime} (one process; languages added one by one, each")
    print("## after encoding 64 sentences (the openvino runtime compiles the language then);")
    print("## garbage collected and malloc_trim'd before every reading)")
    print(f"backbone alone                 {steps[0][1]:8.1f} MB")
    for (_, before), (lang, after) in zip(steps, steps[1:]):
        print(
            f"+ {lang}                           {after:8.1f} MB  "
            f"(+{after - before:5.1f} MB; bundle on disk {sizes[lang]:5.1f} MB)"
        )
    total = steps[-1][1] - steps[0][1]
    print(
        f"all {len(installed)} languages: +{total:.1f} MB over the backbone alone; "
        f"bundles on disk {sum(sizes.values()):.1f} MB"
    )


def langid_section(args: argparse.Namespace, installed: list[str], columns: dict[str, list[str]]) -> None:
    """3. The router's language ID on the held-out columns of ``--sentences``."""
    from modsenc.encoder import ModularEncoder  # noqa: PLC0415

    router = ModularEncoder.from_pretrained(args.zoo, device="cpu", verify=False).router
    print(
        f"\n## language ID on held-out {Path(args.sentences).name} "
        f"(router over {', '.join(installed)}; fallback {router.fallback})"
    )
    for lang in installed:
        if lang not in columns:
            print(f"{lang}: no column in {args.sentences}")
            continue
        sample = [t for t in columns[lang] if t]
        routed = router.route(sample)
        correct = sum(r.lang == lang for r in routed)
        unsure = sum(r.detected is None or r.confidence < router.min_confidence for r in routed)
        share = 100 * correct / len(sample)
        print(f"{lang}: {share:6.2f}% of {len(sample)} ({unsure} sent to the fallback)")


def side_section(args: argparse.Namespace, column: list[str], texts: list[str]) -> None:
    """4. Side by side, calibrating OpenVINO int8 on the sentences after the measured ones."""
    calib = column[args.n : args.n + args.calib]
    if not calib:  # no sentences beyond the measured ones: calibrate on those (said in the table)
        print(f"no {args.lang} sentences after the first {args.n}: OpenVINO int8 calibrates on them")
        calib = texts[: args.calib]
    report = side_by_side(args, texts, calib)
    print("\n" + report)
    if args.markdown:
        Path(args.markdown).write_text(report, encoding="utf-8")
        print(f"written to {args.markdown}")


def main() -> None:
    parser = _parser()
    args = parser.parse_args()
    sections = [x.strip() for x in args.sections.split(",") if x.strip()]
    if not set(sections) <= set(SECTIONS):
        parser.error(f"--sections: unknown {sorted(set(sections) - set(SECTIONS))}; choose from {SECTIONS}")
    torch.set_num_threads(args.threads)

    from modsenc.data.readers import read_parallel_tsv  # noqa: PLC0415
    from modsenc.modules.bundle import Zoo  # noqa: PLC0415

    zoo = Zoo(args.zoo)
    installed = zoo.languages()
    columns = read_parallel_tsv(args.sentences).columns
    column = [t for t in columns[args.lang] if t]
    texts = column[: args.n]
    print(f"machine: {torch.get_num_threads()} torch threads; zoo {args.zoo}: {', '.join(installed)}")

    if "speed" in sections:
        speed(args, texts)  # its models are freed on return, before the memory probes

    if "memory" in sections:  # ------------------------------------------------- 2. memory
        memory_section(args, zoo, installed, texts)
    if "langid" in sections:  # ---------------------------------------------- 3. language ID
        langid_section(args, installed, columns)
    if "side" in sections:  # ----------------------------------------------- 4. side by side
        side_section(args, column, texts)


if __name__ == "__main__":
    main()
