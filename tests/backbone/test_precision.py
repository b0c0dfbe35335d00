"""What ``auto`` chooses on a CPU with and without native bf16 (the detection mocked: torch's own
probes, or the kernel's CPU flags where torch has none), and that the choices act."""

from __future__ import annotations

import logging

import pytest
import torch

from modsenc.backbone import precision
from modsenc.backbone.precision import (
    autocast,
    check_precision,
    cpu_has_native_bf16,
    full_precision,
    resolve_precision,
)

PROBES = ("_is_amx_tile_supported", "_is_avx512_bf16_supported")


@pytest.fixture()
def cpu(monkeypatch):
    """``cpu(amx=..., avx512_bf16=...)`` sets what torch.cpu reports; ``cpu(flags={...})`` removes
    torch's probes (an older torch) so that /proc/cpuinfo's flags, as given, decide."""

    def report(amx: bool = False, avx512_bf16: bool = False, flags: set[str] | None = None) -> None:
        cpu_has_native_bf16.cache_clear()  # detection is cached per process
        if flags is None:
            monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
            monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
        else:
            for name in PROBES:
                monkeypatch.delattr(torch.cpu, name, raising=False)
            monkeypatch.setattr(precision, "_cpuinfo_flags", lambda: set(flags))

    yield report
    cpu_has_native_bf16.cache_clear()  # the next caller detects the real CPU again


@pytest.mark.parametrize(
    ("amx", "avx512_bf16", "expected"),
    [
        (True, True, "bf16"),  # Sapphire Rapids and later
        (False, True, "bf16"),  # Cooper Lake, AMD Zen 4
        (True, False, "bf16"),
        (False, False, "fp32"),  # e.g. Ice Lake, Zen 3: bf16 would be emulated
    ],
)
def test_auto_follows_what_torch_reports(cpu, amx, avx512_bf16, expected) -> None:
    cpu(amx=amx, avx512_bf16=avx512_bf16)
    assert cpu_has_native_bf16() is (expected == "bf16")
    assert resolve_precision("auto", "cpu") == expected
    assert resolve_precision(None, torch.device("cpu")) == expected  # None means auto


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ({"fpu", "avx2", "avx512f", "avx512_vnni", "amx_tile", "amx_bf16", "amx_int8"}, "bf16"),
        ({"avx2", "avx512f", "avx512_bf16"}, "bf16"),
        ({"fpu", "avx2", "avx512f", "avx512_vnni"}, "fp32"),  # VNNI is int8, not bf16
        (set(), "fp32"),  # /proc/cpuinfo unreadable
    ],
)
def test_without_torchs_probes_the_cpu_flags_decide(cpu, flags, expected) -> None:
    cpu(flags=flags)
    assert not any(hasattr(torch.cpu, name) for name in PROBES)
    assert resolve_precision("auto", "cpu") == expected


def test_cpuinfo_flags_are_read_from_the_first_flags_line(monkeypatch, tmp_path) -> None:
    fake = tmp_path / "cpuinfo"
    fake.write_text(
        "processor\t: 0\nmodel name\t: Some CPU\nflags\t\t: fpu sse2 avx512_bf16 amx_tile\n"
        "bugs\t\t: spectre_v1\n\nprocessor\t: 1\nflags\t\t: fpu\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(precision, "Path", lambda _: fake)
    assert precision._cpuinfo_flags() == {"fpu", "sse2", "avx512_bf16", "amx_tile"}
    monkeypatch.setattr(precision, "Path", lambda _: tmp_path / "absent")
    assert precision._cpuinfo_flags() == set()


def test_the_detection_is_asked_once_per_process(cpu, monkeypatch) -> None:
    cpu(amx=True)
    calls = []
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: calls.append(1) or True)
    cpu_has_native_bf16.cache_clear()
    for _ in range(3):
        assert resolve_precision("auto", "cpu") == "bf16"
    assert calls == [1]


def test_an_explicit_choice_is_honoured_whatever_the_cpu(cpu, caplog) -> None:
    cpu(amx=True, avx512_bf16=True)
    assert resolve_precision("fp32", "cpu") == "fp32"
    assert resolve_precision("BF16", "cpu") == "bf16"
    assert not caplog.records
    cpu(amx=False, avx512_bf16=False)
    with caplog.at_level(logging.WARNING, logger="modsenc.backbone.precision"):
        assert resolve_precision("bf16", "cpu") == "bf16"  # slow there, not wrong
    assert [r.getMessage() for r in caplog.records] == [
        "bf16 on a cpu without native bf16: emulated, slower than fp32"
    ]
    with pytest.raises(ValueError, match=r"must be one of auto, fp32, bf16, got 'fp16'"):
        check_precision("fp16")


def test_autocast_puts_the_gemms_in_bf16_and_full_precision_takes_them_back() -> None:
    a, b = torch.randn(4, 8), torch.randn(8, 3)
    with autocast("cpu", "bf16"):
        assert (a @ b).dtype == torch.bfloat16
        with full_precision(a):
            assert (a @ b).dtype == torch.float32
    with autocast(torch.device("cpu"), "fp32"):
        assert (a @ b).dtype == torch.float32
    with pytest.raises(ValueError, match=r"resolve the precision first \(fp32 or bf16\), got 'auto'"):
        autocast("cpu", "auto")
