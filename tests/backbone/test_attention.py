"""Choosing an attention backend, and what each does where its kernel cannot run (CPU here)."""

from __future__ import annotations

import pytest
import torch

from modsenc.backbone import attention
from modsenc.backbone.attention import (
    SdpaVarlenAttention,
    TorchVarlenAttention,
    get_attention_backend,
)


def _reference(q: torch.Tensor, seqlens: list[int]) -> torch.Tensor:
    """Each sequence attends to itself alone, one plain softmax(QK^T / sqrt(d)) V at a time."""
    out, start = [], 0
    for n in seqlens:
        x = q[start : start + n].transpose(0, 1)  # (heads, n, dim)
        weights = torch.softmax(x @ x.transpose(1, 2) / x.shape[-1] ** 0.5, dim=-1)
        out.append((weights @ x).transpose(0, 1))
        start += n
    return torch.cat(out)


def test_per_length_sdpa_attends_within_each_sequence():
    torch.manual_seed(0)
    seqlens = [2, 2, 3, 5]  # two runs of equal length, then two single sequences
    q = torch.randn(sum(seqlens), 2, 4)
    got = SdpaVarlenAttention()(q, q, q, seqlens)
    assert torch.allclose(got, _reference(q, seqlens), atol=1e-6)
    # A one-token sequence attends only to itself: its output is its own value.
    assert torch.allclose(SdpaVarlenAttention()(q[:1], q[:1], q[:1], [1]), q[:1])


def test_varlen_runs_the_per_length_path_where_flash_cannot():
    """fp32 inputs, a CPU tensor or attention dropout: the same exact attention as sdpa's path."""
    torch.manual_seed(0)
    seqlens = [3, 1, 4]
    q = torch.randn(sum(seqlens), 2, 4)
    assert torch.allclose(TorchVarlenAttention()(q, q, q, seqlens), _reference(q, seqlens), atol=1e-6)


def test_auto_picks_the_first_cuda_backend_whose_kernel_runs(monkeypatch):
    monkeypatch.setitem(attention._CHECKS, "varlen", lambda: False)
    monkeypatch.setitem(attention._CHECKS, "xformers", lambda: False)
    assert get_attention_backend("auto", "cuda").name == "sdpa"
    monkeypatch.setitem(attention._CHECKS, "varlen", lambda: True)
    assert get_attention_backend("auto", "cuda").name == "varlen"
    # Off CUDA, auto is the per-length SDPA path whatever the GPU could run.
    assert get_attention_backend("auto", "cpu").name == "sdpa"
    assert get_attention_backend("auto", None).name == "sdpa"


def test_a_backend_that_does_not_run_here_is_refused_with_what_it_needs(monkeypatch):
    monkeypatch.setitem(attention._CHECKS, "xformers", lambda: False)
    with pytest.raises(RuntimeError, match=r"'xformers' does not run here: .*xformers build for this torch"):
        get_attention_backend("xformers", "cuda")
    with pytest.raises(ValueError, match=r"choose one of: auto, sdpa, varlen, xformers"):
        get_attention_backend("flash", "cuda")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the answer without a GPU")
def test_no_cuda_kernel_runs_without_a_gpu():
    assert attention.varlen_available() is False
    assert attention.xformers_available() is False
    assert attention.available_backends() == ["sdpa"]
