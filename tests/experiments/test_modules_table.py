"""experiments/modules_table.py: the continued-base option names its backbone and where its zoo goes."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments import modules_table


def test_a_base_is_a_label_and_a_backbone_folder_whose_zoo_sits_beside_the_default_one(tmp_path) -> None:
    backbone = tmp_path / "emmax" / "backbone"
    backbone.mkdir(parents=True)
    (backbone / "modsenc_backbone.json").write_text("{}")
    bases = modules_table.parse_bases([f"emmax={backbone}"], tmp_path / "runs", "x/zoo-se")
    assert bases == {"emmax": (backbone, tmp_path / "runs" / "x" / "zoo-emmax")}
    assert modules_table.base_rows("emmax") == ("emmax base alone", "modules on the emmax base")


@pytest.mark.parametrize("spec", ["emmax", "=runs/b", "emmax=/no/such/backbone"])
def test_a_base_that_is_not_label_equals_backbone_is_refused(spec) -> None:
    with pytest.raises(SystemExit, match="expected LABEL=BACKBONE"):
        modules_table.parse_bases([spec], Path("runs"), "x/zoo-se")


def test_a_base_label_that_would_reuse_a_zoo_is_refused(tmp_path) -> None:
    backbone = tmp_path / "b"
    backbone.mkdir()
    (backbone / "modsenc_backbone.json").write_text("{}")
    with pytest.raises(SystemExit, match="label 'se' is taken"):  # zoo-se is --zoo itself
        modules_table.parse_bases([f"se={backbone}"], tmp_path, "x/zoo-se")
    with pytest.raises(SystemExit, match="label 'e' is taken"):
        modules_table.parse_bases([f"e={backbone}", f"e={backbone}"], tmp_path, "x/zoo-se")


def test_a_languages_cost_is_its_stages_own_time_even_when_a_run_reused_one() -> None:
    # The SE was reused by this run (its 499 s of wall time hold the CLA's 480 s and no SE): the
    # cost still counts the SE's own 282 s.
    record = {
        "stage_metrics": {"se": {"step": 150.0}, "cla": {"step": 695.0, "dev_best_step": 680.0}},
        "stage_seconds": {"se": 282.0, "cla": 480.0},
        "wall_seconds": 499.2,
    }
    assert modules_table.module_cost(record) == ("150 / 695 (680)", "4.7 + 8.0 = 12.7 min")
    assert modules_table.module_cost({"stage_seconds": {"cla": 60.0}}) == ("0 / 0", "0.0 + 1.0 = 1.0 min")
