"""scikit-learn and matplotlib are the eval extra: without them, one error that says what to install."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from modsenc.eval.classification import LabelledText, classification
from modsenc.eval.runner import pyplot
from modsenc.utils.errors import MissingDependencyError, ModsencError


def test_classification_without_scikit_learn_names_the_extra(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "sklearn.linear_model", None)  # `import` of it raises ImportError
    train = [LabelledText("en", "a", "x"), LabelledText("en", "b", "y")]
    with pytest.raises(MissingDependencyError, match=r"pip install -e '\.\[eval\]'") as caught:
        classification(train, train, {"en": lambda texts: np.eye(len(texts))})
    assert isinstance(caught.value, (ImportError, ModsencError))


def test_heatmap_without_matplotlib_names_the_extra(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(
        MissingDependencyError, match=r"--heatmap needs matplotlib: pip install -e '\.\[eval\]'"
    ):
        pyplot()
