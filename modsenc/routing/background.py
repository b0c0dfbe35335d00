"""Background language profiles: the languages a zoo may meet without holding them.

A router that knows only the installed languages must call every sentence one of them (Russian
went to Uzbek, Kazakh to Uzbek, French to English). Shipped with the package, these profiles give
the router a name for the other languages modsenc has text for; a zoo is never rebuilt for them,
and an installed language always uses its own bundle's profile instead of its background one.

They are built by ``python -m modsenc.routing.background --data ../shared/data`` (``make
background``) from the training files listed in ``SOURCES`` (never the held-out or dev files),
as ``build_profile`` builds a bundle's profile but smaller (``TOP_K`` n-grams) and without a
held-out sample (no sentence of the sources is stored, only n-gram statistics). The manifest
beside them records the sources and the profiles' sha256, which loading checks.

Beside them, the **world profiles**: one per language of the UDHR translations (unicode-org/udhr,
``--udhr``: its ``data/udhr`` folder, fetched outside the project), built from the odd-numbered
articles only (``modsenc.data.udhr.PROFILE_PART``; the wide router benchmark reports on the rest).
A language no profile describes lands on its nearest profile, and before them that was often an
installed one (Talysh on az, Khakas on kk, Tajik on uz: issue 48). Each holds a few thousand
characters of one legal text, so they are small: they compete in the router but do not set the
shared price of an unseen n-gram (``ScoringTable``), and a language that has a profile from the
training files above keeps that one.

A close relative of an installed language that UDHR lacks gets one the same way from a text file
fetched outside the project (``--extra LANG=FILE``, one sentence a line; its name, line count and
sha256 go into the manifest): Karakalpak, with no profile, sent 27% of X-WMT's news to the Kazakh
bundle (docs/results/router.md). Such a file may hold far more text than a UDHR translation
(Bashkir's: 499 news sentences, against Tatar's 50 UDHR ones), and a larger profile wins more of
a close neighbour's text: some Tatar is now named Bashkir (still routed to the backbone).

``--extra-dir DIR`` adds a folder of such files, one per language, to whatever text the language
has: translatewiki's software messages (``bench.router_wide.write_translatewiki_profile_text``)
give about 240 languages a second domain beside UDHR's one legal text, whose profiles alone let
39% of Talysh software messages reach the az bundle (docs/results/router.md, "Software
messages"); and a script a training-file language is not read in gets a profile named for both
(``kk-Arab``: Kazakh in Arabic letters, which Uyghur's Arabic reading otherwise took).
"""

from __future__ import annotations

import argparse
import functools
import gzip
import hashlib
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from modsenc.data.orthography import orthography_for
from modsenc.data.readers import is_language_code, iter_lines
from modsenc.data.scripts import detect_script, script_label
from modsenc.data.specs import load_parallel
from modsenc.data.udhr import PROFILE_PART, read_udhr
from modsenc.routing.langid import CharNgramProfile, build_profile
from modsenc.utils.io import atomic_write_bytes, atomic_write_json

