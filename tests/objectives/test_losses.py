"""MEXMA's losses on hand-computed examples, the masking statistics, the end-to-end objective's
bookkeeping, the token-gradient ablation switch and process-count-independent collation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from modsenc.backbone import PackedBatch
from modsenc.backbone.attention import SdpaVarlenAttention
from modsenc.data.readers import TranslationPair
from modsenc.objectives import MEXMAConfig, MEXMAObjective, TokenizedPair
from modsenc.objectives.losses import (
    IGNORE_INDEX,
    CrossUnmaskingHead,
    InfoNCEAlignmentLoss,
    KoLeoLoss,
    MSEAlignmentLoss,
)
from modsenc.objectives.masking import mask_sequence
from modsenc.utils.distributed import DistContext

SQRT2 = math.sqrt(2.0)


def _lse(*xs: float) -> float:
    return math.log(sum(math.exp(x) for x in xs))


# --------------------------------------------------------------------------- KoLeo
def test_koleo_three_vectors_by_hand():
    # Normalised: u=[1,0], v=[0,1], w=[1/sqrt2, 1/sqrt2].
    # Cosines: u.v = 0, u.w = v.w = 1/sqrt2, so u's and v's nearest neighbour is w, and w's is u
    # (tie with v; either way the same distance).
    # |u - w|^2 = (1 - 1/sqrt2)^2 + (1/sqrt2)^2 = 1 - sqrt2 + 1/2 + 1/2 = 2 - sqrt2, likewise |v - w|^2.
    d = math.sqrt(2 - SQRT2)  # 0.76537
    expected = -(math.log(d) + math.log(d) + math.log(d)) / 3  # 0.267400
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    assert KoLeoLoss()(x).item() == pytest.approx(expected, abs=1e-6)
    assert expected == pytest.approx(0.267400, abs=1e-6)


def test_koleo_asymmetric_by_hand():
    # Normalised: u=[1,0], w=[1/sqrt2, 1/sqrt2], z=[-1,0].
    # u: cos(u,w)=0.707 > cos(u,z)=-1  -> w, distance sqrt(2 - sqrt2)
    # w: cos(w,u)=0.707 > cos(w,z)=-0.707 -> u, distance sqrt(2 - sqrt2)
    # z: cos(z,w)=-0.707 > cos(z,u)=-1 -> w, |z - w|^2 = (1 + 1/sqrt2)^2 + 1/2 = 2 + sqrt2
    near, far = math.sqrt(2 - SQRT2), math.sqrt(2 + SQRT2)
    expected = -(2 * math.log(near) + math.log(far)) / 3
    x = torch.tensor([[3.0, 0.0], [2.0, 2.0], [-0.5, 0.0]])
    assert KoLeoLoss()(x).item() == pytest.approx(expected, abs=1e-6)


def test_koleo_scale_invariant_and_needs_two_vectors():
    torch.manual_seed(0)
    x = torch.randn(16, 8)
    base = KoLeoLoss()(x).item()
    for scale in (1e-2, 7.5, 1e3):
        assert KoLeoLoss()(x * scale).item() == pytest.approx(base, abs=1e-5)
    # Spreading the points apart lowers the loss.
    clustered = torch.ones(16, 8) + 0.01 * x
    assert KoLeoLoss()(clustered).item() > base + 1.0
    with pytest.raises(ValueError):
        KoLeoLoss()(torch.ones(1, 8))


def test_koleo_two_vectors_and_duplicates_by_hand():
    # Two vectors are each other's nearest neighbour, even when antipodal (cosine -1, below no
    # other candidate but above the -2 on the diagonal): d = |[1, 0] - [-1, 0]| = 2.
    assert KoLeoLoss()(torch.tensor([[2.0, 0.0], [-1.0, 0.0]])).item() == pytest.approx(
        -math.log(2.0), abs=1e-6
    )
    # Duplicates stay finite: pairwise_distance adds eps to the difference, |(eps, eps)| = sqrt2 eps,
    # and the log adds eps again: -log(sqrt2 eps + eps) = 17.539 at eps = 1e-8.
    eps = 1e-8
    duplicates = KoLeoLoss(eps)(torch.tensor([[1.0, 0.0], [3.0, 0.0]])).item()
    assert duplicates == pytest.approx(-math.log(SQRT2 * eps + eps), rel=1e-4)
    with pytest.raises(ValueError, match="^KoLeo needs at least two vectors in the batch$"):
        KoLeoLoss()(torch.ones(1, 2))


def test_koleo_runs_in_fp32_under_bf16_autocast():
    # u = [1, 0]; v and w at cosines 0.9998 and 0.99995 to u. In bf16 (8 significant bits) both
    # cosines round to 1.0, so a bf16 similarity would tie and pick v (the first); fp32 picks w.
    assert torch.tensor([0.9998, 0.99995]).bfloat16().tolist() == [1.0, 1.0]
    cos_v, cos_w = 0.9998, 0.99995
    x = torch.tensor([[1.0, 0.0], [cos_v, math.sqrt(1 - cos_v**2)], [cos_w, math.sqrt(1 - cos_w**2)]])
    plain = KoLeoLoss()(x).item()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert KoLeoLoss()(x).item() == pytest.approx(plain, abs=1e-6)
    # u's nearest is w, at sqrt(2 - 2 cos_w) = 0.0100 (v would be 0.0200); v's and w's are each other.
    d_vw = math.sqrt(2 - 2 * (cos_v * cos_w + math.sqrt((1 - cos_v**2) * (1 - cos_w**2))))
    d_uw = math.sqrt(2 - 2 * cos_w)
    assert plain == pytest.approx(-(math.log(d_uw) + 2 * math.log(d_vw)) / 3, abs=1e-3)


# --------------------------------------------------------------------------- alignment
def test_mse_alignment_sum_and_count():
    a = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    b = torch.tensor([[0.0, 2.0], [5.0, 1.0]])
    sq_sum, numel = MSEAlignmentLoss()(a, b)
    assert sq_sum.item() == pytest.approx(1.0**2 + 0.0**2 + 2.0**2 + 3.0**2)  # 14
    assert numel == 4
    assert (sq_sum / numel).item() == pytest.approx(F.mse_loss(a, b).item())
    with pytest.raises(ValueError, match=r"alignment needs equal shapes, got \(2, 2\) and \(1, 2\)"):
        MSEAlignmentLoss()(a, b[:1])


def test_infonce_2x2_by_hand():
    a = torch.tensor([[2.0, 0.0], [0.0, 3.0]])  # normalised: [1,0], [0,1]
    b = torch.tensor([[1.0, 0.0], [1.0, 1.0]])  # normalised: [1,0], [1/sqrt2, 1/sqrt2]
    t = 0.5
    # logits[i][j] = cos(a_i, b_j) / t = [[1, 1/sqrt2], [0, 1/sqrt2]] / 0.5
    l00, l01, l10, l11 = 1 / t, (1 / SQRT2) / t, 0.0 / t, (1 / SQRT2) / t
    a_to_b = ((_lse(l00, l01) - l00) + (_lse(l10, l11) - l11)) / 2  # rows
    b_to_a = ((_lse(l00, l10) - l00) + (_lse(l01, l11) - l11)) / 2  # columns
    expected = (a_to_b + b_to_a) / 2
    assert InfoNCEAlignmentLoss(temperature=t)(a, b).item() == pytest.approx(expected, abs=1e-6)
    # Swapping the roles of a and b gives the same symmetric loss.
    assert InfoNCEAlignmentLoss(temperature=t)(b, a).item() == pytest.approx(expected, abs=1e-6)
    with pytest.raises(ValueError, match="^temperature must be positive$"):
        InfoNCEAlignmentLoss(temperature=0.0)


def test_infonce_3x2_by_hand():
    """Three pairs in two dimensions: no symmetry for a wrong normalisation axis to hide behind."""
    a = torch.tensor([[3.0, 4.0], [1.0, 0.0], [0.0, 2.0]])  # normalised: [.6, .8], [1, 0], [0, 1]
    b = torch.tensor([[1.0, 0.0], [0.0, 5.0], [6.0, 8.0]])  # normalised: [1, 0], [0, 1], [.6, .8]
    # cos(a_i, b_j) = [[.6, .8, 1], [1, 0, .6], [0, 1, .8]]; at t = 0.5 the logits are twice that.
    logits = [[1.2, 1.6, 2.0], [2.0, 0.0, 1.2], [0.0, 2.0, 1.6]]
    rows = sum(_lse(*logits[i]) - logits[i][i] for i in range(3)) / 3
    columns = sum(_lse(*(logits[j][i] for j in range(3))) - logits[i][i] for i in range(3)) / 3
    assert InfoNCEAlignmentLoss(temperature=0.5)(a, b).item() == pytest.approx((rows + columns) / 2, abs=1e-6)


# --------------------------------------------------------------------------- cross-unmasking head
E = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-1.0, 0.0]]  # vocab 4, hidden 2
BIAS = [0.0, 0.5, 0.0, -0.5]


def _head_inputs():
    head = CrossUnmaskingHead(hidden_size=2, vocab_size=4, num_layers=0, num_heads=1, hidden_dropout=0.0)
    with torch.no_grad():
        head.bias.copy_(torch.tensor(BIAS))
    layout = PackedBatch.from_ids([[0, 1, 2], [0, 3]])  # two sequences, lengths 3 and 2
    masked_hidden = torch.tensor([[9.0, 9.0], [0.5, -1.0], [2.0, 0.0], [7.0, 7.0], [1.0, 1.0]])
    other = torch.tensor([[1.0, 2.0], [0.0, -1.0]])  # replace rows 0 and 3
    labels = torch.tensor([1, IGNORE_INDEX, 2, 3, 0])
    return head, layout, masked_hidden, other, labels


def _logits(h):
    return [sum(e_k * h_k for e_k, h_k in zip(e, h)) + b for e, b in zip(E, BIAS)]


def test_cross_unmasking_head_without_layers_by_hand():
    head, layout, masked_hidden, other, labels = _head_inputs()
    losses, positions = head(masked_hidden, other, layout, labels, torch.tensor(E), SdpaVarlenAttention())
    assert positions.tolist() == [0, 2, 3, 4]
    # Row 0 is S_other[0] = [1, 2]: logits = [1, 2, 3, -1] + bias = [1, 2.5, 3, -1.5], label 1.
    # Row 2 is [2, 0]: logits = [2, 0, 2, -2] + bias = [2, 0.5, 2, -2.5], label 2.
    # Row 3 is S_other[1] = [0, -1]: logits = [0, -1, -1, 0] + bias = [0, -0.5, -1, -0.5], label 3.
    # Row 4 is [1, 1]: logits = [1, 1, 2, -1] + bias = [1, 1.5, 2, -1.5], label 0.
    expected = [
        _lse(1, 2.5, 3, -1.5) - 2.5,
        _lse(2, 0.5, 2, -2.5) - 2,
        _lse(0, -0.5, -1, -0.5) - (-0.5),
        _lse(1, 1.5, 2, -1.5) - 1,
    ]
    # Cross-check the written-out logits against the formula h @ E^T + bias.
    assert _logits([1.0, 2.0]) == [1, 2.5, 3, -1.5]
    assert _logits([0.0, -1.0]) == [0, -0.5, -1, -0.5]
    np.testing.assert_allclose(losses.detach().numpy(), expected, atol=1e-6)


def test_cross_unmasking_position_zero_is_the_other_sentence():
    head, layout, masked_hidden, other, labels = _head_inputs()
    run = lambda mh, o: head(mh, o, layout, labels, torch.tensor(E), SdpaVarlenAttention())[0]  # noqa: E731
    base = run(masked_hidden, other)
    # The masked pass's own state at position 0 is discarded ...
    changed_hidden = masked_hidden.clone()
    changed_hidden[[0, 3]] = torch.tensor([[-50.0, 3.0], [4.0, -20.0]])
    assert torch.equal(run(changed_hidden, other), base)
    # ... and the other sentence's vector decides the loss of a label on position 0.
    changed_other = torch.tensor([[-1.0, 0.0], [0.0, -1.0]])  # logits [-1, 0.5, -1, 0.5], label 1
    new = run(masked_hidden, changed_other)
    assert new[0].item() == pytest.approx(_lse(-1, 0.5, -1, 0.5) - 0.5, abs=1e-6)
    assert torch.equal(new[1:], base[1:])  # no layers: other positions are untouched


def test_cross_unmasking_head_width_and_initialisation():
    head = CrossUnmaskingHead(hidden_size=64, vocab_size=10, num_layers=2, num_heads=4)
    # No intermediate size given: XLM-R's 4 x hidden.
    assert [layer.intermediate.dense.out_features for layer in head.layers] == [256, 256]
    narrow = CrossUnmaskingHead(
        hidden_size=64, vocab_size=10, num_layers=1, num_heads=4, intermediate_size=96
    )
    assert narrow.layers[0].intermediate.dense.out_features == 96
    # XLM-R's initialisation: linear weights N(0, 0.02) (98,304 of them here), zero biases, LayerNorm 1 / 0.
    linears = [m for m in head.modules() if isinstance(m, torch.nn.Linear)]
    weights = torch.cat([m.weight.flatten() for m in linears])
    assert weights.numel() == 2 * (4 * 64 * 64 + 2 * 64 * 256)
    assert weights.std().item() == pytest.approx(0.02, rel=0.02) and abs(weights.mean().item()) < 1e-3
    assert all(torch.all(m.bias == 0) for m in linears) and torch.all(head.bias == 0)
    norms = [m for m in head.modules() if isinstance(m, torch.nn.LayerNorm)]
    assert norms and all(torch.all(m.weight == 1) and torch.all(m.bias == 0) for m in norms)


def test_cross_unmasking_head_in_bf16_with_fp32_sentence_vectors():
    """Training runs in bf16 (autocast, or a bf16 model) while the pooled sentence vectors may be fp32:
    position 0 takes the other sentence's vector in the masked states' dtype."""
    head, layout, masked_hidden, other, labels = _head_inputs()
    expected, _ = head(masked_hidden, other, layout, labels, torch.tensor(E), SdpaVarlenAttention())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        losses, _ = head(
            masked_hidden.bfloat16(), other, layout, labels, torch.tensor(E), SdpaVarlenAttention()
        )
    assert losses.dtype == torch.float32
    torch.testing.assert_close(losses, expected, rtol=0.05, atol=0.05)
    # A bf16 model without autocast: the fp32 vectors are cast, not refused.
    head = head.to(torch.bfloat16)
    losses, _ = head(
        masked_hidden.bfloat16(), other, layout, labels, torch.tensor(E).bfloat16(), SdpaVarlenAttention()
    )
    torch.testing.assert_close(losses, expected, rtol=0.05, atol=0.05)


# --------------------------------------------------------------------------- masking
MASK_ID = 4
SPECIAL = frozenset({0, 1, 2, 3, MASK_ID})
POOL = np.arange(5, 1005)


def _sequence(rng: np.random.Generator, length: int) -> list[int]:
    return [0, *rng.integers(5, 1005, size=length - 2).tolist(), 2]


def test_masking_never_touches_special_ids_and_labels_are_exact():
    rng = np.random.default_rng(0)
    for _ in range(300):
        ids = _sequence(rng, int(rng.integers(3, 30)))
        ids[len(ids) // 2] = 1  # a pad-like special id in the middle
        masked, labels = mask_sequence(ids, rng, MASK_ID, SPECIAL, POOL, ratio=0.4)
        assert len(masked) == len(labels) == len(ids)
        for orig, m, lab in zip(ids, masked, labels):
            if orig in SPECIAL:
                assert m == orig and lab == IGNORE_INDEX
            if lab == IGNORE_INDEX:
                assert m == orig  # unselected tokens are unchanged
            else:
                assert lab == orig  # selected tokens keep their original id as label


def test_masking_selection_matches_the_drawn_uniforms():
    ids = [0, 11, 12, 13, 14, 15, 16, 17, 2]
    for seed in range(20):
        draws = np.random.default_rng(seed).random(len(ids))
        selected = (draws < 0.4) & ~np.isin(ids, list(SPECIAL))
        if not selected.any():
            continue  # the draw would be repeated
        _, labels = mask_sequence(ids, np.random.default_rng(seed), MASK_ID, SPECIAL, POOL, 0.4)
        assert [lab != IGNORE_INDEX for lab in labels] == selected.tolist()


def test_masking_at_least_one_token_even_at_tiny_ratio():
    ids = [0, 20, 21, 22, 23, 2]
    for seed in range(200):
        masked, labels = mask_sequence(ids, np.random.default_rng(seed), MASK_ID, SPECIAL, POOL, 0.01)
        assert sum(lab != IGNORE_INDEX for lab in labels) >= 1
        assert labels[0] == labels[-1] == IGNORE_INDEX
    # Nothing maskable: returned unchanged (and no endless redraw).
    masked, labels = mask_sequence([0, 2], np.random.default_rng(0), MASK_ID, SPECIAL, POOL, 0.01)
    assert masked == [0, 2] and labels == [IGNORE_INDEX, IGNORE_INDEX]


def test_masking_ratio_and_80_10_10_split():
    rng = np.random.default_rng(1)
    candidates = selected = to_mask = to_random = kept = 0
    for _ in range(2000):
        ids = _sequence(rng, 50)
        masked, labels = mask_sequence(ids, rng, MASK_ID, SPECIAL, POOL, ratio=0.4)
        candidates += len(ids) - 2
        for orig, m, lab in zip(ids, masked, labels):
            if lab == IGNORE_INDEX:
                continue
            selected += 1
            if m == MASK_ID:
                to_mask += 1
            elif m != orig:
                assert m in POOL
                to_random += 1
            else:
                kept += 1  # includes the 1-in-1000 random draws that hit the original id
    assert candidates == 2000 * 48
    assert selected / candidates == pytest.approx(0.4, abs=0.02)
    assert to_mask / selected == pytest.approx(0.8, abs=0.02)
    assert to_random / selected == pytest.approx(0.1, abs=0.02)
    assert kept / selected == pytest.approx(0.1, abs=0.02)


def test_masking_is_deterministic_per_seed():
    ids = list(range(5, 45))
    first = mask_sequence(ids, np.random.default_rng(123), MASK_ID, SPECIAL, POOL)
    again = mask_sequence(ids, np.random.default_rng(123), MASK_ID, SPECIAL, POOL)
    other = mask_sequence(ids, np.random.default_rng(124), MASK_ID, SPECIAL, POOL)
    assert first == again
    assert first != other


# --------------------------------------------------------------------------- MEXMA end to end
def _objective(backbone, **overrides) -> MEXMAObjective:
    torch.manual_seed(0)
    options = {"head_layers": 1, "head_heads": 4, "head_dropout": 0.0}
    options.update(overrides)
    return MEXMAObjective(backbone, MEXMAConfig(**options))


def _examples(backbone, corpus, n: int = 6) -> list[TokenizedPair]:
    ids = backbone.tokenize(corpus[: 2 * n])
    return [TokenizedPair(ids[2 * i], ids[2 * i + 1]) for i in range(n)]


def _batch(objective, backbone, corpus, n: int = 6, seed: int = 0):
    return objective.collate(_examples(backbone, corpus, n), np.random.default_rng(seed), backbone)


def test_mexma_metrics_are_the_weighted_terms(tiny_xlmr, corpus):
    objective = _objective(tiny_xlmr, alpha=0.7, beta=0.3, gamma=0.11)
    batch = _batch(objective, tiny_xlmr, corpus)
    out = objective(tiny_xlmr, batch)
    m = out.metrics
    s_a, s_b = out.extras["s_a"], out.extras["s_b"]
    assert s_a.shape == s_b.shape == (6, tiny_xlmr.hidden_size)
    assert out.num_tokens == batch.clean.num_tokens

    assert m["loss"] == pytest.approx(0.7 * m["align"] + 0.3 * m["mlm"] + 0.11 * m["koleo"], rel=1e-6)
    assert out.loss.item() == pytest.approx(m["loss"], rel=1e-5)
    assert m["align"] == pytest.approx(F.mse_loss(s_a, s_b).item(), rel=1e-5)
    assert m["koleo"] == pytest.approx((KoLeoLoss()(s_a) + KoLeoLoss()(s_b)).item(), rel=1e-5)

    # mlm = CE_A + CE_B, each the mean over that language's masked tokens (A packed first).
    hidden = out.extras["hidden_masked"]
    losses, positions = objective.head(
        hidden,
        torch.cat([s_b, s_a]),
        batch.masked,
        batch.labels,
        tiny_xlmr.word_embeddings.weight,
        tiny_xlmr.attention,
    )
    a_tokens = int(batch.clean.cu_seqlens[6])
    ce_a = losses[positions < a_tokens].mean().item()
    ce_b = losses[positions >= a_tokens].mean().item()
    assert m["mlm"] == pytest.approx(ce_a + ce_b, rel=1e-5)
    # Untrained on a ~87-token vocabulary: each CE is near log(vocab).
    assert 0.5 * math.log(len(tiny_xlmr.tokenizer)) < ce_a < 2 * math.log(len(tiny_xlmr.tokenizer))

    # Dropping KoLeo removes exactly gamma * koleo from the loss.
    objective.config.koleo = False
    out_nk = objective(tiny_xlmr, batch)
    assert out_nk.metrics["koleo"] == 0.0
    assert out_nk.metrics["align"] == pytest.approx(m["align"], rel=1e-6)
    assert out_nk.metrics["mlm"] == pytest.approx(m["mlm"], rel=1e-6)
    assert out_nk.metrics["loss"] == pytest.approx(0.7 * m["align"] + 0.3 * m["mlm"], rel=1e-6)
    assert out.loss.item() - out_nk.loss.item() == pytest.approx(0.11 * m["koleo"], rel=1e-4)
    assert 0.11 * m["koleo"] > 1e-3  # the difference is not vanishing


def test_mexma_infonce_alignment(tiny_xlmr, corpus):
    objective = _objective(tiny_xlmr, alignment="infonce", infonce_temperature=0.1)
    out = objective(tiny_xlmr, _batch(objective, tiny_xlmr, corpus))
    expected = InfoNCEAlignmentLoss(0.1)(out.extras["s_a"], out.extras["s_b"]).item()
    assert out.metrics["align"] == pytest.approx(expected, rel=1e-5)
    assert out.metrics["align"] != pytest.approx(
        F.mse_loss(out.extras["s_a"], out.extras["s_b"]).item(), rel=1e-3
    )
    cfg = objective.config
    assert out.loss.item() == pytest.approx(
        cfg.alpha * expected + cfg.beta * out.metrics["mlm"] + cfg.gamma * out.metrics["koleo"], rel=1e-5
    )
    with pytest.raises(ValueError):
        MEXMAConfig(alignment="cosine")


class _MirroredRanks(DistContext):
    """A fake process group of ``world_size`` ranks that all hold this rank's data: sums multiply
    by the world size and gathers repeat the tensor. Records the device of every collective."""

    def __init__(self, world_size: int) -> None:
        super().__init__(rank=0, world_size=world_size)
        object.__setattr__(self, "devices", [])

    def all_reduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        self.devices.append(tensor.device)
        return tensor.detach().clone() * self.world_size

    def all_gather_with_grad(self, tensor: torch.Tensor) -> torch.Tensor:
        self.devices.append(tensor.device)
        return torch.cat([tensor] * self.world_size)


@pytest.mark.parametrize("anchor_weight", [0.0, 1.5])
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_mexma_global_batch_scaling(tiny_xlmr, corpus, device, anchor_weight):
    """N ranks holding the same pairs log the single-process metrics, and each rank's gradient
    (which DDP averages) equals the single-process gradient. Collectives get tensors on the model's
    device (NCCL has no CPU tensors)."""
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    backbone = tiny_xlmr.to(device)
    objective = _objective(backbone, alpha=0.7, beta=0.3, koleo=False, anchor_weight=anchor_weight).to(
        device
    )  # KoLeo of duplicates is degenerate
    if anchor_weight:
        batch = _anchored_batch(objective, backbone, corpus).to(device)
        objective.anchor_targets = objective.anchor_targets + 0.1  # so that the term is not 0
    else:
        batch = _batch(objective, backbone, corpus).to(device)
    params = [p for p in backbone.parameters() if p.requires_grad]

    single = objective(backbone, batch)
    g_single = torch.autograd.grad(single.loss, params, allow_unused=True)
    ranks = _MirroredRanks(world_size=2)
    mirrored = objective(backbone, batch, ranks)
    g_mirrored = torch.autograd.grad(mirrored.loss, params, allow_unused=True)

    keys = ("loss", "align", "mlm", "koleo") + (("anchor",) if anchor_weight else ())
    for key in keys:
        assert mirrored.metrics[key] == pytest.approx(single.metrics[key], rel=1e-5), key
    assert mirrored.loss.item() == pytest.approx(single.loss.item(), rel=1e-5)
    for a, b in zip(g_single, g_mirrored):
        if a is not None:
            torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-7)
    assert ranks.devices and all(d == single.extras["s_a"].device for d in ranks.devices)


# --------------------------------------------------------------------------- anchor (pretrained start)
def _anchored_pairs(corpus) -> list[TranslationPair]:
    """Six pairs over five distinct pivot sentences: pairs 0 and 3 share their English."""
    english = [corpus[0], corpus[2], corpus[4], corpus[0], corpus[6], corpus[8]]
    return [TranslationPair("en", text, "uz", corpus[2 * i + 1]) for i, text in enumerate(english)]


def _anchored_batch(objective, backbone, corpus):
    examples = objective.prepare(_anchored_pairs(corpus), backbone, 32)
    return objective.collate(examples, np.random.default_rng(0), backbone)


def test_mexma_anchor_targets_are_the_starting_vectors_of_each_distinct_pivot_sentence(tiny_xlmr, corpus):
    objective = _objective(tiny_xlmr, anchor_weight=2.0)
    examples = objective.prepare(_anchored_pairs(corpus), tiny_xlmr, 32)
    assert [ex.anchor_row for ex in examples] == [0, 1, 2, 0, 3, 4]
    distinct = [corpus[0], corpus[2], corpus[4], corpus[6], corpus[8]]
    expected = tiny_xlmr.encode(distinct, precision="fp32", convert_to_tensor=True)
    torch.testing.assert_close(objective.anchor_targets, expected)
    # Not part of a checkpoint: a resume recomputes them from the same starting backbone.
    assert not any("anchor" in key for key in objective.state_dict())
    # The backbone as it was when prepared (dropout off) gives the targets back: the term is 0.
    tiny_xlmr.eval()
    batch = objective.collate(examples, np.random.default_rng(0), tiny_xlmr)
    assert batch.anchor_rows.tolist() == [0, 1, 2, 0, 3, 4]
    out = objective(tiny_xlmr, batch)
    assert out.metrics["anchor"] == pytest.approx(0.0, abs=1e-10)


def test_mexma_anchor_term_by_hand(tiny_xlmr, corpus):
    """Targets set 0.5 above every element of S_A: MSE = 0.25, and the loss gains weight * 0.25."""
    tiny_xlmr.eval()
    plain = _objective(tiny_xlmr)
    anchored = _objective(tiny_xlmr, anchor_weight=2.0)
    batch = _anchored_batch(anchored, tiny_xlmr, corpus)
    s_a = anchored(tiny_xlmr, batch).extras["s_a"].detach()
    # Pairs 0 and 3 share a row and (the same English) the same vector, so the rows can be set.
    targets = torch.zeros_like(anchored.anchor_targets)
    targets[batch.anchor_rows] = s_a + 0.5
    anchored.anchor_targets = targets
    out = anchored(tiny_xlmr, batch)
    base = plain(tiny_xlmr, batch)  # same head (seeded), same masks (same batch)
    assert out.metrics["anchor"] == pytest.approx(0.25, rel=1e-5)
    assert out.loss.item() == pytest.approx(base.loss.item() + 2.0 * 0.25, rel=1e-5)
    assert out.metrics["loss"] == pytest.approx(base.metrics["loss"] + 0.5, rel=1e-5)
    assert "anchor" not in base.metrics


def test_mexma_translation_anchor_has_its_own_rows_and_term(tiny_xlmr, corpus):
    """Both sides anchored: the five distinct pivots and six translations get rows in the order they
    first appear (pair by pair, A then B); targets set 0.5 from S_A and 1.0 from S_B give MSEs
    0.25 and 1.0, and the loss gains 2 * 0.25 + 3 * 1.0."""
    tiny_xlmr.eval()
    plain = _objective(tiny_xlmr)
    both = _objective(tiny_xlmr, anchor_weight=2.0, anchor_translation_weight=3.0)
    batch = _anchored_batch(both, tiny_xlmr, corpus)
    assert batch.anchor_rows.tolist() == [0, 2, 4, 0, 7, 9]  # pair 3 repeats pair 0's English
    assert batch.anchor_rows_b.tolist() == [1, 3, 5, 6, 8, 10]
    assert both.anchor_targets.shape == (11, tiny_xlmr.hidden_size)
    first = both(tiny_xlmr, batch)
    assert first.metrics["anchor"] == pytest.approx(0.0, abs=1e-10)  # the start gives its targets back
    assert first.metrics["anchor_translation"] == pytest.approx(0.0, abs=1e-10)
    s_a, s_b = first.extras["s_a"].detach(), first.extras["s_b"].detach()
    targets = both.anchor_targets.clone()
    targets[batch.anchor_rows] = s_a + 0.5
    targets[batch.anchor_rows_b] = s_b - 1.0
    both.anchor_targets = targets
    out, base = both(tiny_xlmr, batch), plain(tiny_xlmr, batch)
    assert (out.metrics["anchor"], out.metrics["anchor_translation"]) == (
        pytest.approx(0.25, rel=1e-5),
        pytest.approx(1.0, rel=1e-5),
    )
    assert out.loss.item() == pytest.approx(base.loss.item() + 0.5 + 3.0, rel=1e-5)
    # Only the translation side anchored: only its sentences are encoded for the table.
    side_b = _objective(tiny_xlmr, anchor_translation_weight=1.0)
    batch = _anchored_batch(side_b, tiny_xlmr, corpus)
    assert batch.anchor_rows is None and batch.anchor_rows_b.tolist() == [0, 1, 2, 3, 4, 5]
    assert "anchor" not in side_b(tiny_xlmr, batch).metrics


def test_mexma_anchor_needs_prepared_targets_and_a_non_negative_weight(tiny_xlmr, corpus):
    objective = _objective(tiny_xlmr, anchor_weight=1.0)
    with pytest.raises(RuntimeError, match="prepare"):  # examples not from prepare(): no targets
        _batch(objective, tiny_xlmr, corpus)
    with pytest.raises(ValueError, match="anchor_weight"):
        MEXMAConfig(anchor_weight=-0.1)
    with pytest.raises(ValueError, match="anchor_translation_weight"):
        MEXMAConfig(anchor_translation_weight=-1.0)


# --------------------------------------------------------------------------- token-gradient switch
def test_token_gradients_on_reach_the_masked_pass(tiny_xlmr, corpus):
    objective = _objective(tiny_xlmr, alpha=0.0, koleo=False, token_gradients=True)
    batch = _batch(objective, tiny_xlmr, corpus)
    out = objective(tiny_xlmr, batch)
    hidden_masked = out.extras["hidden_masked"]
    assert hidden_masked.requires_grad
    (grad,) = torch.autograd.grad(out.loss, hidden_masked, retain_graph=True)
    row_norms = grad.norm(dim=1)
    first = batch.masked.first_token_index
    others = torch.ones_like(row_norms, dtype=torch.bool)
    others[first] = False
    # Position 0 is overwritten by the other sentence's vector: no gradient there, plenty elsewhere.
    assert torch.all(row_norms[first] == 0)
    assert torch.all(row_norms[others] > 0)


def test_token_gradients_off_reach_the_encoder_only_through_sentence_vectors(tiny_xlmr, corpus):
    objective = _objective(tiny_xlmr, alpha=0.0, koleo=False, token_gradients=False)
    batch = _batch(objective, tiny_xlmr, corpus)
    out = objective(tiny_xlmr, batch)
    assert not out.extras["hidden_masked"].requires_grad
    hidden_clean = out.extras["hidden_clean"]

    layer_params = [p for n, p in tiny_xlmr.model.named_parameters() if n.startswith("encoder.")]
    grads = torch.autograd.grad(out.loss, [hidden_clean, *layer_params], retain_graph=True)
    g_clean, g_params = grads[0], grads[1:]

    cls = batch.clean.first_token_index
    not_cls = torch.ones(hidden_clean.shape[0], dtype=torch.bool)
    not_cls[cls] = False
    assert torch.all(g_clean[not_cls] == 0)
    assert torch.all(g_clean[cls].norm(dim=1) > 0)

    # The encoder layers' whole gradient is the CLS rows' gradient pushed back through the clean pass.
    assert sum(g.abs().sum().item() for g in g_params) > 0
    via_cls = torch.autograd.grad(hidden_clean, layer_params, grad_outputs=g_clean, retain_graph=True)
    for g, v in zip(g_params, via_cls):
        torch.testing.assert_close(g, v, rtol=1e-5, atol=1e-8)

    # With token gradients on, the same MLM loss also flows through the masked pass.
    objective.config.token_gradients = True
    out_on = objective(tiny_xlmr, batch)
    assert out_on.loss.item() == pytest.approx(out.loss.item(), rel=1e-6)  # same forward value
    g_on = torch.autograd.grad(out_on.loss, layer_params)
    diff = sum((a - b).abs().sum().item() for a, b in zip(g_on, g_params))
    assert diff > 1e-3 * sum(g.abs().sum().item() for g in g_on)


def test_token_gradients_off_mask_embedding_learns_only_through_tied_projection(tiny_xlmr, corpus):
    """The <mask> row of the word embeddings appears only in the masked pass: without token
    gradients, its gradient is exactly the tied output projection's."""
    objective = _objective(tiny_xlmr, alpha=0.0, koleo=False, token_gradients=False)
    batch = _batch(objective, tiny_xlmr, corpus)
    assert (batch.masked.input_ids == objective.mask_token_id).any()
    assert not (batch.clean.input_ids == objective.mask_token_id).any()
    embedding = tiny_xlmr.word_embeddings.weight
    out = objective(tiny_xlmr, batch)
    (g_full,) = torch.autograd.grad(out.loss, embedding)

    # Projection only: the same head loss with every encoder output detached.
    s_a, s_b = out.extras["s_a"].detach(), out.extras["s_b"].detach()
    losses, positions = objective.head(
        out.extras["hidden_masked"],
        torch.cat([s_b, s_a]),
        batch.masked,
        batch.labels,
        embedding,
        tiny_xlmr.attention,
    )
    from_a = positions < int(batch.clean.cu_seqlens[batch.num_pairs])
    proj_loss = objective.config.beta * (losses[from_a].mean() + losses[~from_a].mean())
    (g_proj,) = torch.autograd.grad(proj_loss, embedding)

    mask_id = objective.mask_token_id
    assert g_full[mask_id].abs().sum() > 0
    torch.testing.assert_close(g_full[mask_id], g_proj[mask_id], rtol=1e-5, atol=1e-9)
    # A row used by the clean sentences also gets an input-embedding gradient via S_A / S_B.
    used = int(batch.clean.input_ids[1])
    assert (g_full[used] - g_proj[used]).abs().sum() > 0


