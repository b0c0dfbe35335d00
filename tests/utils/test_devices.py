"""check_device: a device name checked against this torch build before anything loads (issue 36, 4)."""

from __future__ import annotations

import pytest
import torch

from modsenc.utils.devices import check_device


def _gpus(monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    """Make torch report ``count`` CUDA devices (this test machine has none)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)


@pytest.mark.parametrize("name", ["tpu", "gpu", "cuda:x", "", "meta", "CPU"])
def test_a_name_modsenc_cannot_run_on_lists_the_valid_forms(name: str) -> None:
    with pytest.raises(
        ValueError, match=r"^--device .*: not a device modsenc can run on; use auto, cpu, cuda"
    ):
        check_device(name, "--device")


def test_auto_and_none_are_cuda_when_there_is_one_else_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    _gpus(monkeypatch, 0)
    assert check_device("auto") == check_device(None) == torch.device("cpu")
    _gpus(monkeypatch, 2)
    assert check_device("auto") == torch.device("cuda")


def test_cuda_is_refused_where_torch_has_none_unless_only_the_name_is_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _gpus(monkeypatch, 0)
    with pytest.raises(ValueError, match=r"^--device cuda: torch here has no CUDA device; use --device cpu$"):
        check_device("cuda", "--device")
    with pytest.raises(ValueError, match=r"^device cuda:0: torch here has no CUDA device; use device='cpu'$"):
        check_device("cuda:0")
    with pytest.raises(ValueError, match=r"use --set training.device=cpu$"):
        check_device("cuda", "training.device")
    assert check_device("cuda:1", available=False) == torch.device("cuda", 1)  # a remote cluster's


def test_a_cuda_index_past_the_last_gpu_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    _gpus(monkeypatch, 2)
    assert check_device("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(
        ValueError, match=r"^--device cuda:2: torch here has 2 CUDA device\(s\) \(cuda:0 to cuda:1\)$"
    ):
        check_device("cuda:2", "--device")


def test_mps_is_refused_where_torch_has_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(
        ValueError, match=r"^--device mps: torch here has no MPS device \(Apple GPU\); use --device cpu$"
    ):
        check_device("mps", "--device")
    assert check_device("cpu:0") == torch.device("cpu", 0)