BACKGROUND_DIR = Path(__file__).parent / "background"
PROFILES_FILE = "profiles.json.gz"
MANIFEST_FILE = "manifest.json"
FORMAT = "modsenc-background/1"
# Per order about TOP_K / 5 n-grams: 30,000 keeps the open-set error under 1% on short text
# (docs/results/router.md) at about 0.2 MB per language, compressed.
TOP_K = 30000
# Training text per language: a file and its column (None: one sentence per line). The held-out
# sets (NTREX, PUD, WMT en-kk, the eval-dev files) and the Tatoeba files of de, fr, es and ru
# (conversational held-out text for the router benchmark) are left out on purpose.
SOURCES: dict[str, list[tuple[str, str | None]]] = {
    "en": [("parallel/stsb-mt.train.tsv", "en")],
    "de": [("parallel/stsb-mt.train.tsv", "de"), ("parallel/multi30k.tsv", "de")],
    "fr": [("parallel/stsb-mt.train.tsv", "fr"), ("parallel/multi30k.tsv", "fr")],
    **{
        lang: [("parallel/stsb-mt.train.tsv", lang)]
        for lang in ("es", "it", "ja", "nl", "pl", "pt", "ru", "zh")
    },
    "uz": [("mono/uz.ud-ut.txt", None), ("mono/uz.reviews.txt", None), ("parallel/kardes-xnli.tsv", "uz")],
    "kk": [("mono/kk.ud-ktb.txt", None), ("mono/kk.kaznerd.txt", None), ("parallel/kardes-xnli.tsv", "kk")],
    "az": [("parallel/kardes-xnli.tsv", "az"), ("parallel/tatoeba-challenge.en-az.tsv", "az")],
    "tr": [("parallel/wmt-newstest.en-tr.tsv", "tr"), ("parallel/tatoeba-challenge.en-tr.tsv", "tr")],
    "ky": [("parallel/kardes-xnli.tsv", "ky")],
    "ug": [("parallel/kardes-xnli.tsv", "ug")],
}


def _texts(data: Path, lang: str) -> list[str]:
    texts: list[str] = []
    for name, column in SOURCES[lang]:
        path = data / name
        if column is None:
            texts.extend(line for _, line in iter_lines(path, name=str(path)))
        else:
            texts.extend(load_parallel({"path": str(path), "languages": [column]}).columns[column])
    return texts


# A world profile needs this many sentences of its translations' profile part (the ones with only
# a preamble or a few articles are left out).
WORLD_MIN_SENTENCES = 10
WORLD_PART = (
    "unicode-org/udhr data/udhr, odd-numbered articles (modsenc.data.udhr.PROFILE_PART); "
    "--extra and --extra-dir files as listed"
)


def _world_texts(udhr: str | Path) -> dict[str, tuple[list[str], list[list[str]]]]:
    """``{language: (its UDHR keys, the profile part of their sentences per translation)}`` for
    every language of the UDHR folder that ``SOURCES`` lacks; translations of one language (Turkmen
    in Latin and in Cyrillic, Farsi and Dari) make one profile, a sub-profile per script."""
    grouped: dict[str, tuple[list[str], list[list[str]]]] = {}
    for key, translation in read_udhr(udhr).items():
        lang = translation.language
        if lang in SOURCES or not is_language_code(lang):
            continue
        keys, groups = grouped.setdefault(lang, ([], []))
        keys.append(key)
        groups.append(translation.part(PROFILE_PART))
    return {
        lang: (keys, groups)
        for lang, (keys, groups) in sorted(grouped.items())
        if sum(map(len, groups)) >= WORLD_MIN_SENTENCES
    }


def _extra_texts(
    extra: Mapping[str, str | Path], flag: str = "--extra"
) -> dict[str, tuple[list[str], list[str]]]:
    """``{language: ([its file's name, lines, sha256], its lines)}`` of the ``--extra`` files (or a
    ``--extra-dir`` folder's: ``flag`` names the option in errors, and the folder goes into the
    name), each checked (a language code, a readable file, at least ``WORLD_MIN_SENTENCES`` lines)
    before any profile is built."""
    out: dict[str, tuple[list[str], list[str]]] = {}
    for lang, path in extra.items():
        where = (
            f"{flag} {lang}={path}" if flag == "--extra" else f"{flag} {Path(path).parent}: {Path(path).name}"
        )
        if not is_language_code(lang):
            raise ValueError(f"{where}: {lang!r} is not a language code")
        if lang in SOURCES:
            raise ValueError(f"{where}: {lang} already has a profile from the training files")
        if not Path(path).is_file():
            raise FileNotFoundError(f"{where}: no such file")
        blob = Path(path).read_bytes()
        texts = [line for _, line in iter_lines(Path(path), name=str(path)) if line.strip()]
        if len(texts) < WORLD_MIN_SENTENCES:
            raise ValueError(f"{where}: {len(texts)} lines, a profile needs {WORLD_MIN_SENTENCES}")
        name = Path(path).name if flag == "--extra" else f"{Path(path).parent.name}/{Path(path).name}"
        out[lang] = ([f"{name}, {len(texts)} lines, sha256 {_sha256(blob)}"], texts)
    return out


