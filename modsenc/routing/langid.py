"""Language identification for routing: one character n-gram profile per bundle.

Off-the-shelf detectors that work offline miss languages modsenc is for (lingua has Kazakh,
Turkish and Azerbaijani but no Uzbek, Kyrgyz or Uyghur), and a jointly trained classifier (fastText
supervised, scikit-learn) would have to be retrained whenever a language is added. A multinomial
naive Bayes over character 1-3-grams has no such coupling: each language's parameters are its own
n-gram log-probabilities, estimated from that language's text alone, so ``add-language`` writes
``langid.json`` into the bundle and the router simply compares the installed profiles. That is
the whole model (a few dozen lines), which is why it is written here rather than pulled in.

External detectors (a fastText language-ID model file such as GlotLID, or lingua) can replace it
through the same ``detect`` interface.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from modsenc.data.orthography import APOSTROPHES
from modsenc.utils.io import atomic_write_json

LANGID_FILE = "langid.json"
ORDERS = (1, 2, 3, 4, 5)
# Uzbek (and Turkic Latin orthographies) write the same apostrophe with several characters: the
# orthographies' one set, here unified anywhere in the text (not only between letters).
_APOSTROPHES = re.compile(f"[{re.escape(APOSTROPHES)}]")
_DIGITS = re.compile(r"\d+")


def normalise(text: str) -> str:
    text = unicodedata.normalize("NFC", text).lower()
    text = _APOSTROPHES.sub("'", text)
    text = _DIGITS.sub("0", text)
    return " " + " ".join(text.split()) + " "


def ngrams(text: str, orders: Sequence[int] = ORDERS) -> Iterable[str]:
    text = normalise(text)
    for n in orders:
        for i in range(len(text) - n + 1):
            gram = text[i : i + n]
            if gram.strip():
                yield gram


@dataclass
class Detection:
    lang: str  # the language routed to (the fallback when unsure)
    confidence: float  # posterior probability of the detected language among the candidates
    detected: str | None  # what the detector said before any fallback
    unsure: bool = False  # below the router's min_confidence, or no installed language recognised


class Detector(Protocol):
    def detect(self, texts: Sequence[str], candidates: Sequence[str]) -> list[tuple[str | None, float]]:
        """For each text, (language code or None, confidence in [0, 1]) among ``candidates``."""
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
    ) -> None:
        if not scripts:
            raise ValueError(f"a language profile for {lang!r} needs at least one script")
        self.lang, self.scripts, self.sample = lang, scripts, list(sample or [])
        self.orders = tuple(orders)

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
            return cls(data["language"], parsed, data.get("sample"), data.get("orders", (1, 2, 3)))
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as err:
            raise ValueError(f"{path} is not a modsenc language profile ({err})") from err


def script_of(text: str) -> str:
    """The script most of ``text``'s letters are written in: ``Latin``, ``Cyrillic``, ``Arabic``..."""
    counts: Counter[str] = Counter()
    for ch in text:
        if ch.isalpha():
            counts[unicodedata.name(ch, "UNKNOWN").split()[0].title()] += 1
    return counts.most_common(1)[0][0] if counts else "None"


