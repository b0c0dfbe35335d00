"""EMS, EMMA-X and the LaBSE-style contrastive baseline: their losses on hand-computed cases, the
switches, the GMM / encoder gradient separation, pooling (CLS and mean) and the recipe options."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from modsenc.backbone import PackedBatch
from modsenc.backbone.encoder import pool
from modsenc.data.readers import TranslationPair
from modsenc.objectives import ObjectiveData, build_objective
from modsenc.objectives.contrastive import ContrastiveObjective
from modsenc.objectives.emmax import EMMAXConfig, EMMAXObjective, mixup_rank
from modsenc.objectives.ems import EMSConfig, EMSObjective
from modsenc.objectives.losses.additive_margin import AdditiveMarginSoftmaxLoss
from modsenc.objectives.losses.gmm_relation import GaussianMixtureRelation
from modsenc.objectives.losses.infonce_alignment import InfoNCEAlignmentLoss
from modsenc.objectives.losses.rank_infonce import RankInfoNCELoss
from modsenc.objectives.losses.xtr import XTRHead, XTRLoss, bag_of_tokens
from modsenc.objectives.registry import objective_options


def _lse(*xs: float) -> float:
    return math.log(sum(math.exp(x) for x in xs))


def _silu(x: float) -> float:
    return x / (1 + math.exp(-x))


def _pairs(corpus: list[str], n: int = 6) -> list[TranslationPair]:
    langs = ["de", "uz"]
    return [TranslationPair("en", corpus[2 * i], langs[i % 2], corpus[2 * i + 1]) for i in range(n)]


def _batch(objective, backbone, corpus, n: int = 6, seed: int = 0):
    examples = objective.prepare(_pairs(corpus, n), backbone, 32)
    return objective.collate(examples, np.random.default_rng(seed), backbone)


# --------------------------------------------------------------------------- pooling
def test_mean_pool_and_cls_by_hand():
    """The objectives pool through Backbone.sentence_embedding, i.e. modsenc.backbone.encoder.pool."""
    batch = PackedBatch.from_ids([[5, 6], [7, 8, 9]])
    hidden = torch.tensor([[1.0, 2.0], [3.0, 4.0], [0.0, 0.0], [6.0, 3.0], [3.0, 3.0]])
    assert torch.allclose(pool(hidden, batch, "mean"), torch.tensor([[2.0, 3.0], [3.0, 2.0]]))
    assert torch.equal(pool(hidden, batch, "cls"), torch.tensor([[1.0, 2.0], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="pooling must be one of"):
        pool(hidden, batch, "max")


# --------------------------------------------------------------------------- XTR
def test_bag_of_tokens_excludes_special_tokens():
    batch = PackedBatch.from_ids([[0, 5, 7, 5, 2], [0, 2]])
    bags = bag_of_tokens(batch, vocab_size=8, special_ids={0, 2})
    expected = torch.zeros(2, 8)
    expected[0, 5], expected[0, 7] = 2 / 3, 1 / 3
    assert torch.allclose(bags, expected)  # the all-special sentence has an all-zero row


def test_bag_of_tokens_normalises_each_sentence_by_its_own_length():
    batch = PackedBatch.from_ids([[0, 5, 7, 5, 2], [0, 6, 2], [0, 2], [0, 7, 7, 6, 6, 2]])
    bags = bag_of_tokens(batch, vocab_size=8, special_ids={0, 2})
    expected = torch.zeros(4, 8)
    expected[0, 5], expected[0, 7] = 2 / 3, 1 / 3
    expected[1, 6] = 1.0  # one token: the whole mass
    expected[3, 6], expected[3, 7] = 0.5, 0.5
    assert torch.equal(bags, expected)


def test_xtr_head_weight_initialisation_and_errors():
    embedding = torch.randn(5, 3)
    head = XTRHead(hidden_size=3, vocab_size=5, init_embedding=embedding)
    assert torch.equal(head.w_emb, embedding) and head.w_emb.data_ptr() != embedding.data_ptr()  # a copy
    with pytest.raises(ValueError, match=r"init_embedding must be \(5, 3\), got \(4, 3\)"):
        XTRHead(hidden_size=3, vocab_size=5, init_embedding=embedding[:4])
    torch.manual_seed(0)
    fresh = XTRHead(hidden_size=64, vocab_size=1000).w_emb  # no embedding given: N(0, 0.02)
    assert fresh.std().item() == pytest.approx(0.02, rel=0.02) and abs(fresh.mean().item()) < 1e-3
    with pytest.raises(ValueError, match="^this XTR head has a language embedding: pass target_language$"):
        XTRHead(hidden_size=3, vocab_size=5, num_languages=2, language_dim=2)(torch.ones(1, 3))
    with pytest.raises(ValueError, match="^a tied XTR head needs the backbone's input embedding matrix$"):
        XTRHead(hidden_size=3, vocab_size=5, tied=True)(torch.ones(1, 3))
    with pytest.raises(ValueError, match=r"log_q \(1, 5\) and target \(1, 4\) differ in shape"):
        XTRLoss()(torch.zeros(1, 5), torch.zeros(1, 4))


def _hand_head() -> XTRHead:
    head = XTRHead(hidden_size=2, vocab_size=3, num_languages=2, language_dim=1)
    with torch.no_grad():
        head.language_embedding.weight.copy_(torch.tensor([[1.0], [-1.0]]))  # W_la
        head.fc.weight.copy_(torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]]))  # input [u_la, u]
        head.fc.bias.copy_(torch.tensor([0.0, 0.5]))
        head.w_emb.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, -1.0]]))
    return head


def test_xtr_kl_against_a_known_bag_of_words_with_the_language_embedding():
    head = _hand_head()
    u = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    p = torch.tensor([[0.0, 2 / 3, 1 / 3], [0.0, 2 / 3, 1 / 3]])
    # Target language 1: u_la = -1, W_fc [u_la ⊕ u] + b = [-1 + 1, 0 + 0.5] = [0, 0.5];
    # swish -> [0, silu(0.5)]; logits = W_emb h = [0, silu(0.5), -silu(0.5)].
    # Target language 0: u_la = +1 -> [2, 0.5] -> logits [silu(2), silu(0.5), -silu(0.5)].
    expected = []
    for first in (0.0, _silu(2.0)):
        logits = [first, _silu(0.5), -_silu(0.5)]
        log_q = [x - _lse(*logits) for x in logits]
        expected.append(sum(pi * (math.log(pi) - lq) for pi, lq in zip([0, 2 / 3, 1 / 3], log_q) if pi))
    log_q = head(u, torch.tensor([1, 0]))
    per_item = [XTRLoss()(log_q[i : i + 1], p[i : i + 1]).item() for i in range(2)]
    assert per_item == pytest.approx(expected, abs=1e-6)
    assert XTRLoss()(log_q, p).item() == pytest.approx(sum(expected), abs=1e-6)  # a sum, not a mean
    assert expected[0] != pytest.approx(expected[1], abs=1e-3)  # the target language matters


def test_xtr_head_without_language_embedding_takes_u_alone():
    head = XTRHead(hidden_size=2, vocab_size=3, num_languages=0)
    assert head.language_embedding is None and head.input_dim == 2
    with torch.no_grad():
        head.fc.weight.copy_(torch.eye(2))
        head.fc.bias.zero_()
        head.w_emb.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]))
    # h = silu([1, 2]); logits = [silu(1), silu(2), 0].
    logits = [_silu(1.0), _silu(2.0), 0.0]
    expected = [x - _lse(*logits) for x in logits]
    assert head(torch.tensor([[1.0, 2.0]]))[0].tolist() == pytest.approx(expected, abs=1e-6)


def test_ems_switches_shape_the_head(tiny_xlmr):
    d, vocab = tiny_xlmr.hidden_size, tiny_xlmr.word_embeddings.num_embeddings
    full = EMSObjective(tiny_xlmr, EMSConfig(), languages=["de", "en", "uz"])
    assert full.head.input_dim == d + 128 and full.head.language_embedding.num_embeddings == 3
    assert full.head.w_emb.shape == (vocab, d)
    assert full.head.w_emb.data_ptr() != tiny_xlmr.word_embeddings.weight.data_ptr()
    assert len(full.contrastive_loss.projection) == 3  # d -> d, ReLU, d -> 128
    assert full.contrastive_loss.projection[2].out_features == 128

    no_lang = EMSObjective(tiny_xlmr, EMSConfig(language_embedding=False))  # no languages needed
    assert no_lang.head.input_dim == d and no_lang.head.language_embedding is None

    tied = EMSObjective(tiny_xlmr, EMSConfig(tied_embedding=True), languages=["en"])
    assert tied.head.w_emb is None
    assert not any(p.shape == (vocab, d) for p in tied.parameters())

    assert EMSObjective(tiny_xlmr, EMSConfig(xtr=False), languages=["en"]).head is None
    assert EMSObjective(tiny_xlmr, EMSConfig(contrastive="none"), languages=["en"]).contrastive_loss is None
    ams = EMSObjective(tiny_xlmr, EMSConfig(contrastive="ams"), languages=["en"])
    assert isinstance(ams.contrastive_loss, AdditiveMarginSoftmaxLoss)
    assert not any(p.ndim == 2 and p.shape == (d, d) for p in ams.parameters())  # no MLP
    with pytest.raises(ValueError, match="no loss"):
        EMSConfig(xtr=False, contrastive="none")
    with pytest.raises(ValueError, match="objective.ems.languages"):
        EMSObjective(tiny_xlmr, EMSConfig())


def test_ems_tied_embedding_shares_storage_with_the_input_embeddings(tiny_xlmr, corpus):
    """With the tie, the XTR projection *is* the input embedding matrix: a row of a token that never
    occurs in the batch gets a gradient only through the projection, and only when tied."""
    grads = {}
    for tied in (True, False):
        tiny_xlmr.zero_grad()
        objective = EMSObjective(
            tiny_xlmr, EMSConfig(tied_embedding=tied, contrastive="none"), languages=["de", "en", "uz"]
        )
        batch = _batch(objective, tiny_xlmr, corpus)
        objective(tiny_xlmr, batch).loss.backward()
        unused = sorted(
            set(range(tiny_xlmr.word_embeddings.num_embeddings)) - set(batch.clean.input_ids.tolist())
        )
        grads[tied] = tiny_xlmr.word_embeddings.weight.grad[unused].abs().sum().item()
    assert grads[True] > 0
    assert grads[False] == 0


def test_ems_loss_is_xtr_plus_contrastive_over_the_batch(tiny_xlmr, corpus):
    torch.manual_seed(0)
    objective = EMSObjective(tiny_xlmr, EMSConfig(), languages=["de", "en", "uz"])
    batch = _batch(objective, tiny_xlmr, corpus, n=6)
    out = objective(tiny_xlmr, batch)
    u, v = out.extras["u"], out.extras["v"]
    # The loss recomputed from its definition: Σ_pairs KL(p_B ‖ q_u) + KL(p_A ‖ q_v), over |B|,
    # plus the summed two-direction InfoNCE of the projections at T = 0.1.
    bags = bag_of_tokens(batch.clean, objective.vocab_size, objective.special_ids)
    lang_ids = {"de": 0, "en": 1, "uz": 2}
    pairs = _pairs(corpus, 6)
    kl = 0.0
    for i, pair in enumerate(pairs):
        for vec, target_lang, bag in ((u[i], pair.lang_b, bags[6 + i]), (v[i], pair.lang_a, bags[i])):
            log_q = objective.head(vec[None], torch.tensor([lang_ids[target_lang]]))[0]
            kl += (bag * (torch.log(bag.clamp_min(1e-30)) - log_q))[bag > 0].sum().item()
    proj = objective.contrastive_loss.projection
    contrastive = 2 * InfoNCEAlignmentLoss(0.1)(proj(u), proj(v)).item()
    assert out.metrics["xtr"] == pytest.approx(kl / 6, rel=1e-5)
    assert out.metrics["contrastive"] == pytest.approx(contrastive, rel=1e-5)
    assert out.loss.item() == pytest.approx(kl / 6 + contrastive, rel=1e-5)

    no_xtr = EMSObjective(tiny_xlmr, EMSConfig(xtr=False), languages=["en"])
    out = no_xtr(tiny_xlmr, _batch(no_xtr, tiny_xlmr, corpus))
    assert out.metrics["xtr"] == 0.0 and out.loss.item() == pytest.approx(out.metrics["contrastive"])
    no_c = EMSObjective(tiny_xlmr, EMSConfig(contrastive="none"), languages=["de", "en", "uz"])
    out = no_c(tiny_xlmr, _batch(no_c, tiny_xlmr, corpus))
    assert out.metrics["contrastive"] == 0.0 and out.loss.item() == pytest.approx(out.metrics["xtr"])


def test_ems_refuses_pairs_whose_language_is_not_in_its_table(tiny_xlmr, corpus):
    objective = EMSObjective(tiny_xlmr, EMSConfig(languages=["en", "de"]))
    with pytest.raises(ValueError, match=r"language 'uz', which objective.ems.languages"):
        objective.prepare(_pairs(corpus, 4), tiny_xlmr, 32)
    nameless = [TranslationPair("en", "a b", "", "c d")]
    with pytest.raises(ValueError, match="no language code"):
        objective.prepare(nameless, tiny_xlmr, 32)


# --------------------------------------------------------------------------- AMS
def test_additive_margin_softmax_with_a_known_margin():
    s, m = 10.0, 0.3
    x = torch.tensor([[1.0, 0.0], [0.0, 2.0]])  # normalised: [1, 0], [0, 1]
    y = torch.tensor([[1.0, 0.0], [0.6, 0.8]])
    # cos(x_i, y_j) = [[1, 0.6], [0, 0.8]]; the positive (diagonal) loses the margin.
    forward = [_lse(s * (1 - m), s * 0.6) - s * (1 - m), _lse(s * 0.0, s * (0.8 - m)) - s * (0.8 - m)]
    backward = [_lse(s * (1 - m), s * 0.0) - s * (1 - m), _lse(s * 0.6, s * (0.8 - m)) - s * (0.8 - m)]
    expected = sum(forward) / 2 + sum(backward) / 2  # LaBSE: L + L'
    assert AdditiveMarginSoftmaxLoss(m, s)(x, y).item() == pytest.approx(expected, abs=1e-5)
    no_margin = AdditiveMarginSoftmaxLoss(0.0, s)(x, y).item()
    assert no_margin == pytest.approx(0.072730, abs=1e-5) and no_margin < expected - 0.5
    with pytest.raises(ValueError, match="needs a positive for every anchor"):
        AdditiveMarginSoftmaxLoss(m, s).margin_cosine(torch.cat([x, x]), y)


def test_additive_margin_softmax_hard_negatives_join_the_x_side_denominators_only():
    s, m = 10.0, 0.3
    x = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    y = torch.tensor([[1.0, 0.0], [0.6, 0.8]])
    negatives = torch.tensor([[0.0, 3.0]])  # normalised [0, 1]: cos with x = [0, 1]
    # x_i against y_0, y_1, y⁻_0: [[1 - m, 0.6, 0], [0, 0.8 - m, 1]]; y against x as without negatives
    forward = [
        _lse(s * (1 - m), s * 0.6, s * 0.0) - s * (1 - m),
        _lse(s * 0.0, s * (0.8 - m), s * 1.0) - s * (0.8 - m),
    ]
    backward = [_lse(s * (1 - m), s * 0.0) - s * (1 - m), _lse(s * 0.6, s * (0.8 - m)) - s * (0.8 - m)]
    expected = sum(forward) / 2 + sum(backward) / 2
    assert AdditiveMarginSoftmaxLoss(m, s)(x, y, negatives).item() == pytest.approx(expected, abs=1e-5)
    # the second x is nearer its hard negative than its translation: that raises the loss
    assert expected > AdditiveMarginSoftmaxLoss(m, s)(x, y).item() + 1.0
    with pytest.raises(ValueError, match=r"negatives \(1, 3\) and y \(2, 2\) differ in width"):
        AdditiveMarginSoftmaxLoss(m, s)(x, y, torch.ones(1, 3))


def test_additive_margin_softmax_errors():
    with pytest.raises(ValueError, match="margin must be >= 0, got -0.1"):
        AdditiveMarginSoftmaxLoss(-0.1)
    with pytest.raises(ValueError, match=r"x \(2, 2\) and y \(1, 2\) differ in shape"):
        AdditiveMarginSoftmaxLoss()(torch.ones(2, 2), torch.ones(1, 2))


@pytest.mark.parametrize("pooling", ["cls", "mean"])
@pytest.mark.parametrize("name", ["ems", "contrastive", "emmax"])
def test_objectives_pool_as_the_backbone_says(tiny_xlmr, corpus, name, pooling):
    tiny_xlmr.pooling = pooling
    data = ObjectiveData(languages=["de", "en", "uz"], non_parallel=[(s, s) for s in corpus[20:40]])
    options = {"emmax": {"phase1_steps": 0, "phase2_every": 1}} if name == "emmax" else {}
    torch.manual_seed(0)
    objective = build_objective(name, tiny_xlmr, options, data)
    objective.eval()  # no dropout: the recomputed vectors below must match exactly
    batch = _batch(objective, tiny_xlmr, corpus)
    out = objective(tiny_xlmr, batch)
    assert torch.isfinite(out.loss)
    out.loss.backward()
    assert tiny_xlmr.word_embeddings.weight.grad is not None
    packed = batch.queries if name == "emmax" else batch.clean
    hidden = tiny_xlmr(packed)
    expected = pool(hidden, packed, "mean") if pooling == "mean" else hidden[packed.first_token_index]
    if name == "emmax":
        expected = F.normalize(expected, dim=-1)
        got = out.extras["queries"]
    else:
        got = torch.cat(list(out.extras.values()))
    assert torch.allclose(got, expected, atol=1e-5)


# --------------------------------------------------------------------------- EMMA-X losses
def test_gmm_posterior_against_a_direct_computation():
    gmm = GaussianMixtureRelation(dim=2, ranks=2)
    with torch.no_grad():
        gmm.pi_logits.copy_(torch.tensor([math.log(0.25), math.log(0.75)]))  # π = [0.25, 0.75]
        gmm.mu.copy_(torch.tensor([[0.0, 0.0], [1.0, -1.0]]))
        gmm.log_sigma.copy_(torch.tensor([[0.0, 0.0], [math.log(2.0), math.log(0.5)]]))
    z = [0.5, -1.0]

    def normal(x: float, mu: float, sigma: float) -> float:
        return math.exp(-0.5 * ((x - mu) / sigma) ** 2) / (sigma * math.sqrt(2 * math.pi))

    joint = [
        0.25 * normal(0.5, 0.0, 1.0) * normal(-1.0, 0.0, 1.0),
        0.75 * normal(0.5, 1.0, 2.0) * normal(-1.0, -1.0, 0.5),
    ]
    posterior = [j / sum(joint) for j in joint]
    got = gmm.log_posterior(torch.tensor([z])).exp()[0].tolist()
    assert got == pytest.approx(posterior, abs=1e-6)
    assert gmm.log_joint(torch.tensor([z]))[0].exp().tolist() == pytest.approx(joint, rel=1e-5)
    # The loss is -log P(rank | z), summed.
    nll = gmm(torch.tensor([z, z]), torch.tensor([0, 1])).item()
    assert nll == pytest.approx(-math.log(posterior[0]) - math.log(posterior[1]), abs=1e-5)


def test_gmm_moment_fit_is_the_labelled_mean_and_spread():
    gmm = GaussianMixtureRelation(dim=2, ranks=3)
    z = torch.tensor([[1.0, 0.0], [3.0, 2.0], [5.0, 5.0]])
    fitted = gmm.fit_moments(z, torch.tensor([0, 0, 2]), only=torch.tensor([True, True, True]))
    assert fitted.tolist() == [True, False, True]
    assert gmm.mu[0].tolist() == [2.0, 1.0]
    assert gmm.log_sigma[0].exp().tolist() == pytest.approx([1.0, 1.0])
    assert gmm.mu[1].tolist() == [0.0, 0.0]  # no items: untouched


def test_gmm_starts_with_spreads_growing_with_the_rank():
    # sigma_r = (r / N) sqrt(2 / d): d = 8 gives sqrt(2 / 8) = 0.5, so 0.125, 0.25, 0.375, 0.5 for N = 4.
    gmm = GaussianMixtureRelation(dim=8, ranks=4)
    sigma = gmm.log_sigma.exp()
    assert sigma.shape == (4, 8) and sigma.dtype == torch.float32
    torch.testing.assert_close(sigma, torch.tensor([0.125, 0.25, 0.375, 0.5])[:, None].expand(4, 8))
    assert torch.all(gmm.mu == 0) and torch.all(gmm.pi_logits == 0)  # uniform prior
    with pytest.raises(ValueError, match="a relation classifier needs at least 2 ranks, got 1"):
        GaussianMixtureRelation(dim=8, ranks=1)


def test_gmm_posterior_of_a_batch_of_candidate_lists():
    """(anchors, candidates, dim) differences: the posterior is over the last axis, row by row."""
    torch.manual_seed(0)
    gmm = GaussianMixtureRelation(dim=3, ranks=3)
    with torch.no_grad():
        gmm.mu.normal_()
        gmm.pi_logits.normal_()
    z = torch.randn(2, 4, 3)
    ranks = torch.tensor([[0, 1, 2, 1], [2, 2, 0, 1]])
    posterior = gmm.log_posterior(z)
    assert posterior.shape == (2, 4, 3)
    torch.testing.assert_close(posterior.exp().sum(-1), torch.ones(2, 4))
    torch.testing.assert_close(posterior, torch.stack([gmm.log_posterior(row) for row in z]))
    per_row = sum(gmm(row, r) for row, r in zip(z, ranks))
    torch.testing.assert_close(gmm(z, ranks), per_row)


def test_mixup_rank_labels():
    n = 4
    assert mixup_rank(0.0, n) == 1  # the translation itself
    assert mixup_rank(0.2, n) == 2  # 0.8 + 0.8 = 1.6
    assert mixup_rank(1 / 3, n) == 2  # exactly 2.0 (float noise must not make it 3)
    assert mixup_rank(0.34, n) == 3  # 2.02
    assert mixup_rank(2 / 3, n) == 3  # exactly 3.0
    assert mixup_rank(0.9, n) == 4  # 3.7
    assert mixup_rank(1.0, n) == 4
    with pytest.raises(ValueError):
        mixup_rank(1.5, n)


def test_rank_infonce_with_a_fixed_assignment():
    taus = [0.1, 0.2, 0.4]
    similarity = torch.tensor([[0.9, 0.5, 0.1], [0.3, 0.2, 0.7]])
    ranks = torch.tensor([[0, 1, 2], [2, 2, 0]])
    # Row 0: rank 0 (0.9) against all; rank 1 (0.5) against ranks >= 1 (0.5, 0.1) at τ = 0.2;
    # rank 2 is the last rank and never a positive. Row 1: rank 0 (0.7) against all at τ = 0.1.
    expected = _lse(9.0, 5.0, 1.0) - 9.0 + _lse(2.5, 0.5) - 2.5 + _lse(3.0, 2.0, 7.0) - 7.0
    total, count = RankInfoNCELoss(taus)(similarity, ranks)
    assert total.item() == pytest.approx(expected, abs=1e-5)
    assert count.item() == 3
    with pytest.raises(ValueError, match="increase"):
        RankInfoNCELoss([0.2, 0.1, 0.4])
    # A row whose candidates are all closer than a rank must not poison the gradient.
    sim = torch.tensor([[0.5, 0.4]], requires_grad=True)
    total, _ = RankInfoNCELoss(taus)(sim, torch.tensor([[0, 0]]))
    total.backward()
    assert torch.isfinite(sim.grad).all()


def test_rank_infonce_checks_its_temperatures_and_shapes():
    for bad in ([0.1], [0.0, 0.1], [-0.1, 0.1]):
        with pytest.raises(ValueError, match=r"need at least two positive temperatures, got \["):
            RankInfoNCELoss(bad)
    with pytest.raises(ValueError, match=r"must increase with the rank .*, got \[0.1, 0.1, 0.2\]"):
        RankInfoNCELoss([0.1, 0.1, 0.2])
    two = RankInfoNCELoss([0.1, 0.2])  # two ranks: translations against unrelated candidates
    total, count = two(torch.tensor([[0.9, 0.1]]), torch.tensor([[0, 1]]))
    assert total.item() == pytest.approx(_lse(9.0, 1.0) - 9.0, abs=1e-5)
    assert count.item() == 1 and count.dtype == torch.long and total.dtype == torch.float32
    with pytest.raises(ValueError, match=r"similarity \(1, 2\) and ranks \(1, 3\) differ in shape"):
        two(torch.zeros(1, 2), torch.zeros(1, 3, dtype=torch.long))


# --------------------------------------------------------------------------- EMMA-X objective
def _emmax(backbone, corpus, **options) -> EMMAXObjective:
    torch.manual_seed(0)
    return EMMAXObjective(backbone, EMMAXConfig(**options), non_parallel=[(s, s) for s in corpus[20:40]])


def _no_cross_gradients(objective, backbone, out) -> None:
    gmm_params = list(objective.gmm.parameters())
    encoder_params = [p for p in backbone.parameters() if p.requires_grad]
    from_encoder = torch.autograd.grad(
        out.extras["encoder_loss"], gmm_params, allow_unused=True, retain_graph=True
    )
    assert all(g is None for g in from_encoder)
    assert out.extras["gmm_loss"].requires_grad
    from_gmm = torch.autograd.grad(
        out.extras["gmm_loss"], encoder_params, allow_unused=True, retain_graph=True
    )
    assert all(g is None for g in from_gmm)
    assert any(
        g is not None
        for g in torch.autograd.grad(
            out.extras["encoder_loss"], encoder_params, allow_unused=True, retain_graph=True
        )
    )


def test_emmax_phase1_mixup_labels_anchors_and_gradient_separation(tiny_xlmr, corpus):
    objective = _emmax(tiny_xlmr, corpus, phase1_steps=5)
    objective.train()
    batch = _batch(objective, tiny_xlmr, corpus, n=6, seed=3)
    assert batch.phase == 1
    lam = batch.mixup_lambda.tolist()
    assert all(0.0 < v <= 1.0 for v in lam)
    assert batch.mixup_partner.tolist() == [1, 2, 3, 4, 5, 0]
    out = objective(tiny_xlmr, batch)
    labels = out.extras["gmm_labels"].tolist()
    # Each labelled difference enters with both signs (x − y and y − x), so the labels repeat.
    assert labels == ([0] * 6 + [mixup_rank(v, 4) - 1 for v in lam]) * 2
    assert int(objective.batches_seen) == 1
    _no_cross_gradients(objective, tiny_xlmr, out)
    # The first batch sets each present rank's anchor to its items' mean cosine, and each rank's
    # Gaussian to its items' moments (the backbone is in eval mode: the recomputation is exact).
    hidden = tiny_xlmr(batch.pairs.clean)
    x, y = F.normalize(tiny_xlmr.sentence_embedding(hidden, batch.pairs.clean), dim=-1).chunk(2)
    lam_col = batch.mixup_lambda[:, None]
    mixed = (1 - lam_col) * y + lam_col * y[batch.mixup_partner]
    sims = torch.cat([(x * y).sum(-1), (x * F.normalize(mixed, dim=-1)).sum(-1)])
    labels = out.extras["gmm_labels"][: sims.shape[0]]
    for rank in range(4):
        if (labels == rank).any():
            assert objective.anchors[rank].item() == pytest.approx(
                sims[labels == rank].mean().item(), abs=1e-5
            )
            assert bool(objective.anchors_seen[rank]) and bool(objective.gmm_fitted[rank])
    # Both signs: the moment fit of rank 1 is centred (μ = 0) and its spread is that of ±(x − y).
    assert torch.allclose(objective.gmm.mu[0], torch.zeros_like(objective.gmm.mu[0]), atol=1e-6)
    both = torch.cat([x - y, y - x]).detach()
    assert torch.allclose(
        objective.gmm.log_sigma[0], both.std(0, unbiased=False).clamp_min(1e-4).log(), atol=1e-4
    )


def test_emmax_phase2_queue_momentum_and_gradient_separation(tiny_xlmr, corpus):
    objective = _emmax(tiny_xlmr, corpus, phase1_steps=0, phase2_every=1, queue_size=8, momentum=0.9)
    objective.train()
    before = [p.detach().clone() for p in objective.key_encoder.parameters()]
    with torch.no_grad():  # make the backbone differ from its momentum copy
        for p in tiny_xlmr.parameters():
            p.add_(0.01)
    batch = _batch(objective, tiny_xlmr, corpus, n=6)
    assert batch.phase == 2 and batch.queries.num_sequences == 6
    out = objective(tiny_xlmr, batch)
    for old, new, live in zip(before, objective.key_encoder.parameters(), tiny_xlmr.parameters()):
        assert torch.allclose(new, 0.9 * old + 0.1 * live.detach(), atol=1e-6)
    assert not any(p.requires_grad for p in objective.key_encoder.parameters())
    assert int(objective.queue_filled) == 6 and int(objective.queue_pointer) == 6
    ranks = out.extras["gmm_ranks"]
    assert ranks.shape == (6, 6)  # the first batch: candidates = its own keys only (empty queue)
    # The GMM (not yet trained) puts some candidates below the last rank, so the encoder loss has
    # terms (it is not only the 0·Σq that keeps the encoder in the graph).
    assert (ranks < 3).any() and out.metrics["rank_infonce"] > 0
    _no_cross_gradients(objective, tiny_xlmr, out)
    # The second batch sees 6 keys + 6 queued; the ring buffer wraps at 8.
    out = objective(tiny_xlmr, _batch(objective, tiny_xlmr, corpus, n=6, seed=1))
    assert out.extras["gmm_ranks"].shape == (6, 12)
    assert int(objective.queue_filled) == 8 and int(objective.queue_pointer) == 4


def test_emmax_phase_schedule_and_missing_non_parallel_text(tiny_xlmr, corpus):
    objective = _emmax(tiny_xlmr, corpus, phase1_steps=3, phase2_every=2)
    assert [objective.phase_of(i) for i in range(8)] == [1, 1, 1, 2, 1, 2, 1, 2]
    assert [objective.phase_of(i) for i in range(3)] == [1, 1, 1]
    with pytest.raises(ValueError, match="data.monolingual"):
        EMMAXObjective(tiny_xlmr, EMMAXConfig())
    only_phase1 = EMMAXObjective(tiny_xlmr, EMMAXConfig(phase2_every=0))
    assert only_phase1.phase_of(10_000) == 1


# --------------------------------------------------------------------------- recipe options
def test_objective_options_from_a_shared_section():
    section = {"alpha": 1.0, "koleo": True, "ems": {"tied_embedding": True}, "emmax": {"ranks": 3}}
    assert objective_options("ems", section) == {"tied_embedding": True}
    assert objective_options("emmax", section) == {"ranks": 3}
    assert objective_options("mexma", section) == {"alpha": 1.0, "koleo": True}
    assert objective_options("contrastive", {"margin": 0.2}) == {"margin": 0.2}
    with pytest.raises(ValueError, match="objective.bogus is not an option of ems"):
        objective_options("ems", {"bogus": 1})
    with pytest.raises(ValueError, match="objective.ems.alpha is not an option of ems"):
        objective_options("ems", {"ems": {"alpha": 1}})
    with pytest.raises(ValueError, match="unknown objective.name 'labse'"):
        objective_options("labse", {})


def test_build_objective_by_name(tiny_xlmr, corpus):
    data = ObjectiveData(languages=["en", "uz"], non_parallel=[("a b", "a b")])
    assert isinstance(
        build_objective("contrastive", tiny_xlmr, {"contrastive": {"margin": 0.1}}, data),
        ContrastiveObjective,
    )
    ems = build_objective("ems", tiny_xlmr, {"alpha": 1.0}, data)
    assert ems.languages == ["en", "uz"]
    assert build_objective("emmax", tiny_xlmr, {}, data).config.ranks == 4
