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
from collections.abc import Callable
from dataclasses import dataclass, field

from modsenc.data.scripts import detect_script

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


# Uyghur Latin (ULY, Uyghur Latin Yéziqi) -> the same Cyrillic: digraphs first; e is ә and é is е
# (as the Arabic script's ە and ې above); w is в; an apostrophe between letters only splits a
# would-be digraph (n'g) or stands for the hamza, which Cyrillic does not write.
_UG_DIGRAPHS = {"ch": "ч", "sh": "ш", "gh": "ғ", "ng": "ң", "zh": "ж", "ya": "я", "yu": "ю"}
_UG_LETTERS = {
    "a": "а", "b": "б", "d": "д", "e": "ә", "é": "е", "f": "ф", "g": "г", "h": "һ", "i": "и",
    "j": "җ", "k": "к", "l": "л", "m": "м", "n": "н", "o": "о", "ö": "ө", "p": "п", "q": "қ",
    "r": "р", "s": "с", "t": "т", "u": "у", "ü": "ү", "v": "в", "w": "в", "x": "х", "y": "й",
    "z": "з",
}  # fmt: skip
# leftmost first, as ULY reads them: "ngh" is ng + h ("n'gh" is n + gh)
_UG_DIGRAPH_PATTERN = re.compile("|".join(_UG_DIGRAPHS), re.IGNORECASE)
_UG_LETTER_TABLE = str.maketrans(_UG_LETTERS | {k.upper(): v.upper() for k, v in _UG_LETTERS.items()})


def _ug_digraph(match: re.Match[str]) -> str:
    found = match.group(0)
    cyrillic = _UG_DIGRAPHS[found.lower()]
    return cyrillic.upper() if found[0].isupper() else cyrillic


def _uyghur_latin_to_cyrillic(text: str) -> str:
    """ULY -> Kardeş's Uyghur Cyrillic, for a text mostly in Latin letters; any other text (the
    Cyrillic the bundle reads, with a Latin name or "VCR" in it) is returned as it is. Only ULY's
    letters are converted: another Latin letter (c, ç, ş, ä) stays, and the router then reads the
    text as written only."""
    if detect_script([text]) != "Latn":
        return text
    text = _UG_DIGRAPH_PATTERN.sub(_ug_digraph, unicodedata.normalize("NFC", text))
    return _BETWEEN_LETTERS.sub("", text).translate(_UG_LETTER_TABLE)


# Kardeş's Uyghur Cyrillic -> ULY, the inverse of the above, for the language-ID gate's calibration
# (modsenc.routing.gate): lid.176 calls ULY Turkish or Hungarian, so it must see ug's own sample in
# the script the router reads ug in. ULY writes n'g, z'h, s'h, g'h where two letters would else be
# read as one digraph; a Latin letter in the Cyrillic text (a name, "LSC") stays.
_UG_CYRILLIC_TO_LATIN = {
    "а": "a", "ә": "e", "б": "b", "в": "w", "г": "g", "ғ": "gh", "д": "d", "е": "é", "ж": "zh",
    "җ": "j", "з": "z", "и": "i", "й": "y", "к": "k", "қ": "q", "л": "l", "м": "m", "н": "n",
    "ң": "ng", "о": "o", "ө": "ö", "п": "p", "р": "r", "с": "s", "т": "t", "у": "u", "ү": "ü",
    "ф": "f", "х": "x", "һ": "h", "ч": "ch", "ш": "sh", "ю": "yu", "я": "ya",
}  # fmt: skip
_UG_SPLIT_DIGRAPHS = {("n", "g"), ("z", "h"), ("s", "h"), ("c", "h"), ("g", "h")}


def _uyghur_cyrillic_to_latin(text: str) -> str:
    text = unicodedata.normalize("NFC", text)
    out: list[str] = []
    for i, ch in enumerate(text):
        latin = _UG_CYRILLIC_TO_LATIN.get(ch.lower())
        if latin is None:
            out.append(ch)
            continue
        if out and (out[-1][-1:].lower(), latin[0]) in _UG_SPLIT_DIGRAPHS:
            out.append("'")
        if ch.isupper():
            # a digraph in a word in capitals is all capitals (ЧАЙ: CHAY), else only its first letter
            near = text[i + 1 : i + 2] or text[i - 1 : i]
            latin = latin.upper() if near.isupper() else latin[0].upper() + latin[1:]
        out.append(latin)
    return "".join(out)


