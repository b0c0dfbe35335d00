"""Language routing accuracy on held-out text, per language, short and long, Latin and Cyrillic.

Builds every language's router profile exactly as ``modsenc add-language`` does (all of the
language's training text in a recipe, each script its own sub-profile, a held-out sample for
calibration) and routes held-out sentences that no recipe trains on: NTREX-128 (news) and the
Kardeş STS dev sentences (short captions and headlines), plus Uzbek in Cyrillic (NTREX's uz
transliterated) and Uzbek app reviews are *not* used (they are training text). Short = under 6
words; the goals (issue 20) are >= 99% on 4+ words and >= 97% below.

    python bench/router.py --recipe recipes/add-language-e5.yaml --languages en,uz,kk,az,tr
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from modsenc.data.language_data import load_language_data
from modsenc.data.orthography import orthography_for
from modsenc.data.readers import load_parallel
from modsenc.routing.langid import LanguageRouter, ProfileDetector, build_profile
from modsenc.training.configs import AddLanguageRecipe
from modsenc.training.recipe import load_recipe

WORD_GROUPS = (("< 6", lambda n: n < 6), (">= 6", lambda n: n >= 6), ("4+", lambda n: n >= 4))


def held_out(data: Path, lang: str) -> dict[str, list[str]]:
    """Held-out sentences of ``lang`` by group name."""
    groups: dict[str, list[str]] = {}
    ntrex = load_parallel(str(data / "parallel" / "ntrex.tsv"))
    if lang in ntrex.columns:
        groups["NTREX"] = list(ntrex.columns[lang])
    rows = (data / "eval-dev" / "sts" / "kardes-sts-dev.tsv").read_text(encoding="utf-8").splitlines()[1:]
    kardes = sorted({r.split("\t")[3] for r in rows if r.split("\t")[1] == lang})
    if kardes:
        groups["Kardeş STS"] = kardes
    if lang == "uz":
        to_cyrillic = orthography_for("uz").script_variants
        groups["NTREX, Cyrillic"] = [v for t in ntrex.columns["uz"] for v in to_cyrillic(t)[1:]]
    return groups


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--recipe", default="recipes/add-language-e5.yaml")
    parser.add_argument("--data", default="../shared/data")
    parser.add_argument("--languages", default="en,uz,kk,az,tr")
    parser.add_argument("--min-confidence", type=float, default=0.5)
    parser.add_argument("--json", help="write the numbers here")
    args = parser.parse_args()
    langs = args.languages.split(",")
    recipe = load_recipe(args.recipe, [], schema=AddLanguageRecipe)
    profiles = {}
    for lang in langs:
        config = AddLanguageRecipe.from_dict(recipe)
        data = load_language_data(lang, config.pivot, config.data, recipe.get("_recipe_path"))
        profiles[lang] = build_profile(lang, data.texts(), orthography_for(lang).script_variants)
    detector = ProfileDetector(profiles)
    router = LanguageRouter(detector, langs, fallback=config.pivot, min_confidence=args.min_confidence)
    print(f"calibration: {json.dumps(detector.calibration)}")
    results = {}
    print("| language | held-out set | words | sentences | routed correctly | unsure | wrong, most often |")
    print("|---|---|---|---|---|---|---|")
    for lang in langs:
        for group, texts in held_out(Path(args.data), lang).items():
            for label, keep in WORD_GROUPS:
                subset = [t for t in texts if keep(len(t.split()))]
                if not subset:
                    continue
                routes = router.route(subset)
                correct = sum(r.lang == lang for r in routes) / len(subset)
                unsure = sum(r.unsure for r in routes) / len(subset)
                wrong: dict[str, int] = {}
                for r in routes:
                    if r.lang != lang:
                        wrong[r.lang] = wrong.get(r.lang, 0) + 1
                worst = ", ".join(f"{k} {v}" for k, v in sorted(wrong.items(), key=lambda kv: -kv[1])[:2])
                results[f"{lang}|{group}|{label}"] = {"n": len(subset), "correct": correct, "unsure": unsure}
                print(
                    f"| {lang} | {group} | {label} | {len(subset)} | {100 * correct:.1f}% "
                    f"| {100 * unsure:.1f}% | {worst or '–'} |"
                )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