def build_profile(
    lang: str,
    texts: Iterable[str],
    variants: Callable[[str], list[str]] = lambda text: [text],
    sample_size: int = 300,
    max_sentences: int = 200_000,
    min_script_share: float = 0.2,
) -> CharNgramProfile:
    """``lang``'s profile from all of its text, each sentence also in the other scripts
    ``variants`` gives (Uzbek: its Cyrillic transliteration), one sub-profile per script.

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
            by_script.setdefault(script_of(variant), []).append(variant)
    # A script needs a real share of the text to be modelled: a handful of Latin lines in Kazakh
    # data would make a sub-profile so small that its unseen n-grams cost little, and it would
    # then claim every Latin sentence of every language.
    total = sum(len(group) for group in by_script.values())
    by_script = {k: v for k, v in by_script.items() if len(v) >= min_script_share * total}
    sample = [v for text in held for v in variants(text) if script_of(v) in by_script]
    return CharNgramProfile.build(lang, by_script, sample=sample)


# Temperatures tried when calibrating: the posterior is softmax(log-likelihood / T).
TEMPERATURES = (1, 2, 4, 8, 16, 32, 64, 128)


class _ScoringTable:
    """Every (language, script) profile's log-probabilities as the rows of one matrix over the
    n-grams any of them keeps, so a sentence costs one dictionary look-up per distinct n-gram
    instead of one per n-gram, profile and script (routing was a third of the encoding time of
    the openvino runtime: docs/benchmarks.md). Scores equal ``CharNgramProfile.log_likelihood``'s
    up to the order of the floating-point sum."""

    def __init__(self, profiles: dict[str, CharNgramProfile]) -> None:
        # Rows are named by the detector's key for the profile (the installed language), not by
        # the name inside the profile file: a misfiled profile must not rename a candidate.
        self.rows = [(lang, script) for lang, profile in profiles.items() for script in profile.scripts]
        subprofiles = [profile.scripts[script] for profile in profiles.values() for script in profile.scripts]
        self.index: dict[str, int] = {}
        for logp, _ in subprofiles:
            for gram in logp:
                self.index.setdefault(gram, len(self.index))
        self.known = np.zeros((len(self.rows), len(self.index) + 1), dtype=bool)  # last: unknown everywhere
        self.logp = np.zeros((len(self.rows), len(self.index) + 1))
        self.unseen = np.zeros((len(self.rows), max(n for _, unseen in subprofiles for n in unseen) + 1))
        for row, (logp, unseen) in enumerate(subprofiles):
            columns = np.fromiter((self.index[g] for g in logp), dtype=np.int64, count=len(logp))
            self.logp[row, columns] = np.fromiter(logp.values(), dtype=np.float64, count=len(logp))
            self.known[row, columns] = True
            for n, value in unseen.items():
                self.unseen[row, n] = value

    def scores(self, grams: Sequence[str]) -> dict[str, tuple[float, float]]:
        """``{lang: (log-likelihood, share of trigrams seen)}`` under each language's best script."""
        counts = Counter(grams)
        columns = np.fromiter(
            map(self.index.get, counts, itertools.repeat(-1)), dtype=np.int64, count=len(counts)
        )
        weights = np.fromiter(counts.values(), dtype=np.float64, count=len(counts))
        orders = np.fromiter((len(g) for g in counts), dtype=np.int64, count=len(counts))
        known = self.known[:, columns]
        values = np.where(known, self.logp[:, columns], self.unseen[:, orders])
        totals = values @ weights
        trigram_weights = weights * (orders == 3)
        trigrams = trigram_weights.sum()
        coverage = (known @ trigram_weights) / trigrams if trigrams else np.zeros(len(self.rows))
        best: dict[str, tuple[float, float]] = {}
        for (lang, _), total, share in zip(self.rows, totals.tolist(), coverage.tolist()):
            if lang not in best or total > best[lang][0]:
                best[lang] = (total, share)
        return best


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
    ) -> None:
        self.profiles = profiles
        # A text of none of the installed languages shares few trigrams with any profile.
        self.min_coverage = min_coverage
        self.calibration: dict[str, object] = {}
        self._tables: dict[tuple[str, ...], _ScoringTable] = {}  # per candidate set, built on first use
        self.temperature = temperature if temperature is not None else self.calibrate()

    def add(self, profile: CharNgramProfile) -> None:
        self.profiles[profile.lang] = profile
        self._tables.clear()
        self.temperature = self.calibrate()

    def _scores(self, text: str, usable: Sequence[str]) -> dict[str, tuple[float, float]]:
        # Every profile is scored on the n-gram orders all of them model (a bundle written by an
        # older modsenc has 1-3-grams only), so their likelihoods stay comparable.
        orders = sorted(set.intersection(*(set(self.profiles[lang].orders) for lang in usable)))
        grams = list(ngrams(text, orders))
        if not grams:
            return {}
        key = tuple(usable)
        if key not in self._tables:
            self._tables[key] = _ScoringTable({lang: self.profiles[lang] for lang in usable})
        return self._tables[key].scores(grams)

    def calibrate(self) -> float:
        """The temperature of lowest log-loss on the profiles' samples (1 without samples); the
        accuracy on them per language is kept in ``calibration``."""
        langs = sorted(self.profiles)
        scored = [(lang, self._scores(text, langs)) for lang in langs for text in self.profiles[lang].sample]
        scored = [(lang, s) for lang, s in scored if s]
        if len(langs) < 2 or not scored:
            self.calibration = {"temperature": 1.0, "sentences": 0}
            return 1.0

        def log_loss(t: float) -> float:
            total = 0.0
            for lang, s in scored:
                top = max(v[0] for v in s.values())
                total -= (s[lang][0] - top) / t - math.log(
                    sum(math.exp((v[0] - top) / t) for v in s.values())
                )
            return total / len(scored)

        best = min(TEMPERATURES, key=log_loss)
        accuracy = {
            lang: sum(max(s, key=lambda k: s[k][0]) == lang for lg, s in scored if lg == lang)
            / max(1, sum(lg == lang for lg, _ in scored))
            for lang in langs
        }
        self.calibration = {"temperature": float(best), "sentences": len(scored), "accuracy": accuracy}
        return float(best)

    def detect(self, texts: Sequence[str], candidates: Sequence[str]) -> list[tuple[str | None, float]]:
        usable = [lang for lang in candidates if lang in self.profiles]
        results: list[tuple[str | None, float]] = []
        for text in texts:
            scores = self._scores(text, usable) if usable else {}
            if not scores:
                results.append((None, 0.0))
                continue
            best = max(scores, key=lambda lang: scores[lang][0])
            top = scores[best][0]
            posterior = 1.0 / sum(math.exp((score - top) / self.temperature) for score, _ in scores.values())
            if scores[best][1] < self.min_coverage:
                results.append((None, posterior))
            else:
                results.append((best, posterior))
        return results


