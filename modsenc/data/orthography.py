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


# Uyghur Arabic script (UEY, Uyghur Ereb Yéziqi) -> the Cyrillic the ug bundle is trained on
# (Kardeş-NLU's). One letter each; the hamza ئ only carries a vowel at a syllable's start and is
# dropped, as Cyrillic writes none; y + a / u are я / ю (Kardeş: "я" 115 times in its sample,
# "йа" never). Presentation forms are folded by NFKC first; short-vowel marks and the tatweel go.
_UG_ARABIC = {
    "ا": "а", "ە": "ә", "ه": "ә", "ب": "б", "پ": "п", "ت": "т", "ج": "җ", "چ": "ч", "خ": "х",
    "د": "д", "ر": "р", "ز": "з", "ژ": "ж", "س": "с", "ش": "ш", "غ": "ғ", "ف": "ф", "ق": "қ",
    "ك": "к", "ک": "к", "گ": "г", "ڭ": "ң", "ل": "л", "م": "м", "ن": "н", "ھ": "һ", "و": "о",
    "ۇ": "у", "ۆ": "ө", "ۈ": "ү", "ۋ": "в", "ې": "е", "ى": "и", "ي": "й", "ی": "и", "ئ": "",
    "،": ",", "؛": ";", "؟": "?", "ـ": "", "\u200c": "", "\u200d": "",
}  # fmt: skip
_UG_ARABIC_PAIRS = {"يا": "я", "يۇ": "ю"}
_ARABIC_MARKS = re.compile("[\u064b-\u065f\u0670]")
_ARABIC_LETTER = re.compile("[\u0600-\u06ff\ufb50-\ufdff\ufe70-\ufeff]")


def _uyghur_arabic_to_cyrillic(text: str) -> str:
    """UEY -> Kardeş's Uyghur Cyrillic; a text without Arabic letters is returned as it is."""
    if not _ARABIC_LETTER.search(text):
        return text
    text = _ARABIC_MARKS.sub("", unicodedata.normalize("NFKC", text))
    for arabic, cyrillic in _UG_ARABIC_PAIRS.items():
        text = text.replace(arabic, cyrillic)
    return "".join(_UG_ARABIC.get(ch, ch) for ch in text)


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
        if "Arab" in self.transliterate:  # a no-op on text without Arabic letters
            text = _TRANSLITERATORS[self.transliterate["Arab"]](text)
        if self.unify_apostrophes:
            text = _BETWEEN_LETTERS.sub("'", text)
        return text

    def script_variants(self, text: str) -> list[str]:
        """``text`` in every declared script (for the router's language profile)."""
        variants = [text]
        reverse = _TRANSLITERATORS.get(self.transliterate.get("Cyrl", "") + "-reverse")
        if reverse is not None and not any("\u0400" <= ch <= "\u04ff" for ch in text):
            variants.append(reverse(self.normalize(text)))
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
        if self.transliterate.get("Arab") == "ug-arabic-to-cyrillic":
            rules.append(normalizers.NFKC())
            rules.append(normalizers.Replace(Regex("[\u064b-\u065f\u0670]"), ""))
            for arabic, cyrillic in (*_UG_ARABIC_PAIRS.items(), *_UG_ARABIC.items()):
                rules.append(normalizers.Replace(arabic, cyrillic))
        if self.unify_apostrophes:
            rules.append(normalizers.Replace(Regex(rf"(?<=\p{{L}})[{APOSTROPHES}](?=\p{{L}})"), "'"))
        return normalizers.Sequence(rules)

    def to_manifest(self) -> dict[str, object]:
        return {"name": self.name, "scripts": list(self.scripts), "description": self.description}


_TRANSLITERATORS = {
    "uz-cyrillic-to-latin": _transliterate_uzbek_cyrillic,
    "uz-cyrillic-to-latin-reverse": _uzbek_latin_to_cyrillic,
    "ug-arabic-to-cyrillic": _uyghur_arabic_to_cyrillic,
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
    "ug": Orthography(
        "ug",
        scripts=("Cyrl", "Arab"),
        description="Uyghur: Arabic script (UEY) transliterated letter by letter to the Cyrillic the "
        "bundle is trained on; Cyrillic as given (NFC). Latin (ULY) is not converted",
        transliterate={"Arab": "ug-arabic-to-cyrillic"},
    ),
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
