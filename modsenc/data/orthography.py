"""Per-language orthography handling, applied to a sentence before its language's tokenizer.

Real Uzbek text spells oʻ/gʻ and the tutuq belgisi with at least seven characters (ʻ U+02BB,
ʼ U+02BC, ' U+0027, ’ U+2019, ‘ U+2018, ` U+0060, ´ U+00B4) and also comes in Cyrillic. To a
tokenizer these are different pieces, so one sentence lands in different places depending on who
typed it. An :class:`Orthography` maps every variant to one canonical spelling: Uzbek Cyrillic is
transliterated to Latin (the official 1995 correspondence), and every apostrophe between letters
becomes one character. The canonical apostrophe is ASCII ``'``: it is by far the most frequent in
web text (and in ../shared/data's Kardeş and review files), so a web-trained backbone such as
multilingual-e5 knows its piece best.

A bundle records its orthography's name in its manifest (``modsenc add-language`` picks the
language's default), and the router's language profile is built from the text in every script the
orthography declares, so a Cyrillic Uzbek sentence is still routed to Uzbek.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

APOSTROPHES = "ʻʼ'’‘`´"
_BETWEEN_LETTERS = re.compile(rf"(?<=[^\W\d_])[{APOSTROPHES}](?=[^\W\d_])")

# Uzbek Cyrillic -> Latin (1995 alphabet). Е is "ye" at a word start and after a vowel or a sign.
_UZ_CYRILLIC = {
    "а": "a", "б": "b", "в": "v", "г": "g", "д": "d", "ё": "yo", "ж": "j", "з": "z", "и": "i",
    "й": "y", "к": "k", "л": "l", "м": "m", "н": "n", "о": "o", "п": "p", "р": "r", "с": "s",
    "т": "t", "у": "u", "ф": "f", "х": "x", "ц": "ts", "ч": "ch", "ш": "sh", "щ": "sh", "ъ": "'",
    "ь": "", "ы": "i", "э": "e", "ю": "yu", "я": "ya", "ў": "o'", "қ": "q", "ғ": "g'", "ҳ": "h",
}  # fmt: skip
_UZ_VOWELS = set("аеёиоуэюяўaeiou")


def _transliterate_uzbek_cyrillic(text: str) -> str:
    out: list[str] = []
    previous = ""
    for ch in text:
        lower = ch.lower()
        if lower == "е":
            latin = "ye" if not previous.isalpha() or previous.lower() in _UZ_VOWELS | {"ъ", "ь"} else "e"
        else:
            latin = _UZ_CYRILLIC.get(lower)
        if latin is None:
            out.append(ch)
        elif ch.isupper() and latin:
            out.append(latin[0].upper() + latin[1:])
        else:
            out.append(latin)
        previous = ch
    return "".join(out)


_UZ_LATIN_TO_CYRILLIC = [
    ("o'", "ў"), ("g'", "ғ"), ("sh", "ш"), ("ch", "ч"), ("yo", "ё"), ("yu", "ю"), ("ya", "я"),
    ("ye", "е"), ("a", "а"), ("b", "б"), ("d", "д"), ("e", "е"), ("f", "ф"), ("g", "г"), ("h", "ҳ"),
    ("i", "и"), ("j", "ж"), ("k", "к"), ("l", "л"), ("m", "м"), ("n", "н"), ("o", "о"), ("p", "п"),
    ("q", "қ"), ("r", "р"), ("s", "с"), ("t", "т"), ("u", "у"), ("v", "в"), ("x", "х"), ("y", "й"),
    ("z", "з"), ("'", "ъ"),
]  # fmt: skip
_LATIN_TO_CYRILLIC = re.compile("|".join(re.escape(a) for a, _ in _UZ_LATIN_TO_CYRILLIC), re.IGNORECASE)


def _uzbek_latin_to_cyrillic(text: str) -> str:
    """Latin -> Cyrillic, good enough to teach the router what Cyrillic Uzbek looks like."""
    table = dict(_UZ_LATIN_TO_CYRILLIC)

    def swap(match: re.Match[str]) -> str:
        found = match.group(0)
        cyrillic = table[found.lower()]
        return cyrillic.upper() if found[0].isupper() else cyrillic

    return _LATIN_TO_CYRILLIC.sub(swap, text)


@dataclass(frozen=True)
class Orthography:
    """How one language's text is made canonical before tokenisation."""

    name: str
    scripts: tuple[str, ...]  # ISO 15924 codes the router should recognise
    description: str = ""
    unify_apostrophes: bool = False
    transliterate: dict[str, str] = field(default_factory=dict)  # script -> transliterator name

    def normalize(self, text: str) -> str:
        text = unicodedata.normalize("NFC", text)
        if "Cyrl" in self.transliterate and any("\u0400" <= ch <= "\u04ff" for ch in text):
            text = _TRANSLITERATORS[self.transliterate["Cyrl"]](text)
        if self.unify_apostrophes:
            text = _BETWEEN_LETTERS.sub("'", text)
        return text

    def script_variants(self, text: str) -> list[str]:
        """``text`` in every declared script (for the router's language profile)."""
        variants = [text]
        if "Cyrl" in self.transliterate and not any("\u0400" <= ch <= "\u04ff" for ch in text):
            variants.append(_TRANSLITERATORS[self.transliterate["Cyrl"] + "-reverse"](self.normalize(text)))
        return variants

    def tokenizer_normalizer(self):
        """The same normalisation as a ``tokenizers`` normaliser, for a standalone export.

        Rules run in order: NFC; Cyrillic ``е`` where it reads "ye"; every other Cyrillic letter;
        apostrophes between letters.
        """
        from tokenizers import Regex, normalizers  # noqa: PLC0415

        rules = [normalizers.NFC()]
        if self.transliterate.get("Cyrl") == "uz-cyrillic-to-latin":
            after = "".join(sorted(_UZ_VOWELS | {c.upper() for c in _UZ_VOWELS} | set("ъьЪЬ")))
            for cyrillic, latin in (("Е", "Ye"), ("е", "ye")):
                rules.append(
                    normalizers.Replace(Regex(rf"(?<!\p{{L}}){cyrillic}|(?<=[{after}]){cyrillic}"), latin)
                )
            for cyrillic, latin in (*_UZ_CYRILLIC.items(), ("е", "e")):
                rules.append(normalizers.Replace(cyrillic, latin))
                if cyrillic.upper() != cyrillic:
                    rules.append(normalizers.Replace(cyrillic.upper(), latin[:1].upper() + latin[1:]))
        if self.unify_apostrophes:
            rules.append(normalizers.Replace(Regex(rf"(?<=\p{{L}})[{APOSTROPHES}](?=\p{{L}})"), "'"))
        return normalizers.Sequence(rules)

    def to_manifest(self) -> dict[str, object]:
        return {"name": self.name, "scripts": list(self.scripts), "description": self.description}


