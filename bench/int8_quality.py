"""What does int8 on the openvino runtime cost on dev, language by language?

Scores the shipped zoo on the held-out columns of bench/shipped_zoo.py (Kardeş STS dev: xx-xx in
``mono`` mode, en-xx in ``cross`` mode; Kardeş bitext and NTREX xsim in ``cross``) through the
torch runtime in fp32 (the reference), the openvino runtime in fp32, and the openvino runtime with
NNCF's static int8 graphs, calibrated as a user's would be: the bundle's own calibration.txt
(every shipped bundle has one since its CLA was retrained), or, for a bundle made before
add-language wrote it, the demo corpus in the language, else in English
(modsenc/runtimes/calibration.py). Writes the marked block of docs/results/int8.md.

    python -m bench.int8_quality --languages uz,kk,az,ky,ug
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench.common import Runner, columns, heldout, machine, replace_section

MARK_BEGIN = "<!-- int8 quality: written by bench/int8_quality.py -->"
MARK_END = "<!-- end of int8 quality -->"
# (name, eval options)
ARMS = (
    ("torch fp32", ["--runtime", "torch", "--dtype", "fp32"]),
    ("openvino fp32", ["--runtime", "openvino", "--dtype", "fp32"]),
    ("openvino int8", ["--runtime", "openvino", "--dtype", "fp32", "--quantize", "int8"]),
)


def evaluate(args: argparse.Namespace, run: Runner, langs: tuple[str, ...]) -> dict[str, dict]:
    work = Path(args.work)
    sts, bitexts = heldout(work, Path(args.data), langs)
    (work / "eval").mkdir(parents=True, exist_ok=True)
    (work / "logs").mkdir(parents=True, exist_ok=True)
    results = {}
    for name, options in ARMS:
        for mode in ("cross", "mono"):
            out = work / "eval" / f"{name.replace(' ', '-')}-{mode}-{'-'.join(langs)}.json"
            cmd = ["eval", args.zoo, "--sts", str(sts), "--json", str(out), "--overwrite", "--mode", mode]
            for spec in bitexts if mode == "cross" else []:
                cmd += ["--bitext", spec]
            run("eval", [*cmd, *options], out, work / "logs" / f"{out.stem}.log")
            results[f"{name}|{mode}"] = json.loads(out.read_text())
    return results


def table(results: dict, lang: str) -> list[str]:
    cols = columns(lang)
    lines = [f"**{lang}**", "", "| arm | " + " | ".join(c[0] for c in cols) + " |"]
    lines.append("|---" * (len(cols) + 1) + "|")
    reference = [get(results[f"torch fp32|{mode}"]) for _, mode, get, _ in cols]
    for name, _ in ARMS:
        cells = [get(results[f"{name}|{mode}"]) for _, mode, get, _ in cols]
        shown = [
            "–" if v is None else f"{v:.1f}" + ("" if name == "torch fp32" else f" ({v - r:+.1f})")
            for v, r in zip(cells, reference)
        ]
        lines.append(f"| {name} | " + " | ".join(shown) + " |")
    return lines + [""]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", default="../shared/data")
    parser.add_argument("--work", default="runs/int8-eval")
    parser.add_argument("--zoo", default="modsenc/adapters_zoo")
    parser.add_argument("--languages", default="uz,kk,az,ky,ug")
    parser.add_argument("--out", default="docs/results/int8.md")
    args = parser.parse_args()
    langs = tuple(x.strip() for x in args.languages.split(",") if x.strip())
    run = Runner()
    results = evaluate(args, run, langs)
    body = [MARK_BEGIN, "", f"Machine: {machine()}. Commands:", "", "```"]
    body += [*run.commands["eval"], "```", ""]
    body += ["Differences in brackets are against torch fp32 (STS: Spearman x100; xsim: error %).", ""]
    for lang in langs:
        body += table(results, lang)
    body.append(MARK_END)
    replace_section(Path(args.out), MARK_BEGIN, MARK_END, "\n".join(body) + "\n")
    print("\n".join(body))


if __name__ == "__main__":
    main()
