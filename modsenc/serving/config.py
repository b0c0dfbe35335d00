"""The server's settings (``ServeConfig``, one field per ``modsenc serve`` option) and their checks."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from modsenc.backbone.quantization import check_quantization, require_torchao
from modsenc.encoder import ModularEncoder
from modsenc.utils.errors import InputError

# A browser's Origin header: scheme://host[:port], nothing after it (RFC 6454).
ORIGIN = re.compile(r"[a-z][a-z0-9+.-]*://(\[[0-9a-f:.]+\]|[^\s/?#@:\[\]]+)(:[0-9]{1,5})?", re.IGNORECASE)


def check_origin(origin: str) -> None:
    """A ``cors_origins`` entry: ``*`` or an origin as browsers send it (``https://app.example``,
    ``http://localhost:3000``); anything else would match no request, silently."""
    if origin == "*" or ORIGIN.fullmatch(origin):
        return
    start = ORIGIN.match(origin)  # a whole origin, then more: a browser never sends a path
    if start and origin[start.end()] == "/":
        hint = f"drop the path: browsers send {start.group()!r}"
    else:
        hint = "give scheme://host[:port], e.g. https://app.example, or * for any"
    raise InputError(f"cors_origins: {origin!r} is not an origin; {hint}")


@dataclass
class ServeConfig:
    """Server settings; the ``modsenc serve`` options map one to one."""

    zoo: str
    languages: list[str] = field(default_factory=list)  # loaded at start-up; others on first request
    max_languages: int | None = None  # languages kept loaded (least recently used evicted)
    max_memory_mb: float | None = None  # module bytes kept loaded (least recently used evicted)
    max_batch_size: int = 32  # texts encoded in one forward pass
    max_wait_ms: float = 2.0  # how long a batch may wait for more texts of its language
    # texts in one request: OpenAI's limit (LangChain's OpenAIEmbeddings sends 1,000 a request);
    # the batcher encodes them max_batch_size at a time
    max_inputs: int = 2048
    max_input_tokens: int | None = None  # token limit per text (default: the model's)
    max_queue: int = 4096  # texts waiting; past this, 503 + Retry-After
    max_body_bytes: int = 2_000_000  # request body size
    # Uvicorn has no body timeout: without these a client that promises a body and stalls, or
    # trickles it, holds its connection and a task for ever. 408 past either.
    max_body_seconds: float = 30.0  # to receive a whole request body
    max_body_idle_seconds: float = 10.0  # between two reads of a body
    # Nor a header timeout: a head (request line and headers) that never finishes held its
    # connection for ever. 408 past it (serving/protocol.py).
    max_header_seconds: float = 10.0
    retry_after_s: int = 1
    device: str | None = None
    quantize: str | None = None  # "int8": the backbone's linear layers in int8 (torchao)
    dtype: str = "auto"  # the GEMMs' precision: auto (bf16 where native), fp32 or bf16
    runtime: str = "auto"  # "openvino": each language merged and compiled by OpenVINO (CPU); "auto"
    calibration: list[str] | None = None  # openvino int8: the calibration sentences (None: bundles')
    other: str = "backbone"  # text in a language without a bundle: backbone, refuse (422) or best
    model_name: str | None = None  # the `model` echoed in responses (default: the zoo folder's name)
    # the prompt of a request that names none (TEI's --default-prompt-name; None: the backbone's prefix)
    default_prompt_name: str | None = None
    # every endpoint but /health needs `Authorization: Bearer <api_key>` (None: no key)
    api_key: str | None = field(default=None, repr=False)
    cors_origins: list[str] = field(default_factory=list)  # origins browsers may call from ("*": any)
    request_timeout: float = 60.0  # seconds to answer an embedding request; 503 past it

    @property
    def name(self) -> str:
        """The model name the server reports (``model`` in responses, ``id`` in /v1/models)."""
        return self.model_name or Path(self.zoo).resolve().name

    def check(self) -> None:
        if check_quantization(self.quantize) is not None and self.runtime == "torch":
            require_torchao(self.quantize)
        for name in ("max_batch_size", "max_inputs", "max_queue", "max_body_bytes", "retry_after_s"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.max_wait_ms < 0:
            raise ValueError(f"max_wait_ms must be >= 0, got {self.max_wait_ms}")
        for name in ("max_body_seconds", "max_body_idle_seconds", "max_header_seconds", "request_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.max_queue < self.max_inputs:
            raise ValueError(
                f"max_queue ({self.max_queue}) must be at least max_inputs ({self.max_inputs}), "
                "or a full-size request could never be queued"
            )
        if self.max_input_tokens is not None and self.max_input_tokens < 2:
            raise ValueError("max_input_tokens must be >= 2 (the special tokens)")
        if self.max_languages is not None and len(self.languages) > self.max_languages:
            raise ValueError(
                f"--languages names {len(self.languages)} languages but max_languages is {self.max_languages}"
            )
        # A header value: printable ASCII, no spaces (clients send it as `Bearer <key>`)
        if self.api_key is not None and not (self.api_key.isascii() and self.api_key.isprintable()):
            raise ValueError("the API key must be printable ASCII")
        if self.api_key is not None and (not self.api_key or " " in self.api_key):
            raise ValueError("the API key must be non-empty and hold no spaces")
        for origin in self.cors_origins:
            check_origin(origin)

    def load_encoder(self) -> ModularEncoder:
        return ModularEncoder.from_pretrained(
            self.zoo,
            languages=self.languages or None,
            device=self.device,
            max_length=self.max_input_tokens,
            max_languages=self.max_languages,
            max_memory_mb=self.max_memory_mb,
            quantize=self.quantize,
            dtype=self.dtype,
            runtime=self.runtime,
            other=self.other,
            calibration=self.calibration,
        )
