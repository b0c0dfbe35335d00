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

import json
import math
import os
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from modsenc.utils.io import atomic_write_json

LANGID_FILE = "langid.json"
ORDERS = (1, 2, 3)
# Uzbek (and Turkic Latin orthographies) write the same apostrophe with five different characters.
_APOSTROPHES = re.compile("[\u02bb\u02bc\u2018\u2019`']")
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


class Detector(Protocol):
    def detect(self, texts: Sequence[str], candidates: Sequence[str]) -> list[tuple[str | None, float]]:
        """For each text, (language code or None, confidence in [0, 1]) among ``candidates``."""
        ...


class CharNgramProfile:
    """Log-probabilities of one language's character n-grams (add-alpha smoothed, top-k kept)."""

    def __init__(self, lang: str, logp: dict[str, float], unseen: dict[int, float]) -> None:
        self.lang, self.logp, self.unseen = lang, logp, unseen

    @classmethod
    def build(
        cls, lang: str, texts: Iterable[str], top_k: int = 20000, alpha: float = 0.5
    ) -> CharNgramProfile:
        counts: dict[int, Counter[str]] = {n: Counter() for n in ORDERS}
        for text in texts:
            for gram in ngrams(text):
                counts[len(gram)][gram] += 1
        if not any(counts.values()):
            raise ValueError(f"cannot build a language profile for {lang!r} from empty text")
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
        return cls(lang, logp, unseen)

    def log_likelihood(self, grams: Sequence[str]) -> tuple[float, float]:
        """(sum of log-probabilities, share of trigrams this profile has seen)."""
        total, trigrams, known = 0.0, 0, 0
        for gram in grams:
            value = self.logp.get(gram)
            if len(gram) == 3:
                trigrams += 1
                known += value is not None
            total += value if value is not None else self.unseen[len(gram)]
        return total, (known / trigrams if trigrams else 0.0)

    def save(self, path: str | os.PathLike) -> None:
        atomic_write_json(
            path,
            {
                "format": "modsenc-langid/1",
                "language": self.lang,
                "orders": list(ORDERS),
                "unseen": {str(n): v for n, v in self.unseen.items()},
                "logp": self.logp,
            },
        )

    @classmethod
    def load(cls, path: str | os.PathLike) -> CharNgramProfile:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            return cls(data["language"], data["logp"], {int(n): v for n, v in data["unseen"].items()})
        except (json.JSONDecodeError, KeyError) as err:
            raise ValueError(f"{path} is not a modsenc language profile ({err})") from err


class ProfileDetector:
    """Naive Bayes over the installed languages' profiles (uniform prior)."""

    def __init__(self, profiles: dict[str, CharNgramProfile], min_coverage: float = 0.3) -> None:
        self.profiles = profiles
        # A text of none of the installed languages shares few trigrams with any profile.
        self.min_coverage = min_coverage

    def add(self, profile: CharNgramProfile) -> None:
        self.profiles[profile.lang] = profile

    def detect(self, texts: Sequence[str], candidates: Sequence[str]) -> list[tuple[str | None, float]]:
        usable = [lang for lang in candidates if lang in self.profiles]
        results: list[tuple[str | None, float]] = []
        for text in texts:
            grams = list(ngrams(text))
            if not grams or not usable:
                results.append((None, 0.0))
                continue
            scores = {lang: self.profiles[lang].log_likelihood(grams) for lang in usable}
            best = max(scores, key=lambda lang: scores[lang][0])
            top = scores[best][0]
            posterior = 1.0 / sum(math.exp(score - top) for score, _ in scores.values())
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


class LanguageRouter:
    """Picks the language (and so the modules) for each sentence.

    Given codes are validated and used as they are; otherwise the detector chooses among the
    installed languages, and a sentence it is unsure about (confidence below ``min_confidence``,
    or no installed language recognised) goes to ``fallback`` (by default the pivot).
    """

    def __init__(
        self, detector: Detector, languages: Sequence[str], fallback: str, min_confidence: float = 0.5
    ) -> None:
        if fallback not in languages:
            raise ValueError(f"fallback language {fallback!r} is not installed ({', '.join(languages)})")
        self.detector, self.languages, self.fallback = detector, list(languages), fallback
        self.min_confidence = min_confidence

    def route(self, texts: Sequence[str]) -> list[Detection]:
        out = []
        for detected, confidence in self.detector.detect(texts, self.languages):
            unsure = detected is None or confidence < self.min_confidence
            out.append(Detection(self.fallback if unsure else detected, confidence, detected))
        return out
