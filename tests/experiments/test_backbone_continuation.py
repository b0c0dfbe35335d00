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


def _full(sts: dict[str, list[float]], mined: dict[str, list[bool]]) -> bc.Outcomes:
    outcomes = bc.Outcomes.__new__(bc.Outcomes)
    gold = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    outcomes.sts = {name: (np.array(cos), gold) for name, cos in sts.items()}
    outcomes.mined = {name: np.array(ok) for name, ok in mined.items()}
    return outcomes


def test_done_when_criteria_counted_by_hand() -> None:
    exact, swapped = [0.1, 0.2, 0.3, 0.4, 0.5], [0.2, 0.1, 0.3, 0.4, 0.5]  # Spearman 100 and 90
    start = _full(
        {"STS en-en": exact, "STS uz-uz": swapped, "STS en-uz": exact},
        {
            "xsim Kardeş en-uz": [True, False],
            "xsim NTREX uz-en": [True, True],
            "xsim PUD en-de": [True, True],
        },
    )
    arm = _full(
        {"STS en-en": swapped, "STS uz-uz": exact, "STS en-uz": exact},
        {
            "xsim Kardeş en-uz": [True, True],
            "xsim NTREX uz-en": [True, False],
            "xsim PUD en-de": [True, True],
        },
    )
    # en-en drops 10 (> 0.3); uz-uz rises 10; en-uz equal, so not above; uz mining: 1 error before
    # (Kardeş), 1 after (NTREX), so not fewer; PUD 0 and 0, so no more.
    assert bc.criteria(arm, start) == {
        "STS en-en within 0.3": False,
        "STS uz-uz >= start": True,
        "STS en-uz > start": False,
        "xsim uz fewer errors": False,
        "xsim PUD no more errors": True,
    }
