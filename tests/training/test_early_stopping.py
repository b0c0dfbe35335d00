"""Early stopping: a stage stops on a worsening dev score and keeps its best weights."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from modsenc.backbone import Backbone
from modsenc.data.batching import LengthBucketBatchSampler
from modsenc.objectives.sentence_pairs import SentencePairObjective, pair_examples
from modsenc.training import loop
from modsenc.training.configs import SEConfig, TrainingConfig
from modsenc.training.early_stopping import EarlyStopping


def test_record_keeps_the_best_and_stops_after_patience() -> None:
    stopper = EarlyStopping(evaluate=lambda: 0.0, every=5, patience=2)
    weights = {"w": torch.tensor([1.0])}
    assert not stopper.record(5, 0.3, weights)
    weights["w"] += 1  # the kept copy must not follow later updates
    assert not stopper.record(10, 0.5, weights)  # best: 2.0 at step 10
    weights["w"] += 1
    assert not stopper.record(15, 0.5, weights)  # equal is no improvement: 1 bad
    assert stopper.record(20, 0.4, weights)  # 2 bad: stop
    assert (stopper.best_step, stopper.best_score, stopper.best_state["w"].item()) == (10, 0.5, 2.0)
    restored = EarlyStopping(evaluate=lambda: 0.0, every=5, patience=2)
    restored.load_state_dict(stopper.state_dict())
    assert restored.history == [(5, 0.3), (10, 0.5), (15, 0.5), (20, 0.4)] and restored.stopped
    assert stopper.due(10, 12) and stopper.due(12, 12) and not stopper.due(11, 12)
    with pytest.raises(ValueError, match="patience"):
        EarlyStopping(evaluate=lambda: 0.0, every=5, patience=0)


def test_stage_stops_on_worsening_dev_loss_and_keeps_the_best_checkpoint(
    tmp_path: Path, tiny_backbone_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backbone = Backbone.from_pretrained(tiny_backbone_dir, attention="sdpa")
    words = "bu bir uy mushuk it daraxt katta kichik".split()
    texts = [" ".join(words[i : i + 3]) for i in range(6)] * 4
    examples = pair_examples(backbone.tokenize, "paraphrase", texts, [None] * len(texts), texts[::-1])
    # Scripted dev losses, lowest at the 2nd evaluation (step 2); then two worse ones: stop at step 4.
    losses = iter([0.9, 0.4, 0.6, 0.7, 0.1, 0.1])
    monkeypatch.setattr(loop, "dev_loss", lambda *args: next(losses))
    cfg = SEConfig(epochs=None, max_steps=10, batch_size=4, lr=1e-2, eval_every=1, patience=2)
    training = TrainingConfig(checkpoint_every=1, keep_checkpoints=20, log_every=1, precision="fp32")
    sampler = LengthBucketBatchSampler([e.length for e in examples], 4, seed=0)
    metrics = loop.fit_stage(
        backbone,
        SentencePairObjective(),
        examples,
        sampler,
        cfg,
        training,
        tmp_path / "run",
        False,
        0,
        trainable_only=True,
        dev_examples=examples[:4],
    )
    assert (metrics["dev_best_step"], metrics["stopped_early"], metrics["dev_evaluations"]) == (2, 1, 4)
    assert metrics["dev_best_score"] == pytest.approx(-0.4)
    checkpoints = sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir())
    assert checkpoints[-1] == "step-000004"  # stopped: no step 5
    best = load_file(tmp_path / "run" / "checkpoints" / "step-000002" / "model.safetensors")
    state = {k: v for k, v in backbone.state_dict().items()}
    assert all(torch.equal(state[k.removeprefix("backbone.")], v) for k, v in best.items())
    step4 = load_file(tmp_path / "run" / "checkpoints" / "step-000004" / "model.safetensors")
    assert not all(torch.equal(best[k], step4[k]) for k in best)  # training moved on, and was undone
