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


def test_the_default_runtime_is_auto_everywhere(zoo_dir, monkeypatch) -> None:
    """from_pretrained, encode files, eval, serve and scale encode all default to runtime='auto',
    resolved by the written rules (the torch runtime stays one argument away)."""
    import inspect

    import modsenc.encoder.loading as loading
    from modsenc.cli.app import main as cli
    from modsenc.encoder.encode_file import encode_file
    from modsenc.eval.runner import evaluate
    from modsenc.runtimes.auto import RuntimeChoice
    from modsenc.scale.encode import encode_corpus
    from modsenc.serving.app import ServeConfig

    for function in (ModularEncoder.from_pretrained, encode_file, evaluate, encode_corpus):
        assert inspect.signature(function).parameters["runtime"].default == "auto", function
    assert ServeConfig(zoo=str(zoo_dir)).runtime == "auto"
    for command in ("encode", "eval", "serve"):
        option = next(p for p in cli.commands[command].params if p.name == "runtime")
        assert option.default == "auto", command
    asked = []
    monkeypatch.setattr(
        loading,
        "choose_runtime",
        lambda device: asked.append(device) or RuntimeChoice("torch", "fp32", None, "t"),
    )
    encoder = ModularEncoder.from_pretrained(zoo_dir, verify=False)
    assert asked == [torch.device("cpu")] and (encoder.runtime, encoder.precision) == ("torch", "fp32")


def test_auto_without_openvino_logs_one_line_naming_the_extra(caplog) -> None:
    from modsenc.runtimes.auto import _warn_without_openvino

    _warn_without_openvino.cache_clear()
    for _ in range(3):  # once a process, however many encoders
        assert choose_runtime(CPU, frozenset({"amx_bf16"}), frozenset()).runtime == "torch"
    lines = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(lines) == 1 and "pip install 'modsenc[openvino]'" in lines[0]
    assert "runtime='torch'" in lines[0]


def test_an_explicit_quantize_stays_under_auto(zoo_dir, monkeypatch) -> None:
    import modsenc.encoder.loading as loading
    from modsenc.runtimes.auto import RuntimeChoice

    monkeypatch.setattr(loading, "choose_runtime", lambda device: RuntimeChoice("torch", "auto", None, "t"))
    pytest.importorskip("torchao")
    encoder = ModularEncoder.from_pretrained(zoo_dir, quantize="int8", verify=False)
    assert (encoder.runtime, encoder.quantization) == ("torch", "int8")
