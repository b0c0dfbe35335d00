"""The router over the world's languages (issue 48): ``python -m bench.router --sections wide``.

Routes every UDHR translation of unicode-org/udhr (``--udhr``: its ``data/udhr`` folder, fetched
outside the project; ``modsenc.data.udhr`` reads it) through a zoo's router exactly as
``ModularEncoder.from_pretrained`` builds it (the bundles' profiles and acceptance tests, the
background and world profiles, lid.176), and reports per translation, for sentences of 4+ words
of the report part only (the preamble and the even-numbered articles: the world profiles are
built from the odd-numbered ones, ``modsenc.routing.background``):

- a language without a bundle: the share that reaches a *module* bundle (goal <= 1%); English,
  the pivot of an e5 zoo, has no modules, so a sentence routed there gets the backbone's vectors
  and is counted apart ("to en");
- an installed language: the share that reaches its own bundle, per script (goal >= 99%).

The UDHR texts are none of the held-out sets (FLORES, SIB, Belebele, Tatoeba): one legal text, in
about 450 translations, so the same sentences in every language.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from modsenc.data.udhr import REPORT_PART, read_udhr
from modsenc.modules.bundle import Zoo

MARK_BEGIN = "<!-- wide router tables: written by bench/router.py --sections wide -->"
MARK_END = "<!-- end of wide router tables -->"
# UDHR's ISO 639-3 codes of the shipped zoo's languages (macrolanguage members included)
INSTALLED_AS = {"eng": "en", "uzn": "uz", "uzb": "uz", "kaz": "kk", "azj": "az", "kir": "ky", "uig": "ug"}
NAMED = (
    "tgk",
    "tat",
    "bak",
    "crh",
    "tuk_latn",
    "tuk_cyrl",
    "azb",
    "kaa",
    "pes_1",
    "pes_2",
    "tly",
    "kjh",
    "gag",
)


def _row(router, installed: set[str], key: str, attrs: dict, sentences: list[str]) -> dict:
    """One translation's routes, counted."""
    routes = router.route(sentences, raise_refused=False)
    bundles = [r.bundle for r in routes]
    own = INSTALLED_AS.get(attrs.get("iso639-3", ""))
    modules = installed - {"en"}
    where = Counter(b or "backbone" for b in bundles if b != own)
    return {
        "key": key,
        "name": attrs.get("n", key),
        "script": attrs.get("iso15924", "?"),
        "own": own if own in installed else None,
        "n": len(sentences),
        "right": np.mean([b == own for b in bundles]) if own in installed else None,
        "module": np.mean([b in modules for b in bundles]),
        "en": np.mean([b == "en" for b in bundles]),
        "where": ", ".join(f"{k} {v}" for k, v in where.most_common(2)) or "–",
    }


def wide_rows(router, udhr: str, min_words: int = 4) -> list[dict]:
    installed = set(router.languages)
    rows = []
    for key, translation in read_udhr(udhr).items():
        long = [s for s in translation.part(REPORT_PART) if len(s.split()) >= min_words]
        if long:
            rows.append(_row(router, installed, key, translation.attrs, long))
    return rows


