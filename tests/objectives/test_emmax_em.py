"""EMMA-X's EM loop through phase 2 on a synthetic case (issue 22): a bag-of-tokens encoder whose
geometry is known (translations share a token mapping, paraphrases share all but one token,
unrelated sentences share none), trained by the objective for a few hundred steps in a second.
The E-step must keep more than one rank populated among the candidates it labels."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from modsenc.backbone.encoder import pool
from modsenc.backbone.packing import PackedBatch
from modsenc.data.readers import TranslationPair
from modsenc.objectives.emmax import EMMAXConfig, EMMAXObjective

VOCAB = 120
ANISOTROPY = 1.0


class BagOfTokensEncoder(nn.Module):
    """The smallest encoder the objective can train: a sentence is space-separated token ids and its
    vector the mean of learnable token vectors (the interface of modsenc's Backbone it uses)."""

    position_offset = 0

    def __init__(self, dim: int = 32, seed: int = 0) -> None:
        super().__init__()
        self.hidden_size = dim
        self.tokens = nn.Embedding(2 * VOCAB, dim)
        with torch.no_grad():
            g = torch.Generator().manual_seed(seed)
            # A shared component makes unrelated sentences' cosine about 0.7, as in a pretrained
            # encoder's anisotropic space (multilingual-e5's unrelated pairs sit near 0.75).
            common = torch.randn(dim, generator=g)
            self.tokens.weight.copy_(torch.randn(2 * VOCAB, dim, generator=g) + ANISOTROPY * common)

    def tokenize(self, texts, max_length=None):
        return [[int(t) for t in text.split()] for text in texts]

    def forward(self, batch: PackedBatch) -> torch.Tensor:
        return self.tokens(batch.input_ids)

    def sentence_embedding(self, hidden: torch.Tensor, batch: PackedBatch) -> torch.Tensor:
        return pool(hidden, batch, "mean")


def _data(seed: int = 0):
    rng = np.random.default_rng(seed)
    sentences = [rng.choice(VOCAB, size=5, replace=False) for _ in range(300)]
    pairs = [
        TranslationPair("en", " ".join(map(str, s)), "xx", " ".join(str(t + VOCAB) for t in s))
        for s in sentences[:200]
    ]
    paraphrases = []
    for s in sentences[200:]:
        other = s.copy()
        other[0] = (other[0] + 1) % VOCAB  # the paraphrase differs in one token of five
        paraphrases.append((" ".join(map(str, s)), " ".join(map(str, other))))
    return pairs, paraphrases


def _train(steps: int = 240, seed: int = 0, **options):
    torch.manual_seed(seed)
    encoder = BagOfTokensEncoder(seed=seed)
    pairs, paraphrases = _data(seed)
    objective = EMMAXObjective(
        encoder,
        EMMAXConfig(phase1_steps=40, phase2_every=2, queue_size=64, **options),
        non_parallel=paraphrases,
    )
    objective.train()
    examples = objective.prepare(pairs, encoder, 16)
    # The training loop gives every parameter the recipe's learning rate, a fine-tuning one that
    # moves the GMM's μ and log σ by about 2e-5 a step; the encoder here moves fast (lr 0.02), so
    # the case has what a real run has: an encoder that moves far more than gradients move the GMM.
    optimizer = torch.optim.Adam(
        [{"params": encoder.parameters(), "lr": 0.02}, {"params": objective.gmm.parameters(), "lr": 2e-5}]
    )
    rng = np.random.default_rng(seed)
    log = []
    for _ in range(steps):
        chosen = rng.choice(len(examples), size=16, replace=False)
        batch = objective.collate([examples[i] for i in chosen], rng, encoder)
        out = objective(encoder, batch)
        optimizer.zero_grad()
        out.loss.backward()
        optimizer.step()
        log.append((batch.phase, out))
    return log


@pytest.fixture(scope="module")
def phase2_log():
    return [out for phase, out in _train() if phase == 2]


def test_phase2_e_step_keeps_ranks_apart(phase2_log):
    """Each phase-2 step labels 16 queries × (16 keys + up to 64 queued) candidates. In this batch's
    own keys the truth is known: the diagonal are paraphrases (one token of five changed), the rest
    unrelated sentences. Through the second half of phase 2 the E-step (c*_G, the labels the encoder
    learns from) must keep more than one rank populated, put the unrelated in the last rank and the
    paraphrases closer. The code before issue 22 put about every candidate in rank 1 here (unrelated
    ones in the last rank: 0.0%) with a GMM loss of hundreds of nats per item."""
    assert len(phase2_log) == 100  # 40 phase-1 batches, then every other one of 200
    own = torch.eye(16, dtype=torch.bool)
    unrelated_last, paraphrase_closer = [], []
    for out in phase2_log[50:]:
        ranks = out.extras["estep_gmm"]
        populated = int((torch.bincount(ranks.flatten(), minlength=4) > 0).sum())
        assert populated >= 2, torch.bincount(ranks.flatten(), minlength=4).tolist()
        block = ranks[:, :16]
        unrelated_last.append(float((block[~own] == 3).float().mean()))
        paraphrase_closer.append(float((block[own] < 3).float().mean()))
        assert out.metrics["rank_infonce"] > 0
        assert out.metrics["gmm"] < 1.0  # nats per labelled difference
    assert np.mean(unrelated_last) > 0.9
    assert np.mean(paraphrase_closer) > 0.7


def test_phase2_logs_rank_histograms_and_anchors(phase2_log):
    metrics = phase2_log[-1].metrics
    ranks = phase2_log[-1].extras["estep_gmm"]
    own = torch.zeros_like(ranks, dtype=torch.bool)
    own[torch.arange(16), torch.arange(16)] = True
    shares = torch.bincount(ranks[~own], minlength=4).float() / (~own).sum()
    for r in range(4):
        assert metrics[f"estep_gmm_r{r + 1}"] == pytest.approx(float(shares[r]))
    assert sum(metrics[f"estep_anchor_r{r + 1}"] for r in range(4)) == pytest.approx(1.0)
    # Phase 2 leaves the anchors where phase 1 put them; the phase-1 steps between move them.
    assert all(out.metrics["anchor_drift"] == 0.0 for out in phase2_log)
    assert metrics["anchor_1"] > metrics["anchor_4"]


def test_gmm_track_moments_by_value():
    from modsenc.objectives.losses.gmm_relation import GaussianMixtureRelation

    gmm = GaussianMixtureRelation(2, ranks=3)
    with torch.no_grad():
        gmm.mu.zero_()
        gmm.log_sigma.zero_()  # σ = 1
    z = torch.tensor([[1.0, 2.0], [3.0, 2.0], [5.0, 5.0]])
    ranks = torch.tensor([0, 0, 2])  # rank 0: mean (2, 2), variance (1, 0); rank 2 has one item
    moved = gmm.track_moments(z, ranks, momentum=0.75, min_sigma=0.1)
    assert moved.tolist() == [True, False, False]
    assert gmm.mu[0].tolist() == pytest.approx([0.5, 0.5])
    # σ² = 0.75·1 + 0.25·var, the variance floored at min_sigma² = 0.01.
    assert torch.exp(2 * gmm.log_sigma[0]).tolist() == pytest.approx([1.0, 0.75 + 0.25 * 0.01])
    assert gmm.mu[2].tolist() == [0.0, 0.0] and gmm.log_sigma[2].tolist() == [0.0, 0.0]


def test_without_moment_tracking_the_e_step_labels_unrelated_as_related():
    """The switch that fixes the collapse, measured: with gmm_momentum 1 (the GMM learns by gradient
    only, as before issue 22) the E-step puts under a fifth of the unrelated candidates in the last
    rank through phase 2's second half."""
    log = [out for phase, out in _train(gmm_momentum=1.0) if phase == 2]
    own = torch.eye(16, dtype=torch.bool)
    shares = [float((out.extras["estep_gmm"][:, :16][~own] == 3).float().mean()) for out in log[50:]]
    assert np.mean(shares) < 0.2
