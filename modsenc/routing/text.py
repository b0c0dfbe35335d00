"""Text as the router's profiles read it: NFC, lower case, one apostrophe, digits as 0, single
spaces, a space at each end (``normalise``); inside ``sharing_normalised`` each text is
normalised once per routing call."""

from __future__ import annotations

import contextlib
import re
import unicodedata
from collections.abc import Iterator
from contextvars import ContextVar

from modsenc.data.orthography import APOSTROPHES

# Uzbek (and Turkic Latin orthographies) write the same apostrophe with several characters: the
# orthographies' one set, here unified anywhere in the text (not only between letters).
_APOSTROPHES = re.compile(f"[{re.escape(APOSTROPHES)}]")
_DIGITS = re.compile(r"\d+")


def normalise(text: str) -> str:
    text = unicodedata.normalize("NFC", text).lower()
    text = _APOSTROPHES.sub("'", text)
    text = _DIGITS.sub("0", text)
    return " " + " ".join(text.split()) + " "


def normalised(text: str) -> str:
    """``normalise(text)``; inside ``sharing_normalised`` each text is normalised once."""
    memo = _NORMALISED.get()
    if memo is None:
        return normalise(text)
    found = memo.get(text)
    if found is None:
        found = memo[text] = normalise(text)
    return found


# Routing a sentence normalises it for the detector, then for the bundle's acceptance test: the
# router does it once per call (``sharing_normalised``), and nothing outlives the call.
# text -> the text normalised
_NORMALISED: ContextVar[dict[str, str] | None] = ContextVar("modsenc_normalised", default=None)


@contextlib.contextmanager
def sharing_normalised() -> Iterator[None]:
    """Within the block, each text is normalised once."""
    token = _NORMALISED.set({})
    try:
        yield
    finally:
        _NORMALISED.reset(token)
