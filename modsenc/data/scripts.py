"""Which writing system a text is in: one detector, one code system (ISO 15924).

A bundle's manifest records its language's script (``Latn``, ``Cyrl``); the router's language
profiles keep one sub-profile per script, keyed by the script's name (``Latin``, ``Cyrillic``:
``script_label``), the keys every ``langid.json`` and the background profiles have stored.
"""

from __future__ import annotations

import functools
import unicodedata
from collections import Counter
from collections.abc import Iterable

# The first word of a letter's Unicode name -> its ISO 15924 code. A script not listed keeps that
# word, title-cased ("Bengali"): still one name per script, just not the four-letter code.
_CODES = {
    "LATIN": "Latn",
    "CYRILLIC": "Cyrl",
    "ARABIC": "Arab",
    "GREEK": "Grek",
    "HEBREW": "Hebr",
    "DEVANAGARI": "Deva",
    "CJK": "Hani",
    "HANGUL": "Hang",
    "HIRAGANA": "Hira",
    "KATAKANA": "Kana",
    "GEORGIAN": "Geor",
    "ARMENIAN": "Armn",
    "THAI": "Thai",
}
NO_SCRIPT = "Zyyy"  # ISO 15924's "undetermined script": a text without letters
# The sub-profile keys of language profiles: the Unicode name's first word, title-cased.
_LABELS = {code: word.title() for word, code in _CODES.items()} | {NO_SCRIPT: "None"}


def detect_script(texts: Iterable[str], sample: int = 2000) -> str:
    """ISO 15924 code of the most frequent script among the letters of the first ``sample``
    ``texts`` (``NO_SCRIPT`` if they hold no letter)."""
    counts: Counter[str | None] = Counter()
    for i, text in enumerate(texts):
        if i >= sample:
            break
        counts.update(map(_letter_script, text))  # one C-level pass; None counts what is no letter
    counts.pop(None, None)
    return counts.most_common(1)[0][0] if counts else NO_SCRIPT  # type: ignore[return-value]


@functools.lru_cache(maxsize=65536)
def _letter_script(ch: str) -> str | None:
    """The script code of a letter (None for anything else). Cached: the router asks about every
    character of every sentence, and a language's letters are few (Unicode names are not)."""
    if not ch.isalpha():
        return None
    first = unicodedata.name(ch, "UNKNOWN").split()[0]
    return _CODES.get(first, first.title())


def letter_script(ch: str) -> str | None:
    """The ISO 15924 code of the letter ``ch`` (None for anything that is no letter)."""
    return _letter_script(ch)


def script_label(code: str) -> str:
    """The name a language profile keys the sub-profile of script ``code`` by ("Latn" -> "Latin")."""
    return _LABELS.get(code, code)


def script_code(label: str) -> str:
    """The ISO 15924 code of a profile's sub-profile key (``script_label``'s inverse: "Latin" -> "Latn")."""
    return _CODES_OF_LABELS.get(label, label)


_CODES_OF_LABELS = {label: code for code, label in _LABELS.items()}
