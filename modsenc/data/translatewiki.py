"""Message translations of MediaWiki software (translatewiki.net), as sentences per language.

Each MediaWiki extension keeps its interface messages in ``i18n/<code>.json`` files, one per
language (``{"message-key": "text", ...}``, with ``en.json`` the source and ``qqq.json`` the
translators' documentation), translated by volunteers at translatewiki.net into several hundred
languages. A folder of such checkouts (fetched outside the project, never copied into it; the
extensions are GPL-2.0-or-later) is another domain beside UDHR's legal text and X-WMT's news:
short software strings, in many small languages UDHR lacks (Karachay-Balkar, South
Azerbaijani) and in scripts it lacks (Kazakh in Latin and Arabic letters).

A message becomes sentences after its markup is dropped (``{{PLURAL:$1|one|many}}`` keeps its
first form, ``[[target|label]]`` its label, ``$1`` and HTML tags go), one per line of the message;
a line is kept when it has ``MIN_WORDS`` words or more and is mostly letters. A message identical to
the English one of the same key is an untranslated copy and is left out.

Lines are kept in file order, each once per language code, and split by position as X-WMT's are:
the odd-numbered lines (``PROFILE_PART``) may build the router's world profiles
(``modsenc.routing.background``), the even-numbered ones (``REPORT_PART``) are what the router's
wide benchmark reports on (``bench/router_wide.py``).
"""

from __future__ import annotations

import html
import json
import logging
import re
from collections.abc import Iterable
from pathlib import Path

from modsenc.data.udhr import PROFILE_PART, REPORT_PART

log = logging.getLogger(__name__)

MIN_WORDS = 4
MIN_LETTER_SHARE = 0.6  # of a line's characters other than spaces
SKIPPED_CODES = frozenset({"qqq"})  # the translators' documentation, in English
_CODE_FILE = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
_SWITCH = re.compile(r"\{\{\s*(?:PLURAL|GENDER|GRAMMAR)\s*:[^|{}]*\|([^|{}]*)[^{}]*\}\}", re.IGNORECASE)
_PLAIN_TEMPLATE = re.compile(r"\{\{(?!\s*(?:PLURAL|GENDER|GRAMMAR)\s*:)[^|{}]*\}\}", re.IGNORECASE)
_TEMPLATE = re.compile(r"\{\{[^{}]*\}\}")
_FORM_NAME = re.compile(r"^\s*\w+=")  # PLURAL's explicit forms: {{PLURAL:$1|0=none|one}}
_WIKILINK = re.compile(r"\[\[(?:[^|\]]*\|)?([^\]]*)\]\]")
_EXTERNAL_LINK = re.compile(r"\[(?:(?:https?:|//)\S*|\$\d+)\s*([^\]]*)\]")  # [url label], [$1 label]
_TAG = re.compile(r"<[^>]*>")
_PARAMETER = re.compile(r"\$\d+")
_LIST_MARK = re.compile(r"^[*#:;\s]+")


def message_sentences(message: str) -> list[str]:
    """The sentences of one message: its markup dropped, one per line, each of ``MIN_WORDS``
    words or more and mostly letters."""
    text = message
    while True:  # innermost first: {{GRAMMAR:genitive|{{SITENAME}}}}, GENDER inside PLURAL
        before = text
        text = _PLAIN_TEMPLATE.sub(" ", text)
        text = _SWITCH.sub(lambda m: _FORM_NAME.sub("", m.group(1)), text)
        if text == before:
            break
    text = _TEMPLATE.sub(" ", text)
    text = _WIKILINK.sub(r"\1", text)
    text = _EXTERNAL_LINK.sub(r"\1", text)
    text = _TAG.sub(" ", text)
    text = _PARAMETER.sub(" ", text)
    text = html.unescape(text.replace("'''", "").replace("''", ""))  # bold, italic; &bull;
    out = []
    for line in text.splitlines():
        line = " ".join(_LIST_MARK.sub("", line).split())
        letters = sum(ch.isalpha() for ch in line)
        if len(line.split()) >= MIN_WORDS and letters >= MIN_LETTER_SHARE * len(line.replace(" ", "")):
            out.append(line)
    return out


def _messages(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        log.warning("%s: skipped, not a JSON message file (%s)", path, err)
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if not k.startswith("@") and isinstance(v, str)}


def read_translatewiki(folders: Iterable[str | Path]) -> dict[str, list[str]]:
    """``{code: sentences}`` of every ``i18n/<code>.json`` under ``folders`` (checkouts of MediaWiki
    extensions), codes as translatewiki writes them (``tg-cyrl``, ``kk-latn``, ``azb``), folders and
    files in sorted order, each sentence once per code."""
    out: dict[str, dict[str, None]] = {}
    for folder in sorted(Path(f) for f in folders):
        if not folder.is_dir():
            raise FileNotFoundError(f"{folder}: no such folder (a checkout of a MediaWiki extension)")
        found = sorted({p.parent for p in folder.rglob("i18n/*.json")})
        if not found:
            raise ValueError(f"{folder}: no i18n/*.json in it (a checkout of a MediaWiki extension?)")
        for i18n in found:
            english = _messages(i18n / "en.json")
            for path in sorted(i18n.glob("*.json")):
                code = path.stem
                if code in SKIPPED_CODES or not _CODE_FILE.fullmatch(code):
                    continue
                lines = out.setdefault(code, {})
                for key, message in _messages(path).items():
                    if code != "en" and message.strip() == english.get(key, "").strip():
                        continue  # an untranslated copy of the English message
                    lines.update(dict.fromkeys(message_sentences(message)))
    return {code: list(lines) for code, lines in sorted(out.items()) if lines}


def part(sentences: list[str], which: str) -> list[str]:
    """The odd-numbered lines (``PROFILE_PART``) or the even-numbered ones (``REPORT_PART``)."""
    if which not in (PROFILE_PART, REPORT_PART):
        raise ValueError(f"part is {PROFILE_PART!r} or {REPORT_PART!r}, got {which!r}")
    first = 1 if which == PROFILE_PART else 0
    return sentences[first::2]