# ISO 639-3 -> 639-1 for the codes external detectors report (GlotLID uses e.g. ``uzn_Latn``).
_ISO3_TO_ISO1 = {
    "eng": "en",
    "deu": "de",
    "fra": "fr",
    "spa": "es",
    "rus": "ru",
    "tur": "tr",
    "uzb": "uz",
    "uzn": "uz",
    "kaz": "kk",
    "aze": "az",
    "azj": "az",
    "kir": "ky",
    "uig": "ug",
    "ita": "it",
    "por": "pt",
    "nld": "nl",
    "pol": "pl",
    "jpn": "ja",
    "zho": "zh",
    "cmn": "zh",
    "arb": "ar",
    "ara": "ar",
    "ukr": "uk",
    "tat": "tt",
}


def to_iso1(label: str) -> str | None:
    """``__label__uzn_Latn`` / ``uzb`` / ``UZ`` -> ``uz`` (None if unknown)."""
    code = label.removeprefix("__label__").split("_")[0].split("-")[0].lower()
    if len(code) == 2:
        return code
    return _ISO3_TO_ISO1.get(code)


class FastTextDetector:
    """A fastText language-ID model file (e.g. GlotLID's ``model.bin``, or lid.176.bin)."""

    def __init__(self, model_path: str | os.PathLike, k: int = 5) -> None:
        import fasttext  # noqa: PLC0415

        if not Path(model_path).is_file():
            raise FileNotFoundError(f"{model_path}: no such fastText language-ID model")
        self.model = fasttext.load_model(str(model_path))
        self.k = k

    def detect(self, texts: Sequence[str], candidates: Sequence[str]) -> list[tuple[str | None, float]]:
        wanted = set(candidates)
        # The list form of predict: fastText 0.9.3's single-text form breaks under NumPy 2.
        all_labels, all_probs = self.model.predict([" ".join(t.split()) for t in texts], k=self.k)
        results: list[tuple[str | None, float]] = []
        for labels, probs in zip(all_labels, all_probs):
            found = [(to_iso1(label), float(p)) for label, p in zip(labels, probs)]
            found = [(code, p) for code, p in found if code in wanted]
            results.append(found[0] if found else (None, 0.0))
        return results


class LinguaDetector:
    """lingua (``pip install lingua-language-detector``): offline, 75 languages, no Uzbek."""

    def __init__(self) -> None:
        try:
            from lingua import LanguageDetectorBuilder  # noqa: PLC0415
        except ImportError as err:
            raise ImportError("LinguaDetector needs `pip install lingua-language-detector`") from err
        self.detector = LanguageDetectorBuilder.from_all_languages().build()

    def detect(self, texts: Sequence[str], candidates: Sequence[str]) -> list[tuple[str | None, float]]:
        results: list[tuple[str | None, float]] = []
        for text in texts:
            values = self.detector.compute_language_confidence_values(text)
            found = [(v.language.iso_code_639_1.name.lower(), v.value) for v in values]
            found = [(code, p) for code, p in found if code in set(candidates)]
            results.append(found[0] if found else (None, 0.0))
        return results


UNSURE_POLICIES = ("fallback", "best", "refuse")


class UnsureLanguageError(ValueError):
    """``unsure="refuse"``: the router could not tell a sentence's language confidently."""


class LanguageRouter:
    """Picks the language (and so the modules) for each sentence.

    Given codes are validated and used as they are; otherwise the detector chooses among the
    installed languages. A sentence it is unsure about (confidence below ``min_confidence``, or no
    installed language recognised) is marked ``unsure`` and handled by the ``unsure`` policy:
    ``fallback`` sends it to ``fallback`` (by default the pivot), ``best`` to the best guess when
    there is one (else the fallback), ``refuse`` raises ``UnsureLanguageError`` naming it.
    """

    def __init__(
        self,
        detector: Detector,
        languages: Sequence[str],
        fallback: str,
        min_confidence: float = 0.5,
        unsure: str = "fallback",
    ) -> None:
        if fallback not in languages:
            raise ValueError(f"fallback language {fallback!r} is not installed ({', '.join(languages)})")
        if unsure not in UNSURE_POLICIES:
            raise ValueError(f"unsure must be one of {UNSURE_POLICIES}, got {unsure!r}")
        self.detector, self.languages, self.fallback = detector, list(languages), fallback
        self.min_confidence, self.unsure = min_confidence, unsure

    def route(self, texts: Sequence[str]) -> list[Detection]:
        out = []
        for i, (detected, confidence) in enumerate(self.detector.detect(texts, self.languages)):
            unsure = detected is None or confidence < self.min_confidence
            if not unsure:
                out.append(Detection(detected, confidence, detected))
                continue
            if self.unsure == "refuse":
                guess = f"best guess {detected} at {confidence:.2f}" if detected else "no installed language"
                raise UnsureLanguageError(
                    f"sentence {i}: language unsure ({guess}, below min_confidence "
                    f"{self.min_confidence}); pass its language explicitly"
                )
            lang = detected if self.unsure == "best" and detected is not None else self.fallback
            out.append(Detection(lang, confidence, detected, unsure=True))
        return out
