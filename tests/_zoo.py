"""Helpers shared by the module, routing and eval tests: a fast add-language recipe, held-out text."""

from __future__ import annotations

from pathlib import Path

from modsenc.training.configs import AddLanguageRecipe
from modsenc.training.recipe import load_recipe


def fast_recipe(**extra: str) -> AddLanguageRecipe:
    """The default add-language recipe, cut down to a few steps per stage."""
    overrides = {
        "vocab.vocab_size": "300",
        "vocab.fasttext_min_count": "1",
        "la.max_steps": "4",
        "la.batch_size": "8",
        "se.epochs": "null",
        "se.max_steps": "3",
        "se.batch_size": "8",
        "cla.epochs": "null",
        "cla.max_steps": "4",
        "cla.batch_size": "8",
        "training.checkpoint_every": "2",
    } | extra
    return load_recipe("add-language", [f"{k}={v}" for k, v in overrides.items()], schema=AddLanguageRecipe)


# Sentences written for these tests (not in the demo corpus the bundles were built from).
HELD_OUT = {
    "en": ["The library closes early on Sundays.", "We are planning a trip to the mountains next week."],
    "uz": [
        "Kutubxona yakshanba kunlari erta yopiladi.",
        "Keyingi hafta togʻlarga sayohat qilishni rejalashtiryapmiz.",
    ],
    "kk": ["Кітапхана жексенбі күндері ерте жабылады.", "Келесі аптада тауға саяхат жоспарлап жатырмыз."],
    "de": ["Die Bibliothek schließt sonntags früh.", "Wir planen nächste Woche eine Reise in die Berge."],
}


def write_sts(path: Path, rows: list[tuple]) -> Path:
    """An STS TSV (lang1, lang2, sentence1, sentence2, score) with these rows."""
    path.write_text(
        "lang1\tlang2\tsentence1\tsentence2\tscore\n" + "".join("\t".join(map(str, r)) + "\n" for r in rows),
        encoding="utf-8",
    )
    return path
