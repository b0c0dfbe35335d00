"""Language identification for routing: one character n-gram profile per bundle.

Off-the-shelf detectors that work offline miss languages modsenc is for (lingua has Kazakh,
Turkish and Azerbaijani but no Uzbek, Kyrgyz or Uyghur), and a jointly trained classifier (fastText
supervised, scikit-learn) would have to be retrained whenever a language is added. A multinomial
naive Bayes over character 1-3-grams has no such coupling: each language's parameters are its own
n-gram log-probabilities, estimated from that language's text alone, so ``add-language`` writes
``langid.json`` into the bundle and the router simply compares the installed profiles. That is
the whole model (a few dozen lines), which is why it is written here rather than pulled in.

External detectors (a fastText language-ID model file such as GlotLID, or lingua:
``modsenc.routing.external``) can replace it through the same ``detect`` interface.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from itertools import chain
from pathlib import Path
from typing import Protocol

import numpy as np

from modsenc.data.scripts import detect_script, script_label
from modsenc.routing.acceptance_record import AcceptanceTest
from modsenc.routing.scoring import ScoreMatrix, ScoringTable

# imported from here too, as they always were (they live in modsenc.routing.text)
from modsenc.routing.text import normalise as normalise
from modsenc.routing.text import normalised as normalised
from modsenc.routing.text import sharing_normalised as sharing_normalised
from modsenc.utils.io import atomic_write_json

LANGID_FILE = "langid.json"
ORDERS = (1, 2, 3, 4, 5)


def ngrams(text: str, orders: Sequence[int] = ORDERS) -> tuple[str, ...]:
    """Every character n-gram of ``normalise(text)`` of the given orders, but the lone spaces.
    (The normalised text has single spaces only, so no longer n-gram is all space.) The
    definition the profiles are counted with; routing cuts a batch's n-grams in arrays instead
    (``ScoringTable.score_texts``, ``modsenc.routing.grams``), to the same n-grams."""
    text = normalised(text)
    if not text.strip():
        return ()
    return tuple(chain.from_iterable(_order(text, n) for n in orders))


def _order(text: str, n: int) -> tuple[str, ...]:
    """The ``n``-grams of a normalised text (for n = 1 its characters but the spaces)."""
    if n == 1:
        return tuple(text.replace(" ", ""))
    return tuple([text[i : i + n] for i in range(len(text) - n + 1)])


class Detector(Protocol):
    def detect(self, texts: Sequence[str], candidates: Sequence[str]) -> list[tuple[str | None, float]]:
        """For each text, (language code or None, confidence in [0, 1]): one of ``candidates``, or
        another language the detector knows when the text is in none of them (open set: the
        router sends such text to the backbone), or None when it recognises nothing."""
        ...


def _subprofile(texts: Iterable[str], top_k: int, alpha: float) -> tuple[dict[str, float], dict[int, float]]:
    """Smoothed log-probabilities of the ``top_k`` most frequent n-grams (split across orders), and
    per order the log-probability of one n-gram outside them."""
    counts: dict[int, Counter[str]] = {n: Counter() for n in ORDERS}
    for text in texts:
        for gram in ngrams(text):
            counts[len(gram)][gram] += 1
    logp: dict[str, float] = {}
    unseen: dict[int, float] = {}
    per_order = max(1, top_k // len(ORDERS))
    for n, counter in counts.items():
        total = sum(counter.values())
        kept = counter.most_common(per_order)
        denominator = total + alpha * (len(kept) + 1)
        logp.update({gram: math.log((c + alpha) / denominator) for gram, c in kept})
        # Everything not kept shares one smoothed slot, so unseen n-grams cost more than rare ones.
        unseen[n] = math.log(alpha / denominator)
    return logp, unseen


class CharNgramProfile:
    """One language's character n-gram model: a sub-profile per script it is written in.

    Uzbek is written in Latin and Cyrillic. One distribution over both would give every Latin
    n-gram about half its probability, and a Latin sentence would pay about log 2 per n-gram
    against a one-script language (English won "Mening bobom arxeolog edi." at a posterior of
    1.0 that way); so each script is normalised on its own and a text is scored by the script
    that explains it best. ``sample`` holds sentences left out of the counts, on which the router
    calibrates its confidence and measures its accuracy across the installed languages.
    """

    def __init__(
        self,
        lang: str,
        scripts: dict[str, tuple[dict[str, float], dict[int, float]]],
        sample: list[str] | None = None,
        orders: Sequence[int] = ORDERS,
        acceptance: AcceptanceTest | None = None,
    ) -> None:
        if not scripts:
            raise ValueError(f"a language profile for {lang!r} needs at least one script")
        self.lang, self.scripts, self.sample = lang, scripts, list(sample or [])
        self.orders = tuple(orders)
        # the bundle's acceptance test (modsenc.routing.acceptance), calibrated when it is built
        self.acceptance = acceptance

    @classmethod
    def build(
        cls,
        lang: str,
        texts: Iterable[str] | dict[str, Iterable[str]],
        top_k: int = 150000,
        alpha: float = 0.5,
        sample: Sequence[str] = (),
    ) -> CharNgramProfile:
        """From ``texts`` (one script) or ``{script: texts}``; ``sample`` is kept for calibration."""
        by_script = texts if isinstance(texts, dict) else {"any": texts}
        scripts = {}
        for script, group in by_script.items():
            logp, unseen = _subprofile(group, top_k, alpha)
            if logp:
                scripts[script] = (logp, unseen)
        if not scripts:
            raise ValueError(f"cannot build a language profile for {lang!r} from empty text")
        return cls(lang, scripts, list(sample))

    def log_likelihood(self, grams: Sequence[str]) -> tuple[float, float]:
        """(sum of log-probabilities, share of trigrams seen) under the script that fits best."""
        best: tuple[float, float] | None = None
        for logp, unseen in self.scripts.values():
            total, trigrams, known = 0.0, 0, 0
            for gram in grams:
                value = logp.get(gram)
                if len(gram) == 3:
                    trigrams += 1
                    known += value is not None
                total += value if value is not None else unseen[len(gram)]
            scored = (total, known / trigrams if trigrams else 0.0)
            if best is None or scored[0] > best[0]:
                best = scored
        return best  # type: ignore[return-value]

    def save(self, path: str | os.PathLike) -> None:
        scripts = {
            name: {"unseen": {str(n): v for n, v in unseen.items()}, "logp": logp}
            for name, (logp, unseen) in self.scripts.items()
        }
        atomic_write_json(
            path,
            {
                "format": "modsenc-langid/2",
                "language": self.lang,
                "orders": list(ORDERS),
                "scripts": scripts,
                "sample": self.sample,
                **({"acceptance": self.acceptance.to_dict()} if self.acceptance is not None else {}),
            },
        )

    @classmethod
    def load(cls, path: str | os.PathLike) -> CharNgramProfile:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            if data.get("format") == "modsenc-langid/1":  # one distribution, no sample
                scripts = {"any": data}
            elif data.get("format") == "modsenc-langid/2":
                scripts = data["scripts"]
            else:
                raise KeyError(f"format {data.get('format')!r} (this modsenc reads modsenc-langid/1 and /2)")
            parsed = {
                name: (s["logp"], {int(n): v for n, v in s["unseen"].items()}) for name, s in scripts.items()
            }
            profile = cls(data["language"], parsed, data.get("sample"), data.get("orders", (1, 2, 3)))
            if data.get("acceptance") is not None:  # absent from a profile written before issue 48
                profile.acceptance = AcceptanceTest.from_dict(data["acceptance"])
            return profile
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as err:
            raise ValueError(f"{path} is not a modsenc language profile ({err})") from err


def build_profile(
    lang: str,
    texts: Iterable[str],
    variants: Callable[[str], list[str]] = lambda text: [text],
    sample_size: int = 300,
    max_sentences: int = 200_000,
    min_script_share: float = 0.2,
    top_k: int = 150000,
    keep_scripts: Iterable[str] = (),
) -> CharNgramProfile:
    """``lang``'s profile from all of its text, each sentence also in the other scripts
    ``variants`` gives (Uzbek: its Cyrillic transliteration), one sub-profile per script: every
    script with ``min_script_share`` of the text, and the ``keep_scripts`` (labels, "Cyrillic")
    whatever their share (a world profile's UDHR translation in Cyrillic beside much Latin text).

    ``sample_size`` distinct sentences, chosen by a hash of their text (stable across runs), are
    left out of the counts and kept, in every script, for the router's calibration.
    """
    unique = sorted(set(t for t in texts if t.strip()), key=lambda t: hashlib.sha256(t.encode()).hexdigest())
    # at most a tenth of the text: calibration must not starve a small language's profile
    sample_size = min(sample_size, len(unique) // 10)
    held, counted = unique[:sample_size], unique[sample_size : sample_size + max_sentences]
    by_script: dict[str, list[str]] = {}
    for text in counted:
        for variant in variants(text):
            by_script.setdefault(script_label(detect_script([variant])), []).append(variant)
    # A script needs a real share of the text to be modelled: a handful of Latin lines in Kazakh
    # data would make a sub-profile so small that its unseen n-grams cost little, and it would
    # then claim every Latin sentence of every language.
    total = sum(len(group) for group in by_script.values())
    keep = set(keep_scripts)
    by_script = {k: v for k, v in by_script.items() if k in keep or len(v) >= min_script_share * total}
    sample = [v for text in held for v in variants(text) if script_label(detect_script([v])) in by_script]
    return CharNgramProfile.build(lang, by_script, top_k=top_k, sample=sample)


# Temperatures tried when calibrating: the posterior is softmax(log-likelihood / T).
TEMPERATURES = (1, 2, 4, 8, 16, 32, 64, 128)


class ProfileDetector:
    """Naive Bayes over the installed languages' profiles (uniform prior), its confidence
    calibrated on the profiles' held-out samples.

    Summed over dozens of overlapping n-grams, naive Bayes log-likelihoods are far too sure of
    themselves (a posterior of 1.0 on a wrong language); dividing them by a temperature fitted to
    held-out sentences of the installed languages (the T of lowest log-loss) makes the confidence
    mean something, so ``min_confidence`` can catch the uncertain sentences.
    """

    def __init__(
        self,
        profiles: dict[str, CharNgramProfile],
        min_coverage: float = 0.3,
        temperature: float | None = None,
        shared_unseen: bool = True,
        background: Iterable[str] = (),
        world: Iterable[str] = (),
    ) -> None:
        self.profiles = profiles
        # The small world profiles (modsenc.routing.background): they compete, but do not set the
        # shared price of an unseen n-gram (ScoringTable).
        self.world = set(world)
        # Languages without a bundle (the shipped background profiles): a text one of them wins is
        # in no installed language whatever its coverage (a 30K-n-gram Chinese profile sees few
        # of a sentence's trigrams, and the coverage test would send Chinese to the fallback).
        self.background = set(background)
        # Profiles built from very different amounts of text stay comparable (ScoringTable).
        self.shared_unseen = shared_unseen
        # A text of none of the installed languages shares few trigrams with any profile.
        self.min_coverage = min_coverage
        self.calibration: dict[str, object] = {}
        self._tables: dict[tuple[str, ...], ScoringTable] = {}  # per candidate set, built on first use
        self.temperature = temperature if temperature is not None else self.calibrate()

    def add(self, profile: CharNgramProfile) -> None:
        self.profiles[profile.lang] = profile
        self._tables.clear()
        self.temperature = self.calibrate()

    def _scores_many(
        self, texts: Sequence[str], usable: Sequence[str]
    ) -> list[dict[str, tuple[float, float]]]:
        """Each text's ``{lang: (log-likelihood, trigram coverage)}`` over ``usable`` ({} when the
        text has no n-gram to score)."""
        return self._table(usable).score_texts(texts, self._orders(usable))[0]

    def _orders(self, usable: Sequence[str]) -> list[int]:
        # Every profile is scored on the n-gram orders all of them model (a bundle written by an
        # older modsenc has 1-3-grams only), so their likelihoods stay comparable.
        return sorted(set.intersection(*(set(self.profiles[lang].orders) for lang in usable)))

    def _table(self, usable: Sequence[str]) -> ScoringTable:
        key = tuple(usable)
        if key not in self._tables:
            self._tables[key] = ScoringTable(
                {lang: self.profiles[lang] for lang in usable},
                shared_unseen=self.shared_unseen,
                unpriced=self.world,
                covered=[lang for lang in usable if lang not in self.background],
            )
        return self._tables[key]

    def _matrix(self, texts: Sequence[str], usable: Sequence[str]) -> ScoreMatrix:
        """The texts scored under ``usable`` as arrays (``ScoringTable.score_matrix``)."""
        return self._table(usable).score_matrix(texts, self._orders(usable))

    def calibrate(self) -> float:
        """The temperature of lowest log-loss on the profiles' samples (1 without samples); the
        accuracy on them per language is kept in ``calibration``. Profiles without a sample (the
        shipped background profiles) compete but are not calibrated on."""
        langs = sorted(self.profiles)
        with_samples = [lang for lang in langs if self.profiles[lang].sample]
        if len(langs) < 2 or not with_samples:
            self.calibration = {"temperature": 1.0, "sentences": 0}
            return 1.0
        # every sample sentence that has n-grams: its scores under every language (a column), and
        # the row of the language it is in
        matrices = [self._matrix(self.profiles[lang].sample, langs) for lang in with_samples]
        totals = np.concatenate([m.totals for m in matrices], axis=1)
        own = np.concatenate(
            [np.full(len(m.scored), m.langs.index(lang)) for lang, m in zip(with_samples, matrices)]
        ).astype(np.int64)
        if not len(own):
            self.calibration = {"temperature": 1.0, "sentences": 0}
            return 1.0
        columns = np.arange(len(own))
        gaps = totals - totals.max(axis=0)  # <= 0, and 0 at each column's best

        def log_loss(t: float) -> float:
            return float(-(gaps[own, columns] / t - np.log(np.exp(gaps / t).sum(axis=0))).mean())

        best = min(TEMPERATURES, key=log_loss)
        right = np.argmax(totals, axis=0) == own  # the first language of the highest score
        accuracy = {
            lang: float(right[own == matrices[i].langs.index(lang)].mean())
            if len(matrices[i].scored)
            else 0.0
            for i, lang in enumerate(with_samples)
        }
        self.calibration = {"temperature": float(best), "sentences": len(own), "accuracy": accuracy}
        return float(best)

    def detect(self, texts: Sequence[str], candidates: Sequence[str]) -> list[tuple[str | None, float]]:
        return [(code, confidence) for code, confidence, _ in self.detect_fit(texts, candidates)]

    def fit_under(self, texts: Sequence[str], lang: str, candidates: Sequence[str]) -> np.ndarray:
        """Each text's log-likelihood per n-gram under ``lang``'s profile, priced as
        ``detect_fit`` over ``candidates`` prices it (-inf for a text with no n-gram): the fit
        ``detect_fit`` reports for a text it gives to ``lang``, for the cost of looking the texts
        up against ``lang``'s n-grams alone. The router skips a converted reading by it that
        could not explain the text better than the text as written."""
        usable = [name for name in candidates if name in self.profiles]
        if lang not in usable:
            raise KeyError(f"{lang!r} is not among the candidates with a profile")
        key = (*usable, "->", lang)
        if key not in self._tables:
            self._tables[key] = self._table(usable).restricted(lang)
        matrix = self._tables[key].score_matrix(texts, self._orders(usable))
        fits = np.full(len(texts), -math.inf)
        fits[matrix.scored] = matrix.totals[0] / matrix.lengths[matrix.scored]
        return fits

    def detect_fit(
        self, texts: Sequence[str], candidates: Sequence[str]
    ) -> list[tuple[str | None, float, float]]:
        """``detect``, with how well the best profile explains each text: its log-likelihood per
        n-gram (-inf for a text with none). The router compares two readings of one text by it
        (Latin Uyghur as written and converted to Cyrillic): the likelier one is what it is in."""
        usable = [lang for lang in candidates if lang in self.profiles]
        if not usable:
            return [(None, 0.0, -math.inf)] * len(texts)
        matrix = self._matrix(texts, usable)
        results: list[tuple[str | None, float, float]] = [(None, 0.0, -math.inf)] * len(texts)
        if not len(matrix.scored):
            return results
        count = len(matrix.scored)
        best = np.argmax(matrix.totals, axis=0)  # the first language of the highest score
        top = matrix.totals[best, np.arange(count)]
        posteriors = 1.0 / np.exp((matrix.totals - top) / self.temperature).sum(axis=0)
        fits = top / matrix.lengths[matrix.scored]
        coverage = matrix.shares[best, np.arange(count)]
        for j, text in enumerate(matrix.scored.tolist()):
            lang = matrix.langs[best[j]]
            posterior, fit = float(posteriors[j]), float(fits[j])
            if coverage[j] < self.min_coverage and lang not in self.background:
                results[text] = (None, posterior, fit)
            else:
                results[text] = (lang, posterior, fit)
        return results
