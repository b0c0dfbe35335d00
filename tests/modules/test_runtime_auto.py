"""What runtime="auto" chooses on each kind of CPU: runtimes/auto.py's written rules, under mocked
CPU flags and installed packages, resolved before anything loads."""

from __future__ import annotations

import pytest
import torch

from modsenc.encoder import ModularEncoder
from modsenc.runtimes.auto import AVX2_CHOICE, choose_runtime

CPU = torch.device("cpu")
BOTH = frozenset({"openvino", "nncf"})


@pytest.mark.parametrize(
    ("device", "flags", "installed", "expected"),
    [
        (torch.device("cuda"), frozenset({"amx_bf16"}), BOTH, ("torch", "auto", None)),
        (CPU, frozenset({"amx_bf16", "avx512_vnni"}), frozenset(), ("torch", "auto", None)),
        (
            CPU,
            frozenset({"amx_bf16", "amx_int8", "avx512_vnni", "avx512_bf16"}),
            BOTH,
            ("openvino", "bf16", None),
        ),
        # Zen 4: bf16, not the faster int8, whose dev cost is outside the quality bound
        (CPU, frozenset({"avx512_vnni", "avx512_bf16"}), BOTH, ("openvino", "bf16", None)),
        (CPU, frozenset({"avx512_vnni"}), BOTH, ("openvino", "auto", None)),
        (CPU, frozenset({"avx512_vnni"}), frozenset({"openvino"}), ("openvino", "auto", None)),
        (
            CPU,
            frozenset({"avx2", "fma"}),
            BOTH,
            (AVX2_CHOICE.runtime, AVX2_CHOICE.dtype, AVX2_CHOICE.quantize),
        ),
    ],
)
def test_auto_picks_by_the_written_rules_under_mocked_cpu_features(
    device, flags, installed, expected
) -> None:
    choice = choose_runtime(device, flags, installed)
    assert (choice.runtime, choice.dtype, choice.quantize) == expected
    assert choice.rule


def test_runtime_auto_resolves_before_loading(zoo_dir, monkeypatch) -> None:
    import modsenc.encoder.loading as loading
    from modsenc.runtimes.auto import RuntimeChoice

    monkeypatch.setattr(
        loading, "choose_runtime", lambda device: RuntimeChoice("torch", "fp32", None, "test")
    )
    encoder = ModularEncoder.from_pretrained(zoo_dir, runtime="auto", verify=False)
    assert (encoder.runtime, encoder.precision, encoder.quantization) == ("torch", "fp32", None)
    explicit = ModularEncoder.from_pretrained(zoo_dir, runtime="auto", dtype="bf16", verify=False)
    assert explicit.precision == "bf16"  # an explicit dtype wins over the rule's
