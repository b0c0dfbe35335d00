"""A run killed mid-way (SIGKILL, no clean-up) and resumed ends with the same weights."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors.torch import load_file

from tests.training.conftest import OBJECTIVES, recipe_for, tiny_recipe

pytestmark = pytest.mark.slow

# Every run goes through the same script in a fresh interpreter, so all three see the same
# thread count and start-up state. KILL_AT > 0 kills the process right after that step.
SCRIPT = """
import json, os, signal, sys
from modsenc.training.train_backbone import run
from modsenc.utils.logs import configure_logging
configure_logging()  # what the CLI does: progress messages to stderr
recipe, out, resume, kill_at = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3] == "1", int(sys.argv[4])
def killer(step, metrics):
    if step == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)
run(recipe, out, resume=resume, callbacks=(killer,))
"""


def _train(recipe: dict, out: Path, resume: bool = False, kill_at: int = 0) -> subprocess.CompletedProcess:
    args = [sys.executable, "-c", SCRIPT, json.dumps(recipe), str(out), "1" if resume else "0", str(kill_at)]
    return subprocess.run(args, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("objective", list(OBJECTIVES))
def test_killed_and_resumed_run_matches_uninterrupted(
    tmp_path: Path, tiny_data: Path, objective: str
) -> None:
    recipe = recipe_for(objective, tiny_data, max_steps=6, checkpoint_every=2)

    straight = _train(recipe, tmp_path / "straight")
    assert straight.returncode == 0, straight.stderr[-2000:]

    killed = _train(recipe, tmp_path / "killed", kill_at=3)
    assert killed.returncode == -signal.SIGKILL
    checkpoints = sorted(p.name for p in (tmp_path / "killed" / "run" / "checkpoints").iterdir())
    assert checkpoints == ["step-000002"]  # step 3 ran but was never checkpointed
    assert not (tmp_path / "killed" / "backbone").exists()

    resumed = _train(recipe, tmp_path / "killed", resume=True)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resumed from" in resumed.stderr + resumed.stdout

    a = load_file(tmp_path / "straight" / "backbone" / "model.safetensors")
    b = load_file(tmp_path / "killed" / "backbone" / "model.safetensors")
    assert a.keys() == b.keys()
    # Tolerance: exact arithmetic is expected (same data order, masks, dropout RNG and threads);
    # 1e-6 only allows for a different summation order in a BLAS kernel.
    worst = max(float((a[k] - b[k]).abs().max()) for k in a)
    assert worst <= 1e-6, worst

    # The metrics log reads as one run: steps 1..6 once each, step 3 logged by the resumed run.
    log = [
        json.loads(line) for line in (tmp_path / "killed" / "run" / "metrics.jsonl").read_text().splitlines()
    ]
    assert [r["step"] for r in log] == [1, 2, 3, 4, 5, 6]
    straight_log = [
        json.loads(x) for x in (tmp_path / "straight" / "run" / "metrics.jsonl").read_text().splitlines()
    ]
    assert [round(r["loss"], 5) for r in log] == [round(r["loss"], 5) for r in straight_log]
    if objective == "emmax":  # the resumed run picked up the phase schedule: steps 3 and 5 are phase 2
        assert [("rank_infonce" in r) for r in log] == [False, False, True, False, True, False]


@pytest.mark.parametrize("objective", ["mexma", "emmax"])
def test_killed_and_resumed_bf16_run_matches_uninterrupted(
    tmp_path: Path, tiny_data: Path, objective: str
) -> None:
    """bf16 autocast changes only the GEMMs: weights, optimiser state and checkpoints stay fp32, so a
    bf16 run killed after step 3 and resumed from step 2 ends where the uninterrupted one does."""
    recipe = recipe_for(objective, tiny_data, max_steps=6, checkpoint_every=2, precision="bf16")
    straight = _train(recipe, tmp_path / "straight")
    assert straight.returncode == 0, straight.stderr[-2000:]
    killed = _train(recipe, tmp_path / "killed", kill_at=3)
    assert killed.returncode == -signal.SIGKILL
    resumed = _train(recipe, tmp_path / "killed", resume=True)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resumed from" in resumed.stderr and "training precision: bf16 (asked: bf16)" in resumed.stderr

    a = load_file(tmp_path / "straight" / "backbone" / "model.safetensors")
    b = load_file(tmp_path / "killed" / "backbone" / "model.safetensors")
    assert a.keys() == b.keys()
    assert {str(t.dtype) for t in b.values()} == {"torch.float32"}  # master weights stay fp32
    worst = max(float((a[k] - b[k]).abs().max()) for k in a)
    assert worst <= 1e-6, worst

    log = [json.loads(x) for x in (tmp_path / "killed" / "run" / "metrics.jsonl").read_text().splitlines()]
    straight_log = [
        json.loads(x) for x in (tmp_path / "straight" / "run" / "metrics.jsonl").read_text().splitlines()
    ]
    assert [(r["step"], r["precision"]) for r in log] == [(s, "bf16") for s in range(1, 7)]
    assert [round(r["loss"], 5) for r in log] == [round(r["loss"], 5) for r in straight_log]

    # The same run in fp32 ends elsewhere: bf16 did act on the steps compared above.
    fp32 = _train(
        recipe_for(objective, tiny_data, max_steps=6, checkpoint_every=2, precision="fp32"), tmp_path / "fp32"
    )
    assert fp32.returncode == 0, fp32.stderr[-2000:]
    c = load_file(tmp_path / "fp32" / "backbone" / "model.safetensors")
    assert max(float((a[k] - c[k]).abs().max()) for k in a) > 1e-4


def test_fresh_run_refuses_a_folder_with_checkpoints(tmp_path: Path, tiny_data: Path) -> None:
    recipe = tiny_recipe(tiny_data, max_steps=2, checkpoint_every=2)
    assert _train(recipe, tmp_path / "run").returncode == 0
    again = _train(recipe, tmp_path / "run")
    assert again.returncode != 0
    assert "already holds checkpoints: pass --resume" in again.stderr


def test_resume_without_checkpoint_says_so(tmp_path: Path, tiny_data: Path) -> None:
    result = _train(tiny_recipe(tiny_data, max_steps=2), tmp_path / "nothing", resume=True)
    assert result.returncode != 0
    assert "no checkpoint under" in result.stderr
