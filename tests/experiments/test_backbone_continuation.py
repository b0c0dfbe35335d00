"""experiments/backbone_continuation.py: issue 53's columns and their paired comparison, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from experiments import backbone_continuation as bc


def _outcomes(cosines: list[float], gold: list[float], correct: list[bool]) -> bc.Outcomes:
    outcomes = bc.Outcomes.__new__(bc.Outcomes)  # the scoring without a model to encode with
    outcomes.sts = {"STS en-uz": (np.array(cosines), np.array(gold))}
    outcomes.mined = {"xsim NTREX en-uz": np.array(correct)}
    return outcomes


def test_values_and_comparison_of_a_continued_backbone_against_its_start() -> None:
    gold = [0.0, 1.0, 2.0, 3.0, 4.0]
    start = _outcomes([0.1, 0.3, 0.2, 0.4, 0.5], gold, [True, False, False, True])
    arm = _outcomes([0.1, 0.2, 0.3, 0.4, 0.5], gold, [True, True, True, False])
    # start: one swap of neighbours in 5 ranks, Spearman = 1 - 6 * 2 / (5 * 24) = 0.9; arm: 1.
    assert start.values() == {"STS en-uz": pytest.approx(90.0), "xsim NTREX en-uz": 50.0}
    assert arm.values()["xsim NTREX en-uz"] == 25.0
    cells = bc.compare(arm, start, resamples=200)
    assert cells["STS en-uz"].startswith("+10.0 [")
    # only the arm right: rows 1, 2; only the start: row 3. Errors 2 -> 1; exact p of 2 of 3 = 1.
    assert cells["xsim NTREX en-uz"] == "-1 errors (p 1)"
