"""Character n-grams of a batch of texts as array positions, for the router's scoring tables.

``langid.ngrams`` defines a text's n-grams as strings, one Python object each: cutting and
looking up the few hundred thousand n-grams of a 512-sentence batch was most of routing's cost
(docs/benchmarks.md, "Fast by default"). Here a batch is cut and looked up with NumPy instead:
the normalised texts become one array of code points, each n-gram a window of it, hashed
(a polynomial over its code points, started from its order) and searched for among the hashes of a
table's kept n-grams. A hash that matches is then checked code point by code point against the
kept n-gram, so two n-grams that share a hash are never confused: the counts are exactly those
of ``langid.ngrams``, and so are the scores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MAX_ORDER = 5  # the longest n-gram a table keeps (langid.ORDERS)
_SPACE = ord(" ")
_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)  # odd, so multiplying by it loses no bits mod 2**64


def code_points(text: str) -> np.ndarray:
    """``text``'s code points as uint32 (a lone surrogate too: it is one character of the text)."""
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def _window_hashes(points: np.ndarray, n: int, seed: int) -> np.ndarray:
    """The hash of every window of ``n`` code points of ``points`` (one per start position): a
    polynomial mod 2**64 whose multiplier the seed sets (so n-grams of one length that collide
    under one seed are apart under another), started from the order (so orders stay apart)."""
    count = len(points) - n + 1
    if count <= 0:
        return np.zeros(0, dtype=np.uint64)
    wide = points.astype(np.uint64)
    multiplier = np.uint64(int(_MULTIPLIER) + 2 * seed)  # odd for every seed
    hashes = np.full(count, n, dtype=np.uint64)
    with np.errstate(over="ignore"):  # arithmetic mod 2**64 is the hash
        for k in range(n):
            hashes = hashes * multiplier + wide[k : k + count]
    return hashes


@dataclass(frozen=True)
class GramBatch:
    """Every n-gram of a batch of normalised texts: its ``owner`` (the text's index), ``order``,
    ``start`` (its first code point in ``points``, the texts' code points end to end). The n-grams
    of one order are contiguous: ``blocks`` holds each order's (order, first, end) positions, so a
    look-up takes an order's n-grams as a slice instead of searching the batch for them."""

    points: np.ndarray
    owner: np.ndarray
    order: np.ndarray
    start: np.ndarray
    texts: int
    blocks: tuple[tuple[int, int, int], ...]

    @classmethod
    def cut(cls, normalised: Sequence[str], orders: Sequence[int]) -> GramBatch:
        """The n-grams ``langid.ngrams`` cuts from each of ``normalised`` (``langid.normalise``'s
        output; a text that is all space has none): for n = 1 its characters but the spaces, for
        n > 1 every window of n characters."""
        if any(not 1 <= n <= MAX_ORDER for n in orders):
            raise ValueError(f"n-gram orders run from 1 to {MAX_ORDER}, got {list(orders)}")
        kept = [text if text.strip() else "" for text in normalised]
        points = code_points("".join(kept))
        lengths = np.fromiter(map(len, kept), dtype=np.int64, count=len(kept))
        owner_of = np.repeat(np.arange(len(kept)), lengths)
        owners, order, starts, blocks, first = [], [], [], [], 0
        for n in orders:
            if n == 1:
                start = np.flatnonzero(points != _SPACE)
            else:
                start = np.arange(max(len(points) - n + 1, 0))
                start = start[owner_of[start] == owner_of[start + n - 1]]  # inside one text
            owners.append(owner_of[start])
            starts.append(start)
            order.append(np.full(len(start), n, dtype=np.int64))
            blocks.append((n, first, first + len(start)))
            first += len(start)
        return cls(
            points,
            np.concatenate(owners) if owners else np.zeros(0, dtype=np.int64),
            np.concatenate(order) if order else np.zeros(0, dtype=np.int64),
            np.concatenate(starts) if starts else np.zeros(0, dtype=np.int64),
            len(kept),
            tuple(blocks),
        )

    def counts(self) -> np.ndarray:
        """(texts,) the number of n-grams of each text."""
        return np.bincount(self.owner, minlength=self.texts)


class GramIndex:
    """A table's kept n-grams (strings of 1 to ``MAX_ORDER`` characters, in column order), found
    for a ``GramBatch`` by hash and checked code point by code point."""

    def __init__(self, grams: Sequence[str]) -> None:
        lengths = np.fromiter(map(len, grams), dtype=np.int64, count=len(grams))
        # (a few hundred thousand kept n-grams in the detector's table: 33 bytes each here)
        if len(grams) and not (lengths.min() >= 1 and lengths.max() <= MAX_ORDER):
            raise ValueError(f"a scoring table keeps n-grams of 1 to {MAX_ORDER} characters")
        # each kept n-gram's code points, padded with zeros to MAX_ORDER
        self.points = np.zeros((len(grams), MAX_ORDER), dtype=np.uint32)
        for n in range(1, MAX_ORDER + 1):
            rows = np.flatnonzero(lengths == n)
            if len(rows):
                joined = "".join(grams[i] for i in rows)
                self.points[rows, :n] = code_points(joined).reshape(len(rows), n)
        self.lengths = lengths.astype(np.uint8)
        for seed in range(8):  # the first seed under which no two kept n-grams share a hash
            hashes = self._hashes(self.points, lengths, seed)
            order = np.argsort(hashes, kind="stable")
            if len(order) < 2 or np.all(np.diff(hashes[order]) != 0):
                break
        else:  # eight multipliers in a row, each with a collision among the table's hashes
            raise ValueError("the scoring table's n-grams collide under every hash seed")
        self.seed, self.sorted_hashes, self.columns = seed, hashes[order], order.astype(np.int32)

    @staticmethod
    def _hashes(points: np.ndarray, lengths: np.ndarray, seed: int) -> np.ndarray:
        hashes = np.zeros(len(points), dtype=np.uint64)
        for n in range(1, MAX_ORDER + 1):
            rows = np.flatnonzero(lengths == n)
            if len(rows):
                hashes[rows] = _window_hashes(points[rows, :n].reshape(-1), n, seed)[::n]
        return hashes

    def find(self, batch: GramBatch) -> np.ndarray:
        """Each n-gram's column in the table, -1 where the table does not keep it."""
        found = np.full(len(batch.owner), -1, dtype=np.int64)
        if not len(self.sorted_hashes):
            return found
        for n, first, end in batch.blocks:
            if first == end:
                continue
            starts = batch.start[first:end]
            hashes = _window_hashes(batch.points, n, self.seed)[starts]
            # searched in sorted order: each look-up then lands near the last one in the table
            # (a few million hashes with the world profiles), 3-4x faster than in text order
            ranked = np.argsort(hashes)
            slot = np.empty(len(hashes), dtype=np.int64)
            slot[ranked] = np.searchsorted(self.sorted_hashes, hashes[ranked])
            slot = np.minimum(slot, len(self.sorted_hashes) - 1)
            column = self.columns[slot]
            same = (self.sorted_hashes[slot] == hashes) & (self.lengths[column] == n)
            for k in range(n):  # the check that makes a shared hash harmless
                same &= self.points[column, k] == batch.points[starts + k]
            found[first:end][same] = column[same]
        return found
