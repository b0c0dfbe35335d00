"""`torchrun --nproc-per-node 2` runs train-backbone end to end with gloo and writes one backbone."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from transformers import AutoModel

from tests.training.conftest import OBJECTIVES, free_port, recipe_for

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("objective", list(OBJECTIVES))
def test_torchrun_two_processes_trains_and_saves(tmp_path: Path, tiny_data: Path, objective: str) -> None:
    recipe_path = tmp_path / "tiny.yaml"
    recipe = recipe_for(objective, tiny_data, max_steps=3, checkpoint_every=2)
    recipe_path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or "torchrun"
    cmd = [
        torchrun, "--nproc-per-node", "2", "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
        "-m", "modsenc.cli", "train-backbone", "--recipe", str(recipe_path),
        "--output", str(tmp_path / "out"),
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "world_size=2" in result.stderr  # logged, by rank 0 only
    assert result.stderr.count("modsenc train-backbone:") == 1

    manifest = json.loads((tmp_path / "out" / "backbone" / "modsenc_backbone.json").read_text())
    assert manifest["world_size"] == 2
    assert manifest["steps"] == 3
    assert manifest["objective"]["name"] == recipe["objective"]["name"]
    if objective == "mexma-anchored":  # the variant's settings, as trained
        trained = manifest["objective"]
        assert (trained["anchor_weight"], trained["anchor_translation_weight"]) == (10.0, 1.0)
    assert len(manifest["fingerprint"]) == 64
    log = [json.loads(x) for x in (tmp_path / "out" / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2, 3]  # written once, by rank 0
    assert AutoModel.from_pretrained(tmp_path / "out" / "backbone").config.hidden_size == 32
