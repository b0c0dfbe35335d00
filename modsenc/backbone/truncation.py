"""Sentences cut to a token limit, counted instead of warned about once per batch.

``Tokenized.warn_if_truncated`` warns for every batch that had a sentence cut; inside
``counting_truncations()`` it adds to a count instead, and the caller reports one line (add-language:
one a stage, "se: 1,234 of 40,000 sentences were longer than 64 tokens and were truncated").
The count is a context variable, set only inside the ``with`` block that reads it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass
class TruncationCount:
    """Sentences tokenised inside ``counting_truncations()``, and how many were cut to ``limit``."""

    cut: int = 0
    total: int = 0
    limit: int = 0

    def add(self, cut: int, total: int, limit: int) -> None:
        self.cut, self.total, self.limit = self.cut + cut, self.total + total, max(self.limit, limit)

    def line(self, what: str) -> str | None:
        """One line for a log (``what``: whose sentences), or None when nothing was cut."""
        if not self.cut:
            return None
        return (
            f"{what}: {self.cut:,} of {self.total:,} sentences were longer than {self.limit} tokens "
            "and were truncated"
        )


_TRUNCATIONS: ContextVar[TruncationCount | None] = ContextVar("modsenc_truncations", default=None)


@contextmanager
def counting_truncations() -> Iterator[TruncationCount]:
    """Inside this block, a batch with sentences cut to the token limit adds to the count it
    yields instead of warning once per batch (add-language reports one counted line a stage)."""
    count = TruncationCount()
    token = _TRUNCATIONS.set(count)
    try:
        yield count
    finally:
        _TRUNCATIONS.reset(token)


def truncation_counter() -> TruncationCount | None:
    """The count of the innermost ``counting_truncations()`` block around the caller, or None."""
    return _TRUNCATIONS.get()
