"""Read the UDHR translations of unicode-org/udhr (its ``data/udhr`` folder, fetched outside the
project) as sentences per language, for the router's wide benchmark (``python -m bench.router
--sections wide --udhr PATH``).

One ``udhr_<key>.xml`` per translation, ``<udhr iso639-3=... key=... iso15924=...>``; every
``<para>``, ``<listitem>`` and article ``<title>`` is split on sentence ends (. ! ? and the Arabic,
Devanagari, Ethiopic and CJK full stops) into sentences. The texts are the United Nations' (© OHCHR);
kept outside the project, never copied into it.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

_SENTENCE_END = re.compile(r"(?<=[.!?。।።؟])\s+")
_TEXT_TAGS = {"para", "listitem", "title"}


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def read_translation(path: Path) -> tuple[dict[str, str], list[str]]:
    """(the root's attributes: ``iso639-3``, ``key``, ``iso15924``, ``n``; its sentences)."""
    root = ET.parse(path).getroot()
    attrs = {k: v for k, v in root.attrib.items() if not k.startswith("{")}
    sentences: list[str] = []
    for element in root.iter():
        if _local(element.tag) in _TEXT_TAGS:
            text = " ".join("".join(element.itertext()).split())
            sentences.extend(s.strip() for s in _SENTENCE_END.split(text) if s.strip())
    return attrs, sentences


def read_udhr(folder: str | Path, min_sentences: int = 20) -> dict[str, tuple[dict[str, str], list[str]]]:
    """``{key: (attributes, sentences)}`` for every translation with ``min_sentences`` or more
    (the ones with only a title or a preamble are skipped)."""
    out = {}
    for path in sorted(Path(folder).glob("udhr_*.xml")):
        try:
            attrs, sentences = read_translation(path)
        except ET.ParseError:
            continue
        if len(sentences) >= min_sentences:
            out[path.stem.removeprefix("udhr_")] = (attrs, sentences)
    return out