_TRANSLITERATORS = {
    "uz-cyrillic-to-latin": _transliterate_uzbek_cyrillic,
    "uz-cyrillic-to-latin-reverse": _uzbek_latin_to_cyrillic,
}

ORTHOGRAPHIES: dict[str, Orthography] = {
    "none": Orthography("none", scripts=(), description="text is tokenised as given (Unicode NFC only)"),
    "uz": Orthography(
        "uz",
        scripts=("Latn", "Cyrl"),
        description="Uzbek: Cyrillic transliterated to Latin (1995 alphabet); ʻ ʼ ' ’ ‘ ` ´ between "
        "letters (oʻ, gʻ, tutuq belgisi) all written as '",
        unify_apostrophes=True,
        transliterate={"Cyrl": "uz-cyrillic-to-latin"},
    ),
    "kk": Orthography("kk", scripts=("Cyrl",), description="Kazakh in Cyrillic, as given (NFC)"),
    "az": Orthography(
        "az",
        scripts=("Latn",),
        description="Azerbaijani Latin; ʼ ' ’ ‘ ` ´ between letters written as '",
        unify_apostrophes=True,
    ),
    "tr": Orthography(
        "tr",
        scripts=("Latn",),
        description="Turkish; ʼ ' ’ ‘ ` ´ between letters (İstanbul'a) written as '",
        unify_apostrophes=True,
    ),
}


def orthography_for(lang_or_name: str | None) -> Orthography:
    """The named orthography, or the default of a language code (``none`` when it has none)."""
    if lang_or_name is None:
        return ORTHOGRAPHIES["none"]
    return ORTHOGRAPHIES.get(lang_or_name, ORTHOGRAPHIES["none"])


def get_orthography(name: str) -> Orthography:
    if name not in ORTHOGRAPHIES:
        raise ValueError(f"unknown orthography {name!r}; known: {', '.join(sorted(ORTHOGRAPHIES))}")
    return ORTHOGRAPHIES[name]