def dev_lines(router, data: str) -> list[str]:
    """The same router on the dev sets of ../shared/data (NTREX, WMT19 kk, Kardeş STS dev): the
    installed languages' share to their bundle, the others' share to no module bundle."""
    from modsenc.data.orthography import get_orthography  # noqa: PLC0415
    from modsenc.data.specs import load_parallel  # noqa: PLC0415
    from modsenc.eval.sts import read_sts_tsv  # noqa: PLC0415

    ntrex = load_parallel(f"{data}/parallel/ntrex.tsv").columns
    wmt = load_parallel({"path": f"{data}/parallel/wmt-newstest.en-kk.tsv", "languages": ["kk"]}).columns[
        "kk"
    ]
    pairs = read_sts_tsv(Path(data) / "eval-dev/sts/kardes-sts-dev.tsv")
    sets = {f"NTREX {lang}": (lang, ntrex[lang]) for lang in ("en", "uz", "kk", "az")}
    sets["NTREX uz, Cyrillic"] = ("uz", [get_orthography("uz").script_variants(t)[-1] for t in ntrex["uz"]])
    sets["WMT19 kk"] = ("kk", wmt)
    for lang in ("en", "uz", "kk", "az", "ky", "ug"):
        own = {p.sentence2 for p in pairs if p.lang2 == lang} | {
            p.sentence1 for p in pairs if p.lang1 == p.lang2 == lang
        }
        sets[f"Kardeş STS {lang}"] = (lang, sorted(own))
    sets.update({f"NTREX {lang} (no bundle)": (None, ntrex[lang]) for lang in ("tr", "ru", "de", "fr", "es")})
    lines = ["| set | < 4 words | 4+ words | elsewhere, most often |", "|---|---|---|---|"]
    modules = set(router.languages) - {"en"}
    for name, (lang, texts) in sets.items():
        routes = router.route(texts, raise_refused=False)
        cells, where = [], Counter()
        for short in (True, False):
            idx = [i for i, t in enumerate(texts) if (len(t.split()) < 4) == short]
            ok = [routes[i].bundle == lang if lang else routes[i].bundle not in modules for i in idx]
            where.update(routes[i].bundle or "backbone" for i, good in zip(idx, ok) if not good)
            cells.append(f"{_pct(sum(ok) / len(ok))} of {len(ok)}" if ok else "–")
        shown = ", ".join(f"{k} {v}" for k, v in where.most_common(2)) or "–"
        lines.append(f"| {name} | {cells[0]} | {cells[1]} | {shown} |")
    return lines


def treebank_sentences(ud: str) -> dict[str, tuple[str, list[str]]]:
    """``{treebank: (language, sentences)}`` from a folder of Universal Dependencies treebanks
    (``UD_<Language>-<Name>`` folders, as cloned from github.com/UniversalDependencies): the
    ``# text =`` line of every sentence of every .conllu file, the language from the files' own
    prefix (``ug_udt-ud-test.conllu``: ug, ISO 639-1 where one exists)."""
    out: dict[str, tuple[str, list[str]]] = {}
    for folder in sorted(Path(ud).glob("UD_*")):
        files = sorted(folder.glob("*.conllu"))
        if not files:
            continue
        sentences = [
            line.removeprefix("# text = ").strip()
            for path in files
            for line in path.read_text(encoding="utf-8").splitlines()
            if line.startswith("# text = ")
        ]
        out[folder.name.removeprefix("UD_")] = (files[0].name.split("_")[0], sentences)
    return out