# --------------------------------------------------------------------------- collation
def test_collate_does_not_depend_on_world_size(tiny_xlmr, corpus):
    objective = _objective(tiny_xlmr)
    examples = _examples(tiny_xlmr, corpus, n=5)
    whole = objective.collate(examples, np.random.default_rng(7), tiny_xlmr, rank=0, world_size=1)
    parts = [objective.collate(examples, np.random.default_rng(7), tiny_xlmr, r, 2) for r in range(2)]
    assert [p.num_pairs for p in parts] == [3, 2] and whole.num_pairs == 5

    def sides(b):
        """(A sequences, B sequences) of clean ids, masked ids and labels."""
        n = b.num_pairs
        clean = [s.tolist() for s in b.clean.split(b.clean.input_ids)]
        masked = [s.tolist() for s in b.masked.split(b.masked.input_ids)]
        labels = [s.tolist() for s in b.clean.split(b.labels)]
        return [(x[:n], x[n:]) for x in (clean, masked, labels)]

    w = sides(whole)
    p0, p1 = sides(parts[0]), sides(parts[1])
    for k in range(3):
        assert p0[k][0] + p1[k][0] == w[k][0]
        assert p0[k][1] + p1[k][1] == w[k][1]
    # Clean A sequences are the examples' ids; masks really differ between A and a masked copy.
    assert w[0][0] == [e.ids_a for e in examples]
    assert w[1][0] != w[0][0]
    assert whole.masked.seqlens == whole.clean.seqlens
    # Another seed draws other masks (the comparison above is not vacuous).
    other = objective.collate(examples, np.random.default_rng(8), tiny_xlmr)
    assert sides(other)[2] != w[2]


