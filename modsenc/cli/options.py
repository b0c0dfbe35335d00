"""Options and parameter callbacks that several commands share (same names, defaults and help)."""

from __future__ import annotations

import math

import click

from modsenc.backbone.quantization import QUANTIZATIONS
from modsenc.modules.defaults import DEFAULT_ZOO, ZOO_ENV, default_zoo


def hub_zoo(context: click.Context, param: click.Parameter, value: str) -> str:
    """A Hub repo id (org/name) given to a command that reads a zoo: its local snapshot."""
    from modsenc.modules.hub import is_repo_id, resolve_zoo  # noqa: PLC0415 - no torch

    if value is None or not is_repo_id(str(value)):
        return value
    try:
        return str(resolve_zoo(value))
    except (FileNotFoundError, ValueError, OSError) as err:
        raise click.BadParameter(str(err), context, param) from err


def zoo_option(
    help_text: str = "Zoo to read: its backbone and language bundles (from add-language), or a Hub repo "
    "id (org/name).",
    hub: bool = True,
):
    """--zoo, with the same default for every command (modsenc.modules.defaults.default_zoo); a
    command that only reads the zoo also takes a Hub repo id (``hub``)."""
    return click.option(
        "--zoo",
        "zoo_dir",
        default=default_zoo,
        callback=hub_zoo if hub else None,
        type=click.Path(file_okay=False),
        help=f"{help_text} [default: {DEFAULT_ZOO}, or ${ZOO_ENV} when set; without either, the zoo "
        "shipped with modsenc (uz kk az ky ug on multilingual-e5-small)]",
    )


def overwrite_option(what: str = "OUTPUT"):
    return click.option(
        "--overwrite",
        is_flag=True,
        help=f"Replace an existing {what} (of a folder, only the files modsenc wrote there).",
    )


def yaml_spec(text: str, option: str) -> object:
    """A data spec given as a YAML mapping ('{hf: wmt19, ...}'), or the text as it is (a path)."""
    import yaml  # noqa: PLC0415

    if not text.lstrip().startswith("{"):
        return text
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or "invalid YAML"
        message = f"{text!r} is not a valid YAML mapping ({problem}{where})"
        raise click.BadParameter(message, param_hint=option) from err


def finite(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a finite number", ctx=ctx, param=param)
    return value


def quantize_option(what: str):
    return click.option(
        "--quantize",
        type=click.Choice(list(QUANTIZATIONS)),
        default="none",
        show_default=True,
        help=f"int8: run {what} linear layers in int8 (torch runtime: torchao, cosine ~0.996 to float32; "
        "openvino runtime: each language's graph quantised by NNCF, calibrated on the bundle's own "
        "sentences or --calibration). openvino only: int8-mixed keeps each FFN's output projection "
        "float (cosine ~0.999); int8-weights quantises the weights alone (no calibration). "
        "docs/results/int8.md measures each.",
    )


def calibration_option():
    """--calibration: the sentences the openvino runtime's int8 graphs are calibrated on."""
    return click.option(
        "--calibration",
        "calibration_path",
        type=click.Path(exists=True, dir_okay=False),
        default=None,
        help="--runtime openvino --quantize int8: a UTF-8 file of a few hundred sentences, one a line, "
        "to calibrate every language's int8 graph on [default: each bundle's own calibration.txt].",
    )


def read_calibration(path: str | None) -> list[str] | None:
    """--calibration's sentences (non-empty lines), read before any model loads; a bad byte is an
    error naming the file and line."""
    if path is None:
        return None
    from modsenc.data.lines import iter_lines  # noqa: PLC0415
    from modsenc.utils.errors import InputError  # noqa: PLC0415

    sentences = [text for _, text in iter_lines(path) if text.strip()]
    if not sentences:
        raise InputError(f"--calibration {path}: no sentences (give a few hundred, one a line)")
    return sentences


def runtime_option():
    return click.option(
        "--runtime",
        type=click.Choice(["torch", "openvino", "auto"]),
        default="auto",
        show_default=True,
        help="auto (the default): the runtime and precision measured fastest on this kind of CPU "
        "that keep dev quality (openvino where installed: bf16 with AMX or AVX512_BF16, else fp32; "
        "torch on a GPU or without openvino, with one log line naming the extra; never int8: pass "
        "--quantize int8 yourself; an explicit --dtype or --quantize wins; rules in "
        "modsenc/runtimes/auto.py). openvino (CPU; pip install 'modsenc[openvino]'): each "
        "language's modules merged into one encoder compiled by OpenVINO when first used (about "
        "1.7x the torch runtime in bf16 on a CPU with AMX; docs/benchmarks.md). torch: the "
        "packed backbone with each language's modules merged into a copy of its layers, the reference.",
    )


def mode_option(help: str = "cross: with the alignment adapters (cross-lingual tasks); mono: without."):
    return click.option(
        "--mode", type=click.Choice(["cross", "mono"]), default="cross", show_default=True, help=help
    )


def other_option():
    return click.option(
        "--other",
        type=click.Choice(["backbone", "refuse", "best"]),
        default="backbone",
        show_default=True,
        help="Lines detected in a language the zoo has no bundle for (e.g. Russian in an en+uz "
        "zoo): backbone = encode them with no modules (the backbone's own multilingual space); "
        "refuse = stop, naming the line and language; best = the nearest installed language "
        "(the old closed-set routing).",
    )


def dtype_option():
    return click.option(
        "--dtype",
        type=click.Choice(["auto", "fp32", "bf16"]),
        default="auto",
        show_default=True,
        help="Precision of the matrix products: auto = bf16 where the device computes it natively "
        "(CUDA; CPUs with AMX or AVX512_BF16: about 2x faster, cosine ~0.99998 to fp32), else fp32.",
    )


def weights_option():
    """--weights of `zoo pack` and `push` (modsenc.modules.distribution.WEIGHT_DTYPES)."""
    return click.option(
        "--weights",
        type=click.Choice(["fp16", "fp32"]),
        default="fp16",
        show_default=True,
        help="How module weights are stored; loading casts them back to the backbone's dtype.",
    )


def engine_options(func):
    for option in reversed(
        [
            click.option(
                "--workers",
                type=click.IntRange(min=1),
                default=1,
                show_default=True,
                help="Ray actors working at once (each holds one model, or one part of the index).",
            ),
            click.option(
                "--address",
                default=None,
                help="Ray cluster to join: auto (the one on this machine) or ray://HOST:10001 "
                "[default: start a local one]",
            ),
        ]
    ):
        func = option(func)
    return func
