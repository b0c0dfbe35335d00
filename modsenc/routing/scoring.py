"""The detector's scoring table: every profile's log-probabilities as one sparse matrix, so a
batch of sentences is scored against every language in a few array operations."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Protocol

import numpy as np

from modsenc.routing.grams import GramBatch, GramIndex
from modsenc.routing.text import normalised


class ScriptProfiles(Protocol):
    """What a table reads of a profile (``langid.CharNgramProfile``): per script, the kept
    n-grams' log-probabilities and, per order, an unseen n-gram's."""

    scripts: dict[str, tuple[dict[str, float], dict[int, float]]]


class ScoringTable:
    """Every (language, script) profile's log-probabilities as the rows of one sparse matrix over
    the n-grams any of them keeps, so a batch of sentences costs one sparse product instead of one
    dictionary look-up per n-gram, profile and script (routing was a third of the encoding time of
    the openvino runtime: docs/benchmarks.md). Stored sparse because the shipped background
    profiles (``modsenc.routing.background``) put a few dozen rows over about a million n-grams:
    each entry holds a kept n-gram's log-probability *minus* its row's price for an unseen n-gram
    of that order, so a sentence's score is "every n-gram unseen" plus the entries it hits. Scores
    equal ``CharNgramProfile.log_likelihood``'s up to the order of the floating-point sum.

    With ``shared_unseen`` every row prices an n-gram it does not keep at the median row's price
    (per order). A profile's own price falls with the size of its text, so a profile built from
    a few hundred sentences (-10.5 nats per unseen n-gram against -14 for ten thousand) would
    otherwise win every foreign sentence, whose n-grams it has not seen, against the foreign
    language's own profile (Russian went to a small Uzbek bundle over the Russian background),
    and one built from much text would lose its own language's rarer n-grams (German, from 40K
    sentences, lost 5% of German sentences to English). The median, not the harshest price:
    Chinese and Japanese price unseen n-grams harshest of all, and at their price every kept
    n-gram counts as evidence, so the profiles that keep the most win.

    ``unpriced`` names profiles that take the shared price but do not set it: the world profiles,
    each from one UDHR translation's few thousand characters, are hundreds of rows whose own price
    is the mildest of all, and a median over them would let every kept n-gram of a large profile
    cost more than an n-gram it never saw.

    ``covered`` names the languages whose share of trigrams seen is computed (None: all); the
    others' is NaN. The detector asks it of installed languages only, and the product that gives it
    costs about a third of the scoring's time with the world profiles in the table."""

    def __init__(
        self,
        profiles: dict[str, ScriptProfiles],
        shared_unseen: bool = False,
        unpriced: Iterable[str] = (),
        covered: Iterable[str] | None = None,
        prices: np.ndarray | None = None,
    ) -> None:
        from scipy import sparse  # noqa: PLC0415  (scipy is a core dependency; imported when routing)

        self.profiles = profiles

        # Rows are named by the detector's key for the profile (the installed language), not by
        # the name inside the profile file: a misfiled profile must not rename a candidate.
        self.rows = [(lang, script) for lang, profile in profiles.items() for script in profile.scripts]
        subprofiles = [profile.scripts[script] for profile in profiles.values() for script in profile.scripts]
        # every kept n-gram once, in the order the profiles first keep it
        kept = dict.fromkeys(chain.from_iterable(logp for logp, _ in subprofiles))
        self.index: dict[str, int] = dict(zip(kept, range(len(kept))))
        self.grams = GramIndex(list(self.index))
        self.max_order = max(n for _, unseen in subprofiles for n in unseen)
        self.unseen = np.zeros((len(self.rows), self.max_order + 1))
        for row, (_, unseen) in enumerate(subprofiles):
            for n, value in unseen.items():
                self.unseen[row, n] = value
        if prices is not None:  # ``restricted``: another table's prices, row for row
            self.unseen[:] = prices[:, : self.max_order + 1]
        elif shared_unseen:
            skip = set(unpriced)
            pricing = [row for row, (lang, _) in enumerate(self.rows) if lang not in skip] or list(
                range(len(self.rows))
            )
            self.unseen[:] = np.median(self.unseen[pricing], axis=0)
        rows, columns, values = [], [], []
        for row, (logp, _) in enumerate(subprofiles):
            columns.append(np.fromiter(map(self.index.__getitem__, logp), dtype=np.int64, count=len(logp)))
            prices = self.unseen[row, np.fromiter(map(len, logp), dtype=np.int64, count=len(logp))]
            values.append(np.fromiter(logp.values(), dtype=np.float64, count=len(logp)) - prices)
            rows.append(np.full(len(logp), row, dtype=np.int64))
        shape = (len(self.rows), len(self.index))
        delta = sparse.csr_matrix(
            (np.concatenate(values), (np.concatenate(rows), np.concatenate(columns))), shape=shape
        )
        trigram = np.fromiter(map(len, self.index), dtype=np.int64, count=len(self.index)) == 3
        wanted = set(covered) if covered is not None else {lang for lang, _ in self.rows}
        self.covered_rows = np.array(
            [r for r, (lang, _) in enumerate(self.rows) if lang in wanted], dtype=np.int64
        )
        known = delta[self.covered_rows]
        known.data[:] = 1.0
        # kept as n-grams x rows only, the layout score_matrix multiplies by (one copy in memory)
        self.delta_by_gram = delta.T.tocsr()
        self.known_trigrams_by_gram = (known @ sparse.diags(trigram.astype(np.float64))).T.tocsr()
        self._sparse = sparse
        self._index_languages()

    def restricted(self, lang: str) -> ScoringTable:
        """A table of ``lang``'s rows only, each pricing an unseen n-gram as it does here: its
        ``score_matrix`` gives ``lang`` the scores this table gives it (up to the order of the
        floating-point sum), looked up against ``lang``'s n-grams instead of every profile's."""
        rows = [row for row, (name, _) in enumerate(self.rows) if name == lang]
        if not rows:
            raise KeyError(f"{lang!r} has no profile in this scoring table")
        return ScoringTable({lang: self.profiles[lang]}, covered=(), prices=self.unseen[rows])

    def _index_languages(self) -> None:
        """The languages in row order, each with its first row, and the ones written in more than
        one script with all of theirs (a text is scored by the script that fits it best)."""
        self.langs = list(dict.fromkeys(lang for lang, _ in self.rows))
        by_lang: dict[str, list[int]] = {}
        for row, (lang, _) in enumerate(self.rows):
            by_lang.setdefault(lang, []).append(row)
        self.first_rows = np.array([by_lang[lang][0] for lang in self.langs], dtype=np.int64)
        self.script_rows = [
            (group, np.array(by_lang[lang], dtype=np.int64))
            for group, lang in enumerate(self.langs)
            if len(by_lang[lang]) > 1
        ]

    def score_matrix(self, texts: Sequence[str], orders: Sequence[int]) -> ScoreMatrix:
        """Every text's log-likelihood and share of trigrams seen under each language's best
        script, over its n-grams of ``orders``, as arrays (languages x texts). The batch is cut and
        looked up in arrays (``modsenc.routing.grams``), with the n-grams and counts of ``ngrams``."""
        batch = GramBatch.cut([normalised(text) for text in texts], orders)
        lengths = batch.counts()
        scored = np.flatnonzero(lengths > 0)
        if not len(scored):
            empty = np.zeros((len(self.langs), 0))
            return ScoreMatrix(self.langs, empty, empty, lengths, scored)
        found = self.grams.find(batch)
        # the products run over the texts that have n-grams only: NumPy's sums over one column
        # and over several differ in the last bits, and the scores must not depend on the batch
        column = np.full(batch.texts, -1, dtype=np.int64)
        column[scored] = np.arange(len(scored))
        owner, count = column[batch.owner], len(scored)
        # per text and order, every n-gram (kept or not): the "all unseen" part of its score
        per_order = np.bincount(batch.order * count + owner, minlength=(self.max_order + 1) * count)
        per_order = per_order.reshape(self.max_order + 1, count).astype(np.float64)
        kept = found >= 0
        # texts x n-grams times n-grams x rows: the product then visits only the n-grams the
        # batch has, not every n-gram of every profile (a few million with the world profiles);
        # each text's sum runs over its n-grams in column order either way
        counts = self._sparse.csr_matrix(
            (np.ones(int(kept.sum())), (owner[kept], found[kept])), shape=(count, len(self.index))
        )
        totals = self.unseen @ per_order + (counts @ self.delta_by_gram).toarray().T
        trigrams = per_order[3] if self.max_order >= 3 else np.zeros(count)
        seen = (counts @ self.known_trigrams_by_gram).toarray().T
        shares = np.full(totals.shape, np.nan)
        shares[self.covered_rows] = np.divide(seen, trigrams, out=np.zeros_like(seen), where=trigrams > 0)
        # each language's best script: the first of its rows with the highest score
        best = totals[self.first_rows].copy()
        share = shares[self.first_rows].copy()
        for group, rows in self.script_rows:
            pick = np.argmax(totals[rows], axis=0)
            best[group] = totals[rows][pick, np.arange(count)]
            share[group] = shares[rows][pick, np.arange(count)]
        return ScoreMatrix(self.langs, best, share, lengths, scored)

    def score_texts(
        self, texts: Sequence[str], orders: Sequence[int]
    ) -> tuple[list[dict[str, tuple[float, float]]], np.ndarray]:
        """For each text, ``{lang: (log-likelihood, share of trigrams seen)}`` under each
        language's best script over its n-grams of ``orders`` ({} when it has none), and how many
        n-grams it has (``score_matrix`` as dictionaries)."""
        matrix = self.score_matrix(texts, orders)
        results: list[dict[str, tuple[float, float]]] = [{} for _ in texts]
        for j, text in enumerate(matrix.scored.tolist()):
            results[text] = dict(
                zip(self.langs, zip(matrix.totals[:, j].tolist(), matrix.shares[:, j].tolist()))
            )
        return results, matrix.lengths


@dataclass(frozen=True)
class ScoreMatrix:
    """``ScoringTable.score_matrix``: rows are ``langs``, columns the texts that have n-grams
    (``scored``: their positions in the batch); ``lengths``: every text's number of n-grams."""

    langs: list[str]
    totals: np.ndarray  # log-likelihood under each language's best script
    shares: np.ndarray  # the share of the text's trigrams that script's profile keeps
    lengths: np.ndarray
    scored: np.ndarray
