"""Production encoding benchmark: speed, memory and language-ID accuracy of ModularEncoder.

    python bench/encode.py --zoo runs/zoo-cpu-jt --lang uz \
        --sentences ../shared/data/parallel/ntrex.tsv --n 2000

1. sentences/s of ``ModularEncoder.encode`` (LoRAs unmerged, packed attention) against
   ``SentenceTransformer.encode`` on the model ``modsenc export`` writes for the same language
   (modules merged: same size as the backbone), on the same sentences, alternating A/B runs;
2. process RSS of the backbone alone, then after adding each installed language in turn (a fresh
   process; freed heap is returned to the OS before every reading, so RSS counts live memory);
3. language-ID accuracy of the router on the held-out columns of ``--sentences`` for every
   installed language (the bundles' profiles are built from other files).
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


MEMORY_PROBE = """
import ctypes, gc, json, sys
sys.path.insert(0, {repo!r})
from bench.encode import rss_mb
from modsenc.encoder import ModularEncoder
libc = ctypes.CDLL("libc.so.6")
def settled_rss():
    gc.collect()
    libc.malloc_trim(0)  # hand freed heap back to the OS, so RSS counts live memory only
    return rss_mb()
zoo, languages, texts = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
enc = ModularEncoder.from_pretrained(zoo, device="cpu", verify=False)
enc.modular.encode(texts, None)  # the bare backbone
steps = [("backbone", settled_rss())]
for lang in languages:
    enc.encode(texts, lang=lang)  # loads the language on first use
    steps.append((lang, settled_rss()))
print(json.dumps(steps))
"""


def memory(zoo: str, languages: list[str], texts: list[str]) -> list[tuple[str, float]]:
    script = MEMORY_PROBE.format(repo=str(REPO))
    out = subprocess.run(
        [sys.executable, "-c", script, zoo, json.dumps(languages), json.dumps(texts)],
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


def main() -> None:
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
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    from modsenc.data.readers import read_parallel_tsv  # noqa: PLC0415
    from modsenc.encoder import ModularEncoder  # noqa: PLC0415
    from modsenc.modules.bundle import Zoo  # noqa: PLC0415

    zoo = Zoo(args.zoo)
    installed = zoo.languages()
    columns = read_parallel_tsv(args.sentences).columns
    texts = [t for t in columns[args.lang] if t][: args.n]
    print(f"machine: {torch.get_num_threads()} torch threads; zoo {args.zoo}: {', '.join(installed)}")

    speed(args, texts)  # its models are freed on return, before the memory probes

    # ---------------------------------------------------------------- 2. memory
    probe = texts[:64]
    sizes = {lang: zoo.bundle_bytes(lang) / 2**20 for lang in installed}
    steps = memory(args.zoo, installed, probe)
    print("\n## process RSS (one process; languages added one by one, each after encoding 64 sentences;")
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

    # ---------------------------------------------------------------- 3. language ID
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
        print(f"{lang}: {100 * correct / len(sample):6.2f}% of {len(sample)} ({unsure} sent to the fallback)")


if __name__ == "__main__":
    main()
