"""The training loop's precision: ``auto`` trains in bf16 on a CPU with native bf16 and in fp32 on
one without (the detection mocked), and every line of the run's metrics says which it was."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from modsenc.backbone.precision import resolve_precision
from modsenc.training.train_backbone import run
from tests.training.conftest import tiny_recipe, write_tiny_parallel

pytestmark = pytest.mark.slow


def _metrics(out: Path) -> list[dict]:
    lines = (out / "run" / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def _train(data: Path, out: Path, precision: str) -> dict[str, torch.Tensor]:
    # num_threads unset: the runs of one test share the process's thread count, so they compare exactly.
    recipe = tiny_recipe(data, max_steps=3, checkpoint_every=3, num_threads=None, precision=precision)
    run(recipe, out)
    return load_file(out / "backbone" / "model.safetensors")


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return write_tiny_parallel(tmp_path_factory.mktemp("precision_data") / "tiny.tsv")


@pytest.fixture(scope="module")
def explicit(tmp_path_factory, data) -> dict[str, dict[str, torch.Tensor]]:
    """Final weights of the tiny run with precision fp32 and bf16 given explicitly."""
    root = tmp_path_factory.mktemp("explicit")
    weights = {p: _train(data, root / p, p) for p in ("fp32", "bf16")}
    for p in ("fp32", "bf16"):
        assert [r["precision"] for r in _metrics(root / p)] == [p, p, p]
    return weights


@pytest.mark.parametrize(("native", "expected"), [(True, "bf16"), (False, "fp32")])
def test_auto_trains_in_bf16_only_on_a_cpu_with_native_bf16(
    tmp_path, data, explicit, cpu_reports_bf16, caplog, native, expected
) -> None:
    cpu_reports_bf16(native)
    with caplog.at_level(logging.INFO, logger="modsenc.training.loop"):
        weights = _train(data, tmp_path / "auto", "auto")
    assert f"training precision: {expected} (asked: auto)" in caplog.messages
    # The metrics say what ran: one record per step (log_every 1), each with the chosen precision.
    records = _metrics(tmp_path / "auto")
    assert [(r["step"], r["precision"]) for r in records] == [(1, expected), (2, expected), (3, expected)]
    # And it did run that way: the weights are exactly those of the explicit run, not the other's.
    other = "fp32" if expected == "bf16" else "bf16"
    assert weights.keys() == explicit[expected].keys()
    assert all(torch.equal(weights[k], explicit[expected][k]) for k in weights)
    assert not all(torch.equal(weights[k], explicit[other][k]) for k in weights)


def test_add_language_stage_metrics_record_the_precision(zoo_dir) -> None:
    """The session zoo's stages ran with the recipe default (auto) on this CPU."""
    expected = resolve_precision("auto", "cpu")
    work = zoo_dir.parent / "w-uz"
    logs = sorted(work.glob("*/run/metrics.jsonl"))
    assert [p.parent.parent.name for p in logs] == ["cla", "la", "se"]
    for path in logs:
        records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        assert records and {r["precision"] for r in records} == {expected}, path