def test_cross_unmasking_restricted_softmax_by_hand():
    """output_ids [0, 2, 3]: the softmax runs over those rows only, labels become their positions."""
    head, layout, masked_hidden, other, _ = _head_inputs()
    labels = torch.tensor([2, IGNORE_INDEX, 3, 0, IGNORE_INDEX])
    losses, positions = head(
        masked_hidden, other, layout, labels, torch.tensor(E), SdpaVarlenAttention(), torch.tensor([0, 2, 3])
    )
    assert positions.tolist() == [0, 2, 3]
    # Rows' full logits (see the test above) with column 1 dropped:
    # row 0 [1, 3, -1.5] label 2 -> 3; row 2 [2, 2, -2.5] label 3 -> -2.5; row 3 [0, -1, -0.5] label 0 -> 0.
    expected = [_lse(1, 3, -1.5) - 3, _lse(2, 2, -2.5) - (-2.5), _lse(0, -1, -0.5) - 0]
    np.testing.assert_allclose(losses.detach().numpy(), expected, atol=1e-6)


def test_mexma_corpus_vocabulary_covers_every_label_and_only_corpus_pieces(tiny_xlmr, corpus):
    objective = _objective(tiny_xlmr, output_vocabulary="corpus")
    pairs = [TranslationPair("en", corpus[2 * i], "xx", corpus[2 * i + 1]) for i in range(6)]
    examples = objective.prepare(pairs, tiny_xlmr, 64)
    used = {t for ex in examples for t in (*ex.ids_a, *ex.ids_b)} - set(tiny_xlmr.tokenizer.all_special_ids)
    assert objective.output_ids.tolist() == sorted(used)
    assert len(used) < len(tiny_xlmr.tokenizer)  # a real restriction on this corpus
    batch = objective.collate(examples, np.random.default_rng(0), tiny_xlmr)
    masked_labels = batch.labels[batch.labels != IGNORE_INDEX]
    assert set(masked_labels.tolist()) <= used
    out = objective(tiny_xlmr, batch)
    # The restricted CE is the full CE renormalised over fewer classes: never larger.
    full = _objective(tiny_xlmr)
    full.load_state_dict(objective.state_dict())
    assert out.metrics["mlm"] < full(tiny_xlmr, batch).metrics["mlm"]
    with pytest.raises(ValueError, match="output_vocabulary"):
        MEXMAConfig(output_vocabulary="sampled")


def test_mexma_with_a_mean_pooled_backbone_puts_the_mean_in_position_zero(tiny_xlmr, corpus):
    tiny_xlmr.pooling = "mean"
    try:
        objective = _objective(tiny_xlmr)
        batch = _batch(objective, tiny_xlmr, corpus)
        out = objective(tiny_xlmr, batch)
        hidden = out.extras["hidden_clean"]
        means = torch.stack([piece.mean(0) for piece in hidden.split(batch.clean.seqlens)])
        torch.testing.assert_close(torch.cat([out.extras["s_a"], out.extras["s_b"]]), means)
        assert not torch.allclose(means, hidden.index_select(0, batch.clean.first_token_index))
    finally:
        tiny_xlmr.pooling = "cls"
