"""The UDHR translations of unicode-org/udhr (its ``data/udhr`` folder, fetched outside the
project), as sentences per translation, each with the article it comes from.

One ``udhr_<key>.xml`` per translation, ``<udhr iso639-3=... key=... iso15924=... xml:lang=...>``;
every ``<para>``, ``<listitem>`` and article ``<title>`` is split on sentence ends (. ! ? and the
Arabic, Devanagari, Ethiopic and CJK full stops) into sentences. The texts are the United Nations'
(© OHCHR); kept outside the project, never copied into it.

All translations are of one text, so a split by article keeps every translation of a sentence on
one side: ``PROFILE_PART`` (the odd-numbered articles) is what the router's world profiles are
built from (``modsenc.routing.background``), and the rest (the preamble and the even-numbered
articles) is what the router's wide benchmark reports on (``bench/router_wide.py``).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

_SENTENCE_END = re.compile(r"(?<=[.!?。।።؟])\s+")
_TEXT_TAGS = {"para", "listitem", "title"}
_XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
PROFILE_PART = "profile"
REPORT_PART = "report"


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def article_part(article: int) -> str:
    """Which part of the split an article is in: odd-numbered articles build profiles; the
    preamble (0) and the even-numbered articles are reported on."""
    return PROFILE_PART if article % 2 == 1 else REPORT_PART


@dataclass(frozen=True)
class Translation:
    key: str  # the file's key: ``tgk``, ``tuk_latn``, ``pes_1``
    attrs: dict[str, str]  # the root's attributes: ``iso639-3``, ``iso15924``, ``n``, ``lang``
    sentences: tuple[tuple[int, str], ...]  # (article number, 0 for the preamble; sentence)

    @property
    def language(self) -> str:
        """The language as a modsenc code: ``xml:lang`` without its subtags (``tk-Latn`` -> ``tk``,
        ``fa-AF`` -> ``fa``), else the ISO 639-3 code."""
        for tag in (self.attrs.get("lang"), self.attrs.get("iso639-3"), self.key.split("_", 1)[0]):
            code = (tag or "").split("-", 1)[0].lower()
            if code and code != "und":  # "und": undetermined, a tag six files carry
                return code
        return self.key

    def part(self, name: str) -> list[str]:
        """The sentences of one part of the split (``PROFILE_PART`` or ``REPORT_PART``)."""
        return [text for article, text in self.sentences if article_part(article) == name]


def read_translation(path: Path) -> Translation:
    root = ET.parse(path).getroot()
    attrs = {k: v for k, v in root.attrib.items() if not k.startswith("{")}
    if root.get(_XML_LANG):
        attrs["lang"] = root.get(_XML_LANG, "")
    sentences: list[tuple[int, str]] = []

    def walk(element: ET.Element, article: int) -> None:
        if _local(element.tag) == "article":
            number = element.get("number", "")
            article = int(number) if number.isdigit() else article
        if _local(element.tag) in _TEXT_TAGS:
            text = " ".join("".join(element.itertext()).split())
            sentences.extend((article, s.strip()) for s in _SENTENCE_END.split(text) if s.strip())
            return
        for child in element:
            walk(child, article)

    walk(root, 0)
    return Translation(path.stem.removeprefix("udhr_"), attrs, tuple(sentences))


def read_udhr(folder: str | Path, min_sentences: int = 20) -> dict[str, Translation]:
    """``{key: Translation}`` for every translation with ``min_sentences`` or more (the ones with
    only a title or a preamble are skipped, and so are files that are not well-formed XML)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: not a folder (unicode-org/udhr's data/udhr)")
    out = {}
    for path in sorted(folder.glob("udhr_*.xml")):
        try:
            translation = read_translation(path)
        except ET.ParseError:
            continue
        if len(translation.sentences) >= min_sentences:
            out[translation.key] = translation
    return out