# Azerbaijani Cyrillic (1958-1991) -> the Latin alphabet of today: г is q and ҝ is g, ҹ is c, ј
# is y; И is the dotted İ, Ы the dotless I. Only that alphabet's letters: a Cyrillic letter it
# lacks (й я ю ц ь, Tatar's җ ң, Kazakh's қ і) stays, and the router then reads the text as
# written only (a text in another language's alphabet is not Azerbaijani).
_AZ_CYRILLIC = {
    "а": "a", "б": "b", "в": "v", "г": "q", "ғ": "ğ", "д": "d", "е": "e", "ә": "ə", "ж": "j",
    "з": "z", "и": "i", "ы": "ı", "ј": "y", "к": "k", "ҝ": "g", "л": "l", "м": "m",
    "н": "n", "о": "o", "ө": "ö", "п": "p", "р": "r", "с": "s", "т": "t", "у": "u", "ү": "ü",
    "ф": "f", "х": "x", "һ": "h", "ч": "ç", "ҹ": "c", "ш": "ş",
}  # fmt: skip
_AZ_CAPITALS = {"и": "İ", "ы": "I"}
_AZ_TABLE = str.maketrans(
    _AZ_CYRILLIC | {k.upper(): _AZ_CAPITALS.get(k, v.upper()) for k, v in _AZ_CYRILLIC.items()}
)


def _azerbaijani_cyrillic_to_latin(text: str) -> str:
    return text.translate(_AZ_TABLE)


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
        if "Latn" in self.transliterate:  # a no-op on text not mostly in Latin letters
            text = _TRANSLITERATORS[self.transliterate["Latn"]](text)
        if self.unify_apostrophes:
            text = _BETWEEN_LETTERS.sub("'", text)
        return text

    def written_in(self, script: str, text: str) -> str | None:
        """``text`` (in the script the bundle is trained on) written in ``script``, one of the
        scripts ``normalize`` converts, when the inverse conversion is known (else None)."""
        reverse = self._reverse(script)
        return reverse(text) if reverse is not None else None

    def _reverse(self, script: str) -> Callable[[str], str] | None:
        """The inverse of ``normalize``'s conversion of ``script`` (None: none, or none known)."""
        name = self.transliterate.get(script)
        return _TRANSLITERATORS.get(f"{name}-reverse") if name else None

    def script_variants(self, text: str) -> list[str]:
        """``text`` in every declared script (for the router's language profile)."""
        variants = [text]
        reverse = self._reverse("Cyrl")
        if reverse is not None and not any("\u0400" <= ch <= "\u04ff" for ch in text):
            variants.append(reverse(self.normalize(text)))
        return variants

    def tokenizer_normalizer(self):
        """The same normalisation as a ``tokenizers`` normaliser, for a standalone export.

        Rules run in order: NFC; Cyrillic ``е`` where it reads "ye"; every other Cyrillic letter;
        apostrophes between letters. A conversion that applies only to a text mostly in one script
        (Uyghur's Latin, ULY, which a Cyrillic sentence's "VCR" must not trigger) has no such rule:
        an exported model tokenises ULY as written (modsenc converts it).
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
        if self.transliterate.get("Cyrl") == "az-cyrillic-to-latin":
            for cyrillic, latin in _AZ_CYRILLIC.items():
                rules.append(normalizers.Replace(cyrillic, latin))
                rules.append(normalizers.Replace(cyrillic.upper(), _AZ_CAPITALS.get(cyrillic, latin.upper())))
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
    "ug-latin-to-cyrillic": _uyghur_latin_to_cyrillic,
    "ug-latin-to-cyrillic-reverse": _uyghur_cyrillic_to_latin,
    "az-cyrillic-to-latin": _azerbaijani_cyrillic_to_latin,
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
        scripts=("Cyrl", "Arab", "Latn"),
        description="Uyghur: Arabic script (UEY) transliterated letter by letter to the Cyrillic the "
        "bundle is trained on, and so is a text mostly in Latin (ULY); Cyrillic as given (NFC)",
        transliterate={"Arab": "ug-arabic-to-cyrillic", "Latn": "ug-latin-to-cyrillic"},
    ),
    "az": Orthography(
        "az",
        scripts=("Latn", "Cyrl"),
        description="Azerbaijani Latin; Cyrillic (1958-1991) transliterated to it; ʼ ' ’ ‘ ` ´ between "
        "letters written as '",
        unify_apostrophes=True,
        transliterate={"Cyrl": "az-cyrillic-to-latin"},
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
