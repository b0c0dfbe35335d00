"""The HTTP embedding server: serve."""

from __future__ import annotations

import os

import click

from modsenc.cli.app import main
from modsenc.cli.options import (
    calibration_option,
    dtype_option,
    other_option,
    quantize_option,
    read_calibration,
    runtime_option,
    zoo_option,
)
from modsenc.utils.logs import log_level_name

API_KEY_ENV = "MODSENC_API_KEY"


def api_key_given(context: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """--api-key, or $MODSENC_API_KEY; set but empty is refused, as ``--api-key ''`` is (click
    reads an empty variable as unset, which would start a server open to anyone, silently)."""
    if value is None and os.environ.get(API_KEY_ENV) is not None:
        message = f"${API_KEY_ENV} is set but empty: set it to the key, or unset it to serve without one"
        raise click.BadParameter(message, context, param)
    return value


@main.command("serve")
@zoo_option()
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to bind (loopback unless told)."
)
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True, help="Port to bind.")
@click.option(
    "--languages", default="", help="Comma-separated languages to load at start (others on demand)."
)
@click.option("--max-languages", type=click.IntRange(min=1), help="Languages kept loaded; LRU evicted.")
@click.option(
    "--max-memory-mb", type=click.FloatRange(min=0), help="Module megabytes kept loaded; LRU evicted."
)
@click.option(
    "--max-batch-size",
    type=click.IntRange(min=1),
    default=32,
    show_default=True,
    help="Texts per forward pass (one language and mode).",
)
@click.option(
    "--max-wait-ms",
    type=click.FloatRange(min=0),
    default=2.0,
    show_default=True,
    help="How long a batch waits for more texts of its language.",
)
@click.option(
    "--max-inputs",
    type=click.IntRange(min=1),
    default=2048,
    show_default=True,
    help="Texts per request (OpenAI's limit; encoded --max-batch-size at a time).",
)
@click.option("--max-input-tokens", type=click.IntRange(min=2), help="Per text [default: the model's].")
@click.option(
    "--max-queue", type=click.IntRange(min=1), default=4096, show_default=True, help="Texts; 503 past."
)
@click.option(
    "--max-body-bytes",
    type=click.IntRange(min=1),
    default=2_000_000,
    show_default=True,
    help="Request body size; 413 past, before it is read.",
)
@click.option(
    "--max-body-seconds",
    type=click.FloatRange(min=0, min_open=True),
    default=30.0,
    show_default=True,
    help="Time to receive a whole request body; 408 past it.",
)
@click.option(
    "--max-body-idle-seconds",
    type=click.FloatRange(min=0, min_open=True),
    default=10.0,
    show_default=True,
    help="Longest pause while a request body arrives; 408 past it.",
)
@click.option(
    "--max-header-seconds",
    type=click.FloatRange(min=0, min_open=True),
    default=10.0,
    show_default=True,
    help="Time to receive a request's line and headers; 408 past it.",
)
@click.option(
    "--request-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=60.0,
    show_default=True,
    help="Seconds to answer an embedding request; 503 with Retry-After past it.",
)
@click.option(
    "--api-key",
    envvar=API_KEY_ENV,
    callback=api_key_given,
    help="Require 'Authorization: Bearer KEY' on every endpoint but /health [env: MODSENC_API_KEY].",
)
@click.option(
    "--served-model-name",
    "model_name",
    help="The model name the server reports and echoes (/v1/models, `model`) [default: the zoo folder's].",
)
@click.option(
    "--default-prompt-name",
    help="The prompt of a request that names none, e.g. passage on e5 [default: the backbone's prefix].",
)
@click.option("--cors-origins", default="", help="Comma-separated origins browsers may call from ('*': any).")
@click.option("--device", default=None, help="cpu, cuda, cuda:1 ... [default: cuda if available]")
@other_option()
@quantize_option("the backbone's")
@dtype_option()
@runtime_option()
@calibration_option()
def serve_command(
    zoo_dir, host, port, languages, cors_origins, device, quantize, dtype, runtime, calibration_path, **limits
) -> None:
    """HTTP embedding server: OpenAI /v1/embeddings, /v1/models; TEI /embed, POST /, /tokenize, /decode,
    /embed_all; /health, /metrics."""
    from modsenc.serving.app import ServeConfig  # noqa: PLC0415
    from modsenc.serving.server import serve  # noqa: PLC0415

    config = ServeConfig(
        zoo_dir,
        [c for c in languages.split(",") if c],
        device=device,
        quantize=quantize,
        dtype=dtype,
        runtime=runtime,
        calibration=read_calibration(calibration_path),
        cors_origins=[o.strip() for o in cors_origins.split(",") if o.strip()],
        **limits,
    )
    serve(config, host=host, port=port, log_level=log_level_name())
