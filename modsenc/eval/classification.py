"""Topic classification on frozen embeddings: logistic regression (scikit-learn), accuracy.

scikit-learn is the ``eval`` extra (``pip install -e '.[eval]'``), imported when a classifier is
fitted: nothing else in modsenc needs it.

Monolingual: train and test in one language. Zero-shot cross-lingual: train on the pivot
(English), test on every other language, as in the modular-encoders paper.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from modsenc.utils.errors import MissingDependencyError

if TYPE_CHECKING:
    from sklearn.linear_model import LogisticRegression

EncodeFn = Callable[[Sequence[str]], np.ndarray]


@dataclass(frozen=True)
class LabelledText:
    lang: str
    text: str
    label: str


def _fit(train: Sequence[LabelledText], encode: EncodeFn, seed: int) -> LogisticRegression:
    try:
        from sklearn.linear_model import LogisticRegression  # noqa: PLC0415 - the eval extra
    except ImportError as err:
        raise MissingDependencyError(
            "classification needs scikit-learn: pip install -e '.[eval]' (or pip install scikit-learn)"
        ) from err
    classifier = LogisticRegression(max_iter=1000, random_state=seed)
    classifier.fit(encode([x.text for x in train]), [x.label for x in train])
    return classifier


def _accuracy(classifier: LogisticRegression, test: Sequence[LabelledText], encode: EncodeFn) -> float:
    predicted = classifier.predict(encode([x.text for x in test]))
    return float(100 * np.mean(predicted == np.asarray([x.label for x in test])))


def classification(
    train: Sequence[LabelledText],
    test: Sequence[LabelledText],
    encoders: dict[str, EncodeFn],
    pivot: str = "en",
    seed: int = 0,
) -> dict[str, dict[str, float]]:
    """{"monolingual": {lang: accuracy}, "zero_shot": {lang: accuracy}} (x100)."""
    langs = sorted({x.lang for x in test} & set(encoders))
    results: dict[str, dict[str, float]] = {"monolingual": {}, "zero_shot": {}}
    for lang in langs:
        own = [x for x in train if x.lang == lang]
        if own:
            results["monolingual"][lang] = _accuracy(
                _fit(own, encoders[lang], seed), [x for x in test if x.lang == lang], encoders[lang]
            )
    pivot_train = [x for x in train if x.lang == pivot]
    if pivot_train and pivot in encoders:
        classifier = _fit(pivot_train, encoders[pivot], seed)
        for lang in langs:
            if lang != pivot:
                results["zero_shot"][lang] = _accuracy(
                    classifier, [x for x in test if x.lang == lang], encoders[lang]
                )
    return results