def _folder_files(folder: str | Path) -> dict[str, Path]:
    """``{language: file}`` of a folder of ``LANG.txt`` files (``--extra-dir``), checked as ``--extra``
    files are; anything else in it is an error, named."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"--extra-dir {folder}: no such folder")
    files = {}
    for path in sorted(folder.iterdir()):
        if path.suffix != ".txt" or not is_language_code(path.stem):
            raise ValueError(f"--extra-dir {folder}: {path.name} is not LANG.txt with a language code")
        files[path.stem] = path
    return files


def _profile_entry(profile: CharNgramProfile) -> dict:
    return {
        name: {
            "unseen": {str(n): round(v, 4) for n, v in unseen.items()},
            "logp": {gram: round(v, 4) for gram, v in logp.items()},
        }
        for name, (logp, unseen) in profile.scripts.items()
    }


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _world_sources(
    udhr: str | Path | None, extra: Mapping[str, str | Path], extra_dirs: Sequence[str | Path]
) -> dict[str, tuple[list[str], list[list[str]]]]:
    """``{language: (its sources' names, its text per source)}`` of the world profiles, sorted
    (the manifest's bytes do not depend on the arguments' order)."""
    world = _world_texts(udhr) if udhr is not None else {}
    sources = [_extra_texts(extra)] + [_extra_texts(_folder_files(d), "--extra-dir") for d in extra_dirs]
    for lang, (keys, texts) in (item for source in sources for item in source.items()):
        names, groups = world.setdefault(lang, ([], []))
        names.extend(keys)
        groups.append(texts)
    return dict(sorted(world.items()))


def build_background(
    data: str | Path,
    udhr: str | Path | None,
    output: str | Path = BACKGROUND_DIR,
    top_k: int = TOP_K,
    extra: Mapping[str, str | Path] | None = None,
    extra_dirs: Sequence[str | Path] = (),
) -> Path:
    """Build every language of ``SOURCES`` from ``data`` (the shared data folder), and the world
    profiles from ``udhr`` (None: none), ``extra`` (``{language: text file}``) and ``extra_dirs``
    (folders of ``LANG.txt`` files), into ``output``: a language with text from several of them
    gets all of it, one profile."""
    data, output = Path(data), Path(output)
    missing = [
        str(data / name) for sources in SOURCES.values() for name, _ in sources if not (data / name).is_file()
    ]
    if missing:
        raise FileNotFoundError(f"background sources not found: {', '.join(sorted(set(missing)))}")
    world = _world_sources(udhr, extra or {}, extra_dirs)  # read first: a bad file fails fast
    profiles, counts = {}, {}
    for lang in SOURCES:
        texts = _texts(data, lang)
        # sample_size=0: no sentence of the sources is kept in the package, only n-gram statistics
        profile = build_profile(
            lang, texts, orthography_for(lang).script_variants, sample_size=0, top_k=top_k
        )
        profiles[lang] = _profile_entry(profile)
        counts[lang] = len(texts)
    for lang, (_, groups) in world.items():
        texts = [text for group in groups for text in group]
        # each source's own script stays, whatever its share: Turkmen's Cyrillic UDHR translation
        # beside much Latin software text (the share rule is for stray lines in one file)
        keep = {script_label(detect_script(group)) for group in groups}
        profiles[lang] = _profile_entry(
            build_profile(lang, texts, sample_size=0, top_k=top_k, keep_scripts=keep)
        )
        counts[lang] = len(texts)
    payload = json.dumps({"format": FORMAT, "profiles": profiles}, ensure_ascii=False, sort_keys=True)
    blob = gzip.compress(payload.encode("utf-8"), mtime=0)
    output.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(output / PROFILES_FILE, blob)
    atomic_write_json(
        output / MANIFEST_FILE,
        {
            "format": FORMAT,
            "file": PROFILES_FILE,
            "sha256": _sha256(blob),
            "top_k": top_k,
            "languages": sorted(profiles),
            "sentences": counts,
            "sources": {
                lang: [f"{name}:{column or 'lines'}" for name, column in src] for lang, src in SOURCES.items()
            },
            # the world profiles: each language's UDHR translations (their keys; profile part only)
            # and --extra and --extra-dir files (name, lines, sha256)
            "world": {lang: keys for lang, (keys, _) in world.items()},
            "world_part": WORLD_PART,
        },
    )
    return output / PROFILES_FILE


def world_languages(folder: str | Path = BACKGROUND_DIR) -> frozenset[str]:
    """The languages whose background profile is a world profile (from UDHR, ``--extra`` or
    ``--extra-dir`` files), by the manifest
    ``load_background`` checks the profiles against (none when it lists none)."""
    return _world_languages(str(Path(folder).resolve()))


@functools.lru_cache(maxsize=4)
def _world_languages(folder: str) -> frozenset[str]:
    try:
        manifest = json.loads((Path(folder) / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ValueError(
            f"{folder}: background language profiles unreadable ({err}); reinstall modsenc"
        ) from err
    return frozenset(manifest.get("world", {}))


def load_background(folder: str | Path = BACKGROUND_DIR) -> dict[str, CharNgramProfile]:
    """The background profiles in ``folder``, checked against their manifest's sha256 (read once
    per folder and process)."""
    return _load_background(str(Path(folder).resolve()))


@functools.lru_cache(maxsize=4)
def _load_background(name: str) -> dict[str, CharNgramProfile]:
    folder = Path(name)
    manifest_path = folder / MANIFEST_FILE
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        blob = (folder / manifest["file"]).read_bytes()
    except (OSError, ValueError, KeyError) as err:
        raise ValueError(
            f"{folder}: background language profiles unreadable ({err}); reinstall modsenc"
        ) from err
    if manifest.get("format") != FORMAT or _sha256(blob) != manifest.get("sha256"):
        raise ValueError(
            f"{folder / manifest['file']}: background language profiles do not match their manifest "
            "(damaged copy); reinstall modsenc or rebuild them with `make background`"
        )
    data = json.loads(gzip.decompress(blob))
    return {
        lang: CharNgramProfile(
            lang,
            {name: (s["logp"], {int(n): v for n, v in s["unseen"].items()}) for name, s in scripts.items()},
        )
        for lang, scripts in data["profiles"].items()
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", default="../shared/data", help="the shared data folder")
    world = parser.add_mutually_exclusive_group(required=True)
    world.add_argument(
        "--udhr",
        help="unicode-org/udhr's data/udhr folder (git clone https://github.com/unicode-org/udhr): the "
        "world profiles are built from its odd-numbered articles",
    )
    world.add_argument("--no-world", action="store_true", help="build no world profiles")
    parser.add_argument(
        "--extra",
        action="append",
        default=[],
        metavar="LANG=FILE",
        help="world profile text for LANG from FILE (one sentence a line), for a language UDHR lacks "
        "or beside UDHR's (repeatable)",
    )
    parser.add_argument(
        "--extra-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="world profile text for many languages: DIR's LANG.txt files (one sentence a line), "
        "added to UDHR's and --extra's text for the same language (repeatable)",
    )
    parser.add_argument("--output", default=str(BACKGROUND_DIR))
    parser.add_argument("--top-k", type=int, default=TOP_K)
    args = parser.parse_args(argv)
    extra: dict[str, str] = {}
    for item in args.extra:
        lang, sep, file = item.partition("=")
        if not sep or not lang or not file:
            parser.error(f"--extra {item}: give LANG=FILE")
        if lang in extra:
            parser.error(f"--extra {lang} given twice")
        extra[lang] = file
    path = build_background(
        args.data, None if args.no_world else args.udhr, args.output, args.top_k, extra, args.extra_dir
    )
    print(f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB)", file=sys.stderr)


if __name__ == "__main__":
    main()
