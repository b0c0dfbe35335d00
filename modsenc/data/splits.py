"""Each dev resource split once into a *selection* part and a *report* part (issue 49).

Selection is what training, early stopping, variant and release choices may read; report is what
docs/results tables are measured on, and nothing that trains or decides reads it (a test opens
every recipe, stage and release path with the report part refused). A number read off the set it
was chosen on is optimistic: the dev files steered the defaults, so their report part is what
says how much of a gain holds.

The split is by *sentence group*, not by row, so no STS pair and no translation crosses it: rows
that share any text (an English sentence in its en-en, en-xx and, through the xx translation,
xx-xx rows; a sentence repeated in two pairs) are one group (connected components over shared
texts). A group's part is fixed by the sha256 of ``SPLIT_SEED`` and the group's smallest text, so
it depends on the content only: not on the row order, nor on which other rows a file holds.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

SELECTION, REPORT = "selection", "report"
SPLITS = (SELECTION, REPORT)
SPLIT_SEED = "modsenc dev split 2026-11-28"  # recorded here once; changing it re-deals every part
REPORT_SHARE = 0.5


def part_of(group_key: str) -> str:
    """The part a group whose smallest text is ``group_key`` belongs to."""
    digest = hashlib.sha256(f"{SPLIT_SEED}\n{group_key}".encode()).digest()
    return REPORT if int.from_bytes(digest[:8], "big") / 2**64 < REPORT_SHARE else SELECTION


def sentence_groups(rows: Sequence[Sequence[str]]) -> list[str]:
    """Each row's group key: the smallest non-empty text of the rows it is connected to by a shared
    text (``rows``: the texts of each row, empty ones ignored)."""
    parent = list(range(len(rows)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first_row: dict[str, int] = {}
    for i, texts in enumerate(rows):
        for text in texts:
            if not text:
                continue
            j = first_row.setdefault(text, i)
            parent[root(i)] = root(j)
    smallest: dict[int, str] = {}
    for i, texts in enumerate(rows):
        present = [t for t in texts if t]
        if present:
            r = root(i)
            smallest[r] = min([*present, smallest[r]]) if r in smallest else min(present)
    return [smallest.get(root(i), "") for i in range(len(rows))]


def rows_in(rows: Sequence[Sequence[str]], part: str) -> list[int]:
    """The indices of ``rows`` (each a row's texts) in ``part`` (``selection`` or ``report``)."""
    if part not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {part!r}")
    return [i for i, key in enumerate(sentence_groups(rows)) if part_of(key) == part]
