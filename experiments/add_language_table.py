"""Tables for docs/benchmarks.md from the manifests of add-language runs (one zoo per CLA variant).

Each bundle's manifest holds the dev metrics measured after every stage (STS Spearman x100 on the
recipe's dev STS file, paraphrase retrieval on held-out pairs), the wall time of every stage and
the size of every module, so this script only reads and formats them:

    python -m experiments.add_language_table --zoo jt=runs/zoo-cpu-jt --zoo pp=runs/zoo-cpu-pp \
        --zoo pl=runs/zoo-cpu-pl --lang uz --lang kk
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def _manifest(zoo: Path, lang: str) -> dict:
    return json.loads((zoo / lang / "modsenc_bundle.json").read_text(encoding="utf-8"))


def sts_table(zoos: dict[str, Path], lang: str, pivot: str = "en") -> str:
    first = _manifest(next(iter(zoos.values())), lang)
    mono, cross = f"{lang}-{lang}", f"{pivot}-{lang}"

    def row(name: str, metrics: dict) -> str:
        sts = metrics.get("sts_spearman", {})
        cells = [f"{sts[k]:.1f}" if k in sts else "-" for k in (mono, cross)]
        cells += [
            f"{metrics[k]:.1f}" if k in metrics else "-" for k in ("paraphrase_p@1", "crosslingual_p@1")
        ]
        return f"| {name} | " + " | ".join(cells) + " |"

    lines = [
        f"| {lang} | STS {mono} | STS {cross} | dev paraphrase P@1 | dev {pivot}->{lang} P@1 |",
        "|---|---:|---:|---:|---:|",
        row("backbone alone", first["dev_metrics"]["backbone"]),
        row("+ LA + SE", first["dev_metrics"]["se"]),
    ]
    for variant, zoo in zoos.items():
        manifest = _manifest(zoo, lang)
        assert manifest["cla_variant"] == variant, (zoo, manifest["cla_variant"])
        lines.append(row(f"+ CLA {variant}", manifest["dev_metrics"]["cla"]))
    return "\n".join(lines)


def size_table(zoo: Path, langs: list[str]) -> str:
    lines = ["| language | module | parameters | % of backbone |", "|---|---|---:|---:|"]
    for lang in langs:
        manifest = _manifest(zoo, lang)
        for kind, info in sorted(manifest["modules"].items()):
            lines.append(f"| {lang} | {kind} | {info['parameters']:,} | {info['percent_of_backbone']:.2f} |")
    backbone = _manifest(zoo, langs[0])["backbone"]["parameters"]
    lines.append(f"| (backbone) | | {backbone:,} | 100 |")
    return "\n".join(lines)


def time_table(zoos: dict[str, Path], langs: list[str]) -> str:
    lines = [
        "| language | zoo | stage times when trained (s) | wall of the run that installed it (s) |",
        "|---|---|---|---:|",
    ]
    for lang in langs:
        for variant, zoo in zoos.items():
            manifest = _manifest(zoo, lang)
            stages = ", ".join(f"{k} {v:.0f}" for k, v in manifest["stage_seconds"].items())
            lines.append(f"| {lang} | {variant} | {stages} | {manifest['wall_seconds']:.0f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--zoo", action="append", required=True, metavar="VARIANT=DIR", help="a zoo per CLA variant"
    )
    parser.add_argument("--lang", action="append", required=True)
    parser.add_argument("--pivot", default="en")
    args = parser.parse_args()
    zoos = {spec.split("=", 1)[0]: Path(spec.split("=", 1)[1]) for spec in args.zoo}
    for lang in args.lang:
        print(f"\n### {lang}\n\n{sts_table(zoos, lang, args.pivot)}")
    print(f"\n### Module sizes\n\n{size_table(next(iter(zoos.values())), [args.pivot, *args.lang])}")
    print(f"\n### Wall time\n\n{time_table(zoos, [args.pivot, *args.lang])}")


if __name__ == "__main__":
    main()
