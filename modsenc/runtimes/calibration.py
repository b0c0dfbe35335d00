"""The sentences an int8 graph is calibrated on: text of the graph's own language.

Static int8 (NNCF, ``runtimes/int8.py``) fixes each activation's scale from the values it takes on
real input, so the sentences must look like what the language's graph will see. In order:

1. the sentences the user passes (``calibration=`` / ``--calibration FILE``), for every language;
2. the bundle's own ``calibration.txt``, which add-language writes from the text it trained on
   (an even sample, hash-checked with the bundle's other files);
3. the packaged demo corpus (``modsenc/data/demo``, written for modsenc, CC0) where it has the
   language (en de fr es ru tr uz kk): bundles made before (2) existed, the shipped zoo's included;
4. otherwise the demo corpus's English, with a warning (docs/benchmarks.md measures the cost).

The backbone's own graph (English, and text in a language the zoo does not hold) is calibrated on
every demo column, since it serves them all.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence

from modsenc.data.demo import demo_path
from modsenc.data.readers import read_parallel_tsv
from modsenc.modules.bundle import CALIBRATION_FILE, Zoo, verify_bundle_file

log = logging.getLogger(__name__)

# NNCF's own default subset size for static quantisation: more moved no scale measurably.
CALIBRATION_SENTENCES = 300


def even_sample(texts: Sequence[str], count: int = CALIBRATION_SENTENCES) -> list[str]:
    """Up to ``count`` distinct non-empty texts spread evenly over ``texts`` (a file's first
    lines are often one source or one domain), in their order."""
    distinct = list(dict.fromkeys(t.strip() for t in texts if t.strip()))
    if len(distinct) <= count:
        return distinct
    step = len(distinct) / count
    return [distinct[int(i * step)] for i in range(count)]


def _demo_columns() -> dict[str, list[str]]:
    return read_parallel_tsv(demo_path("parallel.tsv")).columns


def calibration_sentences(
    zoo: Zoo, lang: str | None, has_modules: bool, given: Sequence[str] | None, verify: bool = True
) -> tuple[list[str], str]:
    """The sentences ``lang``'s graph is calibrated on and where they came from (for the log and
    the graph's cache key); ``has_modules`` False: the backbone's own graph."""
    if given:
        return even_sample(given), "given"
    if has_modules and lang is not None:
        bundle = zoo.bundle_dir(lang)
        if (bundle / CALIBRATION_FILE).is_file():
            path = bundle / CALIBRATION_FILE
            if verify:
                path = verify_bundle_file(bundle, zoo.read_manifest(lang), CALIBRATION_FILE)
            return even_sample(path.read_text(encoding="utf-8").splitlines()), f"{lang} bundle"
    columns = _demo_columns()
    if not has_modules:
        mixed = [text for row in zip(*columns.values()) for text in row]
        return even_sample(mixed), "demo corpus, all languages"
    if lang in columns:
        return even_sample(columns[lang]), f"demo corpus, {lang}"
    log.warning(
        "%s: no calibration sentences in its bundle or the demo corpus; calibrating its int8 graph "
        "on English (pass calibration= / --calibration FILE with a few hundred %s sentences)",
        lang,
        lang,
    )
    return even_sample(columns["en"]), "demo corpus, en (no text of the language)"


def sentences_digest(texts: Sequence[str]) -> str:
    """sha256 of the calibration sentences, part of an int8 graph's cache key."""
    return hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()