def treebank_lines(router, ud: str, min_words: int = 4) -> list[str]:
    """The router on another domain than UDHR's (``--ud``: UD treebanks, fiction, news, grammar
    examples): an installed language's share to its bundle, per script; another language's share
    to a module bundle. The odd-numbered sentences of each treebank only (in file order): the
    even-numbered ones were read to look at failures (a letter-set rule was tried on them, and
    dropped: it turned away Kyrgyz written with ӊ for ң, and English with é). No profile is built
    from these files."""
    from modsenc.data.scripts import detect_script  # noqa: PLC0415

    modules = set(router.languages) - {"en"}
    lines = [
        "| treebank | language | script | sentences (4+ words) | to its bundle | to a module bundle | "
        "elsewhere, most often |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, (lang, sentences) in treebank_sentences(ud).items():
        installed = lang in router.languages
        long = [s for i, s in enumerate(sentences) if i % 2 == 1 and len(s.split()) >= min_words]
        scripts = [detect_script([s]) for s in long]
        for script in sorted(set(scripts)):
            texts = [s for s, sc in zip(long, scripts) if sc == script]
            bundles = [r.bundle for r in router.route(texts, raise_refused=False)]
            where = Counter(b or "backbone" for b in bundles if b != lang)
            own = _pct(np.mean([b == lang for b in bundles])) if installed else "–"
            module = _pct(np.mean([b in modules and b != lang for b in bundles]))
            shown = ", ".join(f"{k} {v}" for k, v in where.most_common(2)) or "–"
            lines.append(f"| {name} | {lang} | {script} | {len(texts)} | {own} | {module} | {shown} |")
    return lines


def xwmt_sentences(folder: str) -> dict[str, list[str]]:
    """``{language: sentences}`` from X-WMT's test folder (``--xwmt``: turkic-interlingua/til-mt's
    ``xwmt/test``, MIT, fetched outside the project): ``<pair>/<pair>.<language>`` files, one
    sentence a line, the same news sentences (WMT's) in each pair a language is in, so each
    language's lines are read once, in file order, without repeats."""
    out: dict[str, dict[str, None]] = {}
    for path in sorted(Path(folder).glob("*/*.*")):
        lines = out.setdefault(path.suffix.lstrip("."), {})
        lines.update(dict.fromkeys(t for t in path.read_text(encoding="utf-8").splitlines() if t.strip()))
    return {lang: list(lines) for lang, lines in sorted(out.items())}


def write_xwmt_profile_text(folder: str, lang: str, output: str) -> int:
    """Write ``lang``'s odd-numbered X-WMT lines, the half ``xwmt_lines`` does not report on, to
    ``output`` (for ``modsenc.routing.background --extra``: Karakalpak's and Bashkir's world
    profiles, which UDHR cannot give; ``make background``). Returns the number of lines."""
    sentences = xwmt_sentences(folder).get(lang)
    if not sentences:
        raise ValueError(f"{folder}: no X-WMT file ends in .{lang}")
    # positions 1, 3, 5, ... of the language's lines without repeats (xwmt_sentences), as
    # xwmt_lines reports on positions 0, 2, 4, ...
    half = [s for i, s in enumerate(sentences) if i % 2 == 1]
    Path(output).write_text("".join(f"{s}\n" for s in half), encoding="utf-8")
    return len(half)


def xwmt_lines(router, folder: str, min_words: int = 4) -> list[str]:
    """The router on news (X-WMT, Turkic languages beside en and ru): an installed language's
    share to its bundle; another language's share to a module bundle. The even-numbered lines
    only: the odd ones were read to look at failures (2026-12-07), and Karakalpak's and Bashkir's,
    which have no UDHR translation, are their world profiles' text (``write_xwmt_profile_text``)."""
    modules = set(router.languages) - {"en"}
    lines = [
        "| language | installed | sentences (4+ words) | to its bundle | to a module bundle | "
        "elsewhere, most often |",
        "|---|---|---|---|---|---|",
    ]
    for lang, sentences in xwmt_sentences(folder).items():
        texts = [s for i, s in enumerate(sentences) if i % 2 == 0 and len(s.split()) >= min_words]
        if not texts:
            continue
        bundles = [r.bundle for r in router.route(texts, raise_refused=False)]
        installed = lang in router.languages
        own = _pct(np.mean([b == lang for b in bundles])) if installed else "–"
        module = _pct(np.mean([b in modules and b != lang for b in bundles]))
        where = Counter(b or "backbone" for b in bundles if b != lang)
        shown = ", ".join(f"{k} {v}" for k, v in where.most_common(3)) or "–"
        lines.append(
            f"| {lang} | {'yes' if installed else 'no'} | {len(texts)} | {own} | {module} | {shown} |"
        )
    return lines


# translatewiki codes of the languages issue 48 names, always listed
NAMED_CODES = ("tg-cyrl", "tg-latn", "tt-cyrl", "ba", "crh-latn", "tk", "azb", "kaa", "fa", "tly", "krc")
# lid.176's probability from which a line of another language's translatewiki file is taken for
# left-over English (the source language there) and kept out of its world profile: chosen on a
# selection split of the profile part (docs/results/router.md, "Software messages")
ENGLISH_RESIDUE = 0.5


def _translatewiki_language(code: str) -> str | None:
    """The profile a translatewiki code feeds: its language, script and region variants merged
    (tg-cyrl and tg-latn: tg; sr-el: sr); None for other subtags (map-bms and roa-tara name
    families, be-tarask an orthography of a language with a file of its own)."""
    lang, _, subtag = code.partition("-")
    return lang if not subtag or len(subtag) in (2, 4) else None


def _handled_scripts(lang: str) -> set[str]:
    """The scripts (ISO 15924) a training-file language is read in: its shipped background
    profile's (built from the training files, which translatewiki's text does not change) and the
    ones its orthography converts (Uyghur's Arabic and Latin)."""
    from modsenc.data.orthography import orthography_for  # noqa: PLC0415
    from modsenc.data.scripts import script_code  # noqa: PLC0415
    from modsenc.routing.background import load_background  # noqa: PLC0415

    profile = load_background().get(lang)
    labels = profile.scripts if profile is not None else {}
    return set(orthography_for(lang).scripts) | {script_code(label) for label in labels}


def _translatewiki_profile_lines(read: dict[str, list[str]]) -> dict[str, list[str]]:
    """Each world profile's lines: the profile part of its codes (variants merged), none that is
    also a report line of any code (be and be-tarask share messages); a training-file language
    keeps its profile, and its lines in a script that neither that profile nor its orthography
    reads make one of their own, named LANG-Script (Kazakh in Arabic letters, which else reads as
    Uyghur: "kk-Arab", routed to the backbone)."""
    from modsenc.data.readers import is_language_code  # noqa: PLC0415
    from modsenc.data.scripts import NO_SCRIPT, detect_script  # noqa: PLC0415
    from modsenc.data.translatewiki import PROFILE_PART, REPORT_PART, part  # noqa: PLC0415
    from modsenc.routing.background import SOURCES  # noqa: PLC0415

    reported = {line for sentences in read.values() for line in part(sentences, REPORT_PART)}
    merged: dict[str, list[str]] = {}
    for code, sentences in read.items():
        lang = _translatewiki_language(code)
        if lang is None or not is_language_code(lang):
            continue
        lines = [line for line in part(sentences, PROFILE_PART) if line not in reported]
        if lang not in SOURCES:
            merged.setdefault(lang, []).extend(lines)
            continue
        handled = _handled_scripts(lang)
        for line in lines:
            script = detect_script([line])
            if script not in handled and script != NO_SCRIPT:
                merged.setdefault(f"{lang}-{script}", []).append(line)
    return merged


def write_translatewiki_profile_text(folders: list[str], output: str) -> dict[str, int]:
    """Write each world profile's translatewiki lines (``_translatewiki_profile_lines``) to
    ``output``/LANG.txt, for ``modsenc.routing.background --extra-dir``, leaving out lines lid.176
    calls English at ``ENGLISH_RESIDUE`` or more (translatewiki's source language: fragments left
    untranslated, and near-English varieties' English-like lines, which else teach Scots' profile
    English). Returns ``{language: lines}`` of the files written (``WORLD_MIN_SENTENCES`` or more)."""
    from modsenc.data.translatewiki import read_translatewiki  # noqa: PLC0415
    from modsenc.routing.background import WORLD_MIN_SENTENCES  # noqa: PLC0415
    from modsenc.routing.gate import LanguageIdGate  # noqa: PLC0415

    if not folders:
        raise ValueError("no translatewiki folder given (checkouts of MediaWiki extensions)")
    merged = _translatewiki_profile_lines(read_translatewiki(folders))
    gate, written = LanguageIdGate(), {}
    Path(output).mkdir(parents=True, exist_ok=True)
    for lang, lines in sorted(merged.items()):
        kept = [
            line
            for line, top in zip(lines, gate.predict(lines))
            if not (top and top[0][0] == "en" and top[0][1] >= ENGLISH_RESIDUE)
        ]
        if len(kept) >= WORLD_MIN_SENTENCES:
            Path(output, f"{lang}.txt").write_text("".join(f"{t}\n" for t in kept), encoding="utf-8")
            written[lang] = len(kept)
    if not written:
        raise ValueError(f"{', '.join(folders)}: no language has {WORLD_MIN_SENTENCES} profile lines")
    return written


def translatewiki_lines(router, folders: list[str], min_lines: int = 20) -> list[str]:
    """The router on software messages (``--translatewiki``: checkouts of MediaWiki extensions,
    ``modsenc.data.translatewiki``), the report part (even-numbered lines) of every code with
    ``min_lines`` or more: an installed language's share to its bundle, per code (kk-latn, kk-arab,
    ug-arab); another's share to a module bundle."""
    from modsenc.data.translatewiki import REPORT_PART, part, read_translatewiki  # noqa: PLC0415

    modules = set(router.languages) - {"en"}
    rows = []
    for code, sentences in read_translatewiki(folders).items():
        texts = part(sentences, REPORT_PART)
        if len(texts) < min_lines:
            continue
        lang = _translatewiki_language(code) or code
        own = lang if lang in router.languages else None
        bundles = [r.bundle for r in router.route(texts, raise_refused=False)]
        where = Counter(b or "backbone" for b in bundles if b != own)
        rows.append(
            {
                "code": code,
                "own": own,
                "n": len(texts),
                "right": np.mean([b == own for b in bundles]) if own else None,
                "module": np.mean([b in modules and b != own for b in bundles]),
                "where": ", ".join(f"{k} {v}" for k, v in where.most_common(3)) or "–",
            }
        )
    others = [r for r in rows if r["own"] is None]
    shares = np.array([r["module"] for r in others] or [0.0])
    lines = [
        f"Without a bundle: {len(others)} codes, {sum(r['n'] for r in others)} sentences; to a module "
        f"bundle max {_pct(shares.max())}, mean {_pct(shares.mean())}, {int((shares > 0.01).sum())} over "
        "1% (listed, with the languages the issue names), the rest at most 1%.",
        "",
        "| code | installed | sentences (4+ words) | to its bundle | to a module bundle | "
        "elsewhere, most often |",
        "|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: (r["own"] is None, -r["module"], r["code"])):
        if r["own"] is None and r["module"] <= 0.01 and r["code"] not in NAMED_CODES:
            continue
        own = _pct(r["right"]) if r["own"] else "–"
        lines.append(
            f"| {r['code']} | {r['own'] or 'no'} | {r['n']} | {own} | {_pct(r['module'])} | {r['where']} |"
        )
    return lines


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


OTHER_HEADER = [
    "| translation | script | sentences | to a module bundle | to en (no modules) | elsewhere, most often |",
    "|---|---|---|---|---|---|",
]


def _other_row(r: dict) -> str:
    cells = [f"{r['name']} ({r['key']})", r["script"], r["n"], _pct(r["module"]), _pct(r["en"]), r["where"]]
    return "| " + " | ".join(map(str, cells)) + " |"


def _own_row(r: dict) -> str:
    cells = [f"{r['name']} ({r['key']})", r["script"], r["own"], r["n"], _pct(r["right"]), r["where"]]
    return "| " + " | ".join(map(str, cells)) + " |"


def _summary(rows: list[dict], mine: list[dict], others: list[dict]) -> list[str]:
    shares = np.array([r["module"] for r in others])
    without = (
        f"max {_pct(shares.max())}, mean {_pct(shares.mean())}, median {_pct(float(np.median(shares)))}; "
        f"{int((shares > 0.01).sum())} over 1%, {int((shares == 0).sum())} at 0"
    )
    own = "; ".join(f"{r['key']} {_pct(r['right'])}" for r in mine)
    return [
        "| | translations | sentences | goal | result |",
        "|---|---|---|---|---|",
        f"| without a bundle: to a module bundle | {len(others)} | {sum(r['n'] for r in others)} | "
        f"max <= 1% | {without} |",
        f"| installed: to its own bundle | {len(mine)} | {sum(r['n'] for r in mine)} | >= 99% | {own} |",
    ]


def _other_domains(
    router, data: str | None, ud: str | None, xwmt: str | None = None, translatewiki: list[str] | None = None
) -> list[str]:
    """The dev sets' block (``data``), the UD treebanks' (``ud``), X-WMT's news (``xwmt``) and
    translatewiki's software messages (``translatewiki``), each when given."""
    return [
        *(
            [
                "The same router on the dev sets (installed: to its bundle; no bundle: to no module bundle):",
                "",
            ]
            + dev_lines(router, data)
            + [""]
            if data
            else []
        ),
        *(
            [
                "Another domain, UD treebanks (`--ud`: folders cloned from github.com/"
                "UniversalDependencies; the odd-numbered sentences of each, which neither the "
                "profiles nor any choice read; kk's and uz's treebanks are training files and are "
                "left out):",
                "",
            ]
            + treebank_lines(router, ud)
            + [""]
            if ud
            else []
        ),
        *(
            [
                "News, X-WMT (`--xwmt`: turkic-interlingua/til-mt's xwmt/test, MIT; the even-numbered "
                "lines of each language; Karakalpak is in Cyrillic there):",
                "",
            ]
            + xwmt_lines(router, xwmt)
            + [""]
            if xwmt
            else []
        ),
        *(
            [
                "Software messages, translatewiki.net's translations in MediaWiki extensions "
                "(`--translatewiki`: their i18n/*.json; the even-numbered lines of each code, 4+ words; "
                "the odd-numbered ones are world profile text):",
                "",
            ]
            + translatewiki_lines(router, translatewiki)
            + [""]
            if translatewiki
            else []
        ),
    ]


def wide_lines(
    zoo: str,
    udhr: str,
    command: str,
    data: str | None = None,
    background: str | None = None,
    ud: str | None = None,
    xwmt: str | None = None,
    translatewiki: list[str] | None = None,
) -> list[str]:
    # one router for every block (building it reads the world profiles: seconds); imported here so
    # that make background's use of write_xwmt_profile_text loads no model code
    from modsenc.encoder.loading import build_router  # noqa: PLC0415

    router = build_router(Zoo(zoo), None, None, 0.5, "fallback", background=background)
    rows = wide_rows(router, udhr)
    mine = sorted((r for r in rows if r["own"]), key=lambda r: r["key"])
    others = sorted((r for r in rows if not r["own"]), key=lambda r: (-r["module"], r["key"]))
    languages = {r["key"].split("_")[0] for r in others}
    named = {r["key"]: r for r in others if r["key"] in NAMED}
    missing = [k for k in NAMED if k not in named]
    return [
        MARK_BEGIN,
        "## Over the world's languages: UDHR translations",
        "",
        f"Written by `{command}`: the shipped zoo's router (profiles, acceptance tests, background "
        "and world profiles, lid.176) on every UDHR translation of unicode-org/udhr with 4+-word "
        "sentences in the report part (the preamble and the even-numbered articles; the world "
        f"profiles are built from the odd-numbered ones): {len(rows)} translations, "
        f"{len(languages)} languages without a bundle.",
        "",
        *_summary(rows, mine, others),
        "",
        "Installed languages, per script:",
        "",
        "| translation | script | language | sentences | to its bundle | elsewhere, most often |",
        "|---|---|---|---|---|---|",
        *map(_own_row, mine),
        "",
        "Languages the issue names ("
        + (f"not in UDHR: {', '.join(missing)}" if missing else "all found")
        + "):",
        "",
        *OTHER_HEADER,
        *(_other_row(named[k]) for k in NAMED if k in named),
        "",
        *_other_domains(router, data, ud, xwmt, translatewiki),
        "Every translation without a bundle, worst first:",
        "",
        *OTHER_HEADER,
        *map(_other_row, others),
        MARK_END,
    ]
