"""experiments/default_mode.py: its table and significance rows from per-item scores, checked by hand."""

from __future__ import annotations

import numpy as np

from experiments import default_mode


def test_table_shows_spearman_and_xsim_error_and_leaves_mono_rows_to_their_column() -> None:
    gold = {"STS uz-uz": np.array([1.0, 2.0, 3.0, 4.0])}
    rows = {
        # cosines in gold's order: Spearman 1.0; the reversed order: -1.0
        "e5 alone": {
            "STS uz-uz": np.array([0.1, 0.2, 0.3, 0.4]),
            "xsim en-uz Kardeş": np.array([1, 1, 0, 1], bool),
        },
        "modules, mono mode": {"STS uz-uz": np.array([0.4, 0.3, 0.2, 0.1])},
    }
    lines = default_mode.table("uz", rows, gold, {"e5 alone": "0.900"})
    assert lines[2] == "| model | STS uz-uz | xsim en-uz Kardeş | structure kept |"
    # xsim error = the share of sentences not found: 1 of 4 = 25.0%
    assert lines[4] == "| e5 alone | 100.0 | 25.0 | 0.900 |"
    assert lines[5] == "| modules, mono mode | -100.0 | – | – |"


def test_significance_rows_count_each_sides_finds() -> None:
    gold = {"STS uz-uz": np.arange(6, dtype=float)}
    model = {"STS uz-uz": np.arange(6, dtype=float), "xsim en-uz NTREX": np.array([1, 1, 1, 0, 1, 1], bool)}
    baseline = {
        "STS uz-uz": np.arange(6, dtype=float),
        "xsim en-uz NTREX": np.array([1, 0, 0, 1, 0, 1], bool),
    }
    lines = default_mode.significance("uz", model, baseline, gold, "e5 alone", resamples=50)
    # the same cosines: no difference, and every resample agrees
    assert lines[4] == "| STS uz-uz | +0.0 | [+0.0, +0.0] | |"
    # found only by the model: rows 1, 2, 4; only by the baseline: row 3 -> 2 fewer errors,
    # McNemar two-sided exact p for 3 of 4 = 10/16 = 0.625, shown as 0.62
    assert lines[5] == "| xsim en-uz NTREX | -2 | 3 : 1 | 0.62 |"
