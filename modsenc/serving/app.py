"""The HTTP API: OpenAI-style ``/v1/embeddings`` and ``/v1/models``, text-embeddings-inference-style
``/embed`` (also ``POST /``), ``/health``, ``/info`` and ``/metrics``, on FastAPI (see
docs/design.md, "Serving").

    app = create_app(ServeConfig(zoo="runs/demo/zoo"))
    uvicorn.run(app, host="127.0.0.1", port=8080)

The encoder loads in a worker thread after start-up, so ``/health`` answers (503, then 200) while
the backbone loads. Every refusal is a JSON error with a one-line message: OpenAI's shape
(``{"error": {"message", "type", "param", "code"}}``) under ``/v1/``, text-embeddings-inference's
(``{"error", "error_type"}``) elsewhere. Client errors log one line at INFO; only a server error logs a
traceback. Every request logs one access line (``modsenc.serving.access``).
"""

from __future__ import annotations

import asyncio
import base64
import hmac
import importlib.metadata
import logging
import time
from collections.abc import Callable
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, StrictInt
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.cors import CORSMiddleware

from modsenc.backbone.quantization import check_quantization, require_torchao
from modsenc.encoder import ModularEncoder
from modsenc.routing.router import BACKBONE, Detection, explicit_route
from modsenc.serving.batcher import Batcher, Item, Overloaded
from modsenc.serving.metrics import ServerMetrics
from modsenc.serving.service import (
    Embedded,
    EmbeddingService,
    InputTooLong,
    Text,
    UnknownLanguage,
    UnknownPrompt,
    warnings_logged,
)
from modsenc.utils.errors import ModsencError

log = logging.getLogger("modsenc.serving")
# One line per request; a logger of its own, so it can be silenced or routed apart from the rest.
access_log = log.getChild("access")

ENDPOINTS = ("/v1/embeddings", "/v1/models", "/embed", "/", "/health", "/info", "/metrics")
# The response headers of /embed that carry modsenc's per-text details.
TEI_HEADERS = ("x-modsenc-languages", "x-modsenc-routes", "x-modsenc-truncated", "x-modsenc-tokens")
# Open without an API key: load balancers' and orchestrators' probes carry none, and the answer
# says nothing about the model. /metrics stays behind the key: it shows the languages and the
# traffic, and Prometheus sends a bearer token (`authorization` in a scrape config).
PUBLIC = ("/health",)
# Polled every few seconds by probes and scrapers: their access lines go to DEBUG.
POLLED = ("/health", "/metrics")
# Why token ids are refused (LangChain's OpenAIEmbeddings sends them by default).
TOKEN_IDS = (
    "token ids are not accepted, send text: the ids of OpenAI's tokenizer (tiktoken) are not this "
    "model's tokens; with LangChain, use OpenAIEmbeddings(..., check_embedding_ctx_length=False)"
)


def endpoint_label(path: str) -> str:
    """The ``endpoint`` label of a request in /metrics: a route, or ``other`` (a bounded set)."""
    if path in ENDPOINTS:
        return path
    return "/v1/models/{id}" if path.startswith("/v1/models/") else "other"


# What a zoo that cannot load raises for the user's fault (a damaged or missing bundle file, a
# wrong option): its message says what to do, so it is one line, never a traceback.
LOAD_ERRORS = (OSError, ValueError, KeyError, ImportError, TypeError)


@dataclass
class ServeConfig:
    """Server settings; the ``modsenc serve`` options map one to one."""

    zoo: str
    languages: list[str] = field(default_factory=list)  # loaded at start-up; others on first request
    max_languages: int | None = None  # languages kept loaded (least recently used evicted)
    max_memory_mb: float | None = None  # module bytes kept loaded (least recently used evicted)
    max_batch_size: int = 32  # texts encoded in one forward pass
    max_wait_ms: float = 2.0  # how long a batch may wait for more texts of its language
    max_inputs: int = 256  # texts in one request
    max_input_tokens: int | None = None  # token limit per text (default: the model's)
    max_queue: int = 1024  # texts waiting; past this, 503 + Retry-After
    max_body_bytes: int = 2_000_000  # request body size
    # Uvicorn has no body timeout: without these a client that promises a body and stalls, or
    # trickles it, holds its connection and a task for ever. 408 past either.
    max_body_seconds: float = 30.0  # to receive a whole request body
    max_body_idle_seconds: float = 10.0  # between two reads of a body
    retry_after_s: int = 1
    device: str | None = None
    quantize: str | None = None  # "int8": the backbone's linear layers in int8 (torchao)
    dtype: str = "auto"  # the GEMMs' precision: auto (bf16 where native), fp32 or bf16
    runtime: str = "torch"  # or "openvino": each language merged and compiled by OpenVINO (CPU)
    other: str = "backbone"  # text in a language without a bundle: backbone, refuse (422) or best
    model_name: str | None = None  # the `model` echoed in responses (default: the zoo folder's name)
    # every endpoint but /health needs `Authorization: Bearer <api_key>` (None: no key)
    api_key: str | None = field(default=None, repr=False)
    cors_origins: list[str] = field(default_factory=list)  # origins browsers may call from ("*": any)
    request_timeout: float = 60.0  # seconds to answer an embedding request; 503 past it

    @property
    def name(self) -> str:
        """The model name the server reports (``model`` in responses, ``id`` in /v1/models)."""
        return self.model_name or Path(self.zoo).resolve().name

    def check(self) -> None:
        if check_quantization(self.quantize) is not None:
            require_torchao(self.quantize)
        for name in ("max_batch_size", "max_inputs", "max_queue", "max_body_bytes", "retry_after_s"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.max_wait_ms < 0:
            raise ValueError(f"max_wait_ms must be >= 0, got {self.max_wait_ms}")
        for name in ("max_body_seconds", "max_body_idle_seconds", "request_timeout"):
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
        )


# ----------------------------------------------------------------- errors
class APIError(ModsencError):
    def __init__(
        self,
        status: int,
        message: str,
        kind: str,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.kind, self.param = status, message, kind, param
        self.headers = headers


def printable(message: str) -> str:
    """``message`` with any lone surrogate escaped (``\\ud800``): one echoed from a request (a
    language code, a field name) would make the UTF-8 encoding of the response or log line fail."""
    return message.encode("utf-8", "backslashreplace").decode("utf-8")


def log_refusal(method: str, path: str, status: int, kind: str, message: str) -> None:
    """The one log line of a request refused for the client's fault (no traceback: nothing failed)."""
    log.info("modsenc serve: %s %s refused, %d %s: %s", method, path, status, kind, printable(message))


def error_response(
    path: str, status: int, message: str, kind: str, param: str | None = None, headers: dict | None = None
) -> JSONResponse:
    message = printable(message)
    if path.startswith("/v1/"):
        body: dict[str, Any] = {
            "error": {
                "message": message,
                "type": "invalid_request_error" if status < 500 else "server_error",
                "param": param,
                "code": kind,
            }
        }
    else:
        body = {"error": message, "error_type": kind}
    return JSONResponse(body, status_code=status, headers=headers)


def _validation_message(err: RequestValidationError) -> tuple[int, str, str]:
    errors = err.errors()
    for e in errors:
        if e.get("type") == "json_invalid":
            return 400, f"invalid JSON: {e.get('ctx', {}).get('error', e.get('msg'))}", "invalid_json"
    parts = []
    for e in errors:
        where = ".".join(str(p) for p in e.get("loc", ()) if p != "body") or "body"
        if e.get("type") == "string_unicode":  # a lone surrogate in a typed field, or in a field's name
            what = "a field name" if where == "body" else where
            return 400, f"{what} is not valid Unicode: it holds a lone surrogate", "invalid_unicode"
        parts.append(f"{where}: {e.get('msg')}")
    return 422, "; ".join(parts), "invalid_request"


def check_unicode(text: str, where: str, param: str) -> str:
    """``text``, or a 400 naming it when it holds a lone surrogate. JSON's ``"\\ud800"`` escape is
    valid JSON and Python decodes it, but no UTF-8 encoder takes the result: the tokenizer and the
    language detector would fail on it with a 500."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        char = f"U+{ord(text[err.start]):04X}"
        message = f"{where} is not valid Unicode: a lone surrogate {char} at character {err.start}"
        raise APIError(400, message, "invalid_unicode", param) from None
    return text


def check_inputs(raw: Any, max_inputs: int, name: str) -> list[str]:
    """The request's texts, or an :class:`APIError` naming the first bad one."""
    texts = [raw] if isinstance(raw, str) else raw
    if not isinstance(texts, list):
        raise APIError(400, f"{name} must be a string or a list of strings", "invalid_input", name)
    if not texts:
        raise APIError(400, f"{name} is an empty list", "empty_input", name)
    if len(texts) > max_inputs:
        raise APIError(
            413, f"{name} has {len(texts)} texts; at most {max_inputs} per request", "too_many_inputs", name
        )
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            what = TOKEN_IDS if isinstance(text, (int, list)) else "expected a string"
            raise APIError(400, f"{name}[{i}] is {type(text).__name__}: {what}", "invalid_input", name)
        if not text.strip():
            raise APIError(400, f"{name}[{i}] is empty", "empty_input", name)
        check_unicode(text, f"{name}[{i}]", name)
    return texts


# ----------------------------------------------------------------- request bodies
class OpenAIEmbeddingRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input: Any
    model: str | None = None
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: StrictInt | None = None  # the first N dimensions, renormalised (Matryoshka-style)
    user: str | None = None
    # modsenc's own fields
    lang: str | list[str] = "auto"
    mode: Literal["cross", "mono"] = "cross"
    normalize: bool = True  # OpenAI's vectors have unit length
    truncate: bool = True
    prompt_name: str | None = None  # as TEI's


class TEIEmbedRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    inputs: Any
    normalize: bool = True
    truncate: bool = False  # text-embeddings-inference's default: refuse over-long inputs
    truncation_direction: Literal["Right", "right"] = "Right"  # the packed encoder keeps the start
    # a key of the model's sentence-transformers prompts (e5: query, passage or document) instead of
    # the backbone's own prefix (e5's "query: ")
    prompt_name: str | None = None
    dimensions: StrictInt | None = None
    # modsenc's own fields
    lang: str | list[str] = "auto"
    mode: Literal["cross", "mono"] = "cross"


# ----------------------------------------------------------------- middleware
class Refused(ModsencError):
    """A request refused by the middleware, before any JSON parsing: no valid API key, or a body
    too large, too slow or not UTF-8."""

    def __init__(
        self, status: int, message: str, kind: str, close: bool = True, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        # close: the body was not read to its end, so the connection cannot carry another request
        self.status, self.message, self.kind, self.close = status, message, kind, close
        self.headers = headers


def check_api_key(headers: dict[bytes, bytes], key: bytes) -> None:
    """Refuse (401) a request whose ``Authorization`` is not ``Bearer <key>``; the key is compared
    in constant time (``hmac.compare_digest``), so response times do not reveal how much matched."""
    challenge = {"WWW-Authenticate": "Bearer"}  # RFC 6750: what the client should send
    # The body is left unread (an unauthenticated client gets no buffering): close the connection
    # if one follows the headers.
    close = headers.get(b"content-length", b"0") != b"0" or b"transfer-encoding" in headers
    value = headers.get(b"authorization")
    if value is None:
        message = "no API key: send the header 'Authorization: Bearer <key>'"
        raise Refused(401, message, "invalid_api_key", close, challenge)
    scheme, _, given = value.strip().partition(b" ")
    if scheme.lower() != b"bearer" or not hmac.compare_digest(given.strip(), key):
        raise Refused(401, "invalid API key", "invalid_api_key", close, challenge)


async def receive_body(receive: Callable, limit: int, total: float, idle: float) -> bytes | None:
    """The whole body (None: the client went away), read up to ``limit`` bytes, chunked uploads
    included, within ``total`` seconds and with at most ``idle`` seconds between two reads."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + total
    body = bytearray()
    more = True
    while more:
        left = deadline - loop.time()
        try:
            message = await asyncio.wait_for(receive(), max(min(idle, left), 0))
        except asyncio.TimeoutError:
            message = (
                f"request body did not arrive within {total:g} s ({len(body)} bytes received)"
                if left <= idle
                else f"request body stalled: nothing received for {idle:g} s after {len(body)} bytes"
            )
            raise Refused(408, message, "body_timeout") from None
        if message["type"] == "http.disconnect":
            return None
        body += message.get("body", b"")
        more = message.get("more_body", False)
        if len(body) > limit:  # refused as soon as it is passed, however slowly the rest comes
            raise Refused(413, f"request body is larger than {limit} bytes", "body_too_large")
    return bytes(body)


def check_utf8(body: bytes, headers: dict[bytes, bytes]) -> None:
    """A JSON body must be UTF-8 (RFC 8259): say where it is not, where JSON parsing says only that
    the body could not be parsed."""
    if not headers.get(b"content-type", b"").lower().startswith(b"application/json"):
        return  # refused by the endpoint as not JSON (415)
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as err:
        message = f"request body is not valid UTF-8: byte 0x{body[err.start]:02x} at offset {err.start}"
        raise Refused(400, message, "invalid_unicode", close=False) from None


class Guard:
    """Pure ASGI middleware: check the API key (401), then read the body before any JSON parsing,
    refusing one over ``max_body_bytes`` (413), one too slow to arrive (408, uvicorn has no body
    timeout) or one not UTF-8 (400); count every request by endpoint and status, and log it.

    The endpoints note how many texts a request had in ``scope["modsenc"]`` for the access line."""

    def __init__(self, app: Any, state: ServerState) -> None:
        self.app = app
        self.state = state
        self.key = None if state.config.api_key is None else state.config.api_key.encode("ascii")

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        endpoint = endpoint_label(path)
        status = {"code": 500}
        noted = scope["modsenc"] = {"texts": None}
        start = time.perf_counter()

        async def send_observed(message: dict) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            try:
                body = await self.read(scope, receive)
            except Refused as refused:
                await self.refuse(scope, refused, receive, send_observed)
                return
            if body is None:
                return
            replayed = False

            async def replay() -> dict:
                nonlocal replayed
                if not replayed:
                    replayed = True
                    return {"type": "http.request", "body": body, "more_body": False}
                return await receive()

            await self.app(scope, replay, send_observed)
        finally:
            self.state.metrics.requests.labels(endpoint, str(status["code"])).inc()
            ms = (time.perf_counter() - start) * 1000
            level = logging.DEBUG if path in POLLED else logging.INFO
            texts = noted["texts"] if noted["texts"] is not None else "-"
            line = "modsenc serve: %s %s %d texts=%s %.1f ms"
            access_log.log(level, line, scope["method"], printable(path), status["code"], texts, ms)

    async def read(self, scope: dict, receive: Callable) -> bytes | None:
        config = self.state.config
        headers = dict(scope.get("headers") or [])
        if self.key is not None and scope["path"] not in PUBLIC:
            check_api_key(headers, self.key)
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > config.max_body_bytes:
            raise Refused(413, f"request body is larger than {config.max_body_bytes} bytes", "body_too_large")
        body = await receive_body(
            receive, config.max_body_bytes, config.max_body_seconds, config.max_body_idle_seconds
        )
        if body is not None:
            check_utf8(body, headers)
        return body

    async def refuse(self, scope: dict, refused: Refused, receive: Callable, send: Callable) -> None:
        self.state.metrics.errors.labels(refused.kind).inc()
        log_refusal(scope["method"], scope["path"], refused.status, refused.kind, refused.message)
        # Connection: close makes uvicorn close it after the answer instead of reading on.
        headers = (refused.headers or {}) | ({"Connection": "close"} if refused.close else {})
        response = error_response(
            scope["path"], refused.status, refused.message, refused.kind, headers=headers
        )
        await response(scope, receive, send)


# ----------------------------------------------------------------- the application
class ServerState:
    def __init__(self, config: ServeConfig, encoder: ModularEncoder | None) -> None:
        config.check()
        self.config = config
        self.metrics = ServerMetrics()
        self.encoder = encoder
        self.service: EmbeddingService | None = None
        self.batcher: Batcher | None = None
        self.load_error: str | None = None
        self.on_load_error: Callable[[], None] | None = None  # serve() stops the server: exit non-zero
        self.previous_loaded: list[str] = []
        # /v1/models' `created`: when the zoo folder last changed (a Hub id: when the server started)
        zoo = Path(config.zoo)
        self.created = int(zoo.stat().st_mtime if zoo.is_dir() else time.time())

    def load(self) -> EmbeddingService:
        """The encoder loaded and warmed up (worker thread): /health says ready only once every
        ``--languages`` language is loaded and, on the openvino runtime, compiled."""
        with warnings_logged(f"loading {self.config.zoo}"):
            encoder = self.encoder or self.config.load_encoder()
            service = EmbeddingService(encoder, self.config.zoo, self.config.model_name)
            service.warm_up(self.config.languages)
        return service

    async def start(self) -> None:
        """Load the encoder in a thread (the loop keeps answering /health), then start batching."""
        try:
            self.service = await asyncio.to_thread(self.load)
        except Exception as err:  # noqa: BLE001 - reported by /health and the log, not raised into uvicorn
            self.load_error = f"{type(err).__name__}: {err}"
            if not isinstance(err, LOAD_ERRORS):  # a bug: its traceback is what finds it
                log.exception("modsenc serve: could not load %s", self.config.zoo)
            elif self.on_load_error is None:  # serve() reports it itself, as the process's last line
                log.error("modsenc serve: could not load %s: %s", self.config.zoo, self.load_error)
            if self.on_load_error is not None:
                self.on_load_error()
            return
        self.previous_loaded = self.service.loaded
        self.batcher = Batcher(
            self.service.run_batch,
            max_batch_size=self.config.max_batch_size,
            max_wait=self.config.max_wait_ms / 1000,
            max_queue=self.config.max_queue,
            on_batch=self.observe_batch,
        )
        self.batcher.start()
        m = self.metrics
        m.queued.set_function(lambda: self.batcher.queued)
        m.languages_loaded.set(len(self.previous_loaded))
        for lang in self.previous_loaded:
            m.language_loads.labels(lang).inc()
        m.ready.set(1)
        log.info("modsenc serve: ready (%s, languages loaded: %s)", self.config.zoo, self.previous_loaded)

    def observe_batch(self, items: list[Item], started: float, seconds: float) -> None:
        m = self.metrics
        m.batch_inputs.observe(len(items))
        m.batch_requests.observe(len({item.request for item in items}))
        m.encode_seconds.observe(seconds)
        for item in items:
            m.queue_seconds.observe(started - item.enqueued)
        lang, mode, _ = items[0].key  # lang "backbone": no modules
        done = [
            item.future.result()
            for item in items
            if item.future.done() and not item.future.cancelled() and item.future.exception() is None
        ]
        m.inputs.labels(lang, mode).inc(len(done))
        m.tokens.inc(sum(e.tokens for e in done))
        m.truncated.inc(sum(e.truncated for e in done))
        loaded = self.service.loaded
        for code in loaded:
            if code not in self.previous_loaded:
                m.language_loads.labels(code).inc()
        for code in self.previous_loaded:
            if code not in loaded:
                m.language_evictions.labels(code).inc()
        m.languages_loaded.set(len(loaded))
        self.previous_loaded = loaded

    def ready(self) -> tuple[EmbeddingService, Batcher]:
        if self.load_error is not None:
            raise APIError(500, f"the model failed to load: {self.load_error}", "load_failed")
        if self.service is None or self.batcher is None:
            raise Overloaded("the model is still loading")
        return self.service, self.batcher

    async def embed(
        self,
        request: Request,
        raw: Any,
        name: str,
        lang: str | list[str],
        mode: str,
        truncate: bool,
        dimensions: int | None = None,
        prompt_name: str | None = None,
    ) -> tuple[EmbeddingService, list[Detection], list[Embedded]]:
        """:meth:`answer` within ``request_timeout`` seconds. Past it: 503 with ``Retry-After``,
        which the OpenAI client retries and huggingface_hub raises as ``InferenceTimeoutError``
        (TEI too answers 503 when it cannot serve in time); the request's texts still waiting
        leave the queue (``Batcher.submit``); a batch already running them finishes unused."""
        service, _ = self.ready()
        check_dimensions(dimensions, service.dimension)
        try:
            prompt = service.check_prompt_name(prompt_name)
        except UnknownPrompt as err:
            raise APIError(400, str(err), "invalid_prompt_name", "prompt_name") from err
        timeout = self.config.request_timeout
        answer = self.answer(request, raw, name, lang, (mode, prompt), truncate)
        try:
            return await asyncio.wait_for(answer, timeout)
        except asyncio.TimeoutError:
            message = f"the request was not answered within {timeout:g} s (--request-timeout); retry later"
            headers = {"Retry-After": str(self.config.retry_after_s)}
            raise APIError(503, message, "timeout", headers=headers) from None

    async def answer(
        self,
        request: Request,
        raw: Any,
        name: str,
        lang: str | list[str],
        how: tuple[str, str | None],
        truncate: bool,
    ) -> tuple[EmbeddingService, list[Detection], list[Embedded]]:
        """Validate, route, queue and wait: each text's route and embedding, in request order.
        ``how``: the mode and the prompt name, which with the language key the batch."""
        service, batcher = self.ready()
        texts = check_inputs(raw, self.config.max_inputs, name)
        noted = request.scope.get("modsenc")
        if noted is not None:  # for the access log line (Guard)
            noted["texts"] = len(texts)
        codes = [lang] * len(texts) if isinstance(lang, str) else list(lang)
        if len(codes) != len(texts):
            raise APIError(
                400,
                f"lang has {len(codes)} codes for {len(texts)} inputs; give one per input",
                "invalid_lang",
                "lang",
            )
        try:
            codes = [code if code == "auto" else service.check_language(code) for code in codes]
        except UnknownLanguage as err:
            raise APIError(400, str(err), "unknown_language", "lang") from err
        routes = [explicit_route(code) if code != "auto" else None for code in codes]
        auto = [i for i, code in enumerate(codes) if code == "auto"]
        if auto:
            detected = await asyncio.to_thread(service.route, [texts[i] for i in auto])
            for i, detection in zip(auto, detected):
                if detection.route == "refused":
                    self.metrics.routes.labels("refused", detection.lang or "und").inc()
                    raise APIError(422, f"{name}[{i}]: {detection.message}", "language_refused", name)
                routes[i] = detection
        for route in routes:
            self.metrics.routes.labels(route.route, route.lang or "und").inc()
        items = [
            ((route.bundle or BACKBONE, *how), Text(i, text, truncate))
            for i, (text, route) in enumerate(zip(texts, routes))
        ]
        try:
            embedded = await batcher.submit(items)
        except InputTooLong as err:
            message = (
                f"{name}[{err.index}] has more than {err.limit} tokens; shorten it or send truncate=true"
            )
            raise APIError(413, message, "input_too_long", name) from err
        return service, routes, embedded


def check_dimensions(dimensions: int | None, dimension: int) -> None:
    """``dimensions`` must be 1 to the model's ``dimension`` (400 otherwise)."""
    if dimensions is not None and not 1 <= dimensions <= dimension:
        raise APIError(
            400,
            f"dimensions={dimensions} is out of range: this model returns {dimension}-dimensional "
            f"vectors; ask for 1 to {dimension}",
            "invalid_dimensions",
            "dimensions",
        )


def create_app(config: ServeConfig, encoder: ModularEncoder | None = None) -> FastAPI:
    """The server for ``config``; pass ``encoder`` to serve one already loaded (tests, notebooks)."""
    state = ServerState(config, encoder)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        loading = asyncio.create_task(state.start())
        yield
        # Uvicorn has stopped accepting connections and waited for in-flight requests; queued
        # texts of requests still waiting are encoded before the worker stops.
        await loading
        if state.batcher is not None:
            await state.batcher.close()

    app = FastAPI(title="modsenc", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.modsenc = state
    _add_error_handlers(app, state)
    _add_embedding_endpoints(app, state)
    _add_model_endpoints(app, state)
    _add_status_endpoints(app, state)
    app.add_middleware(Guard, state=state)
    if config.cors_origins:
        # Outside Guard: a browser's preflight carries no API key and is answered here, and the
        # CORS headers reach refusals too, so a page can read why it was refused.
        app.add_middleware(
            CORSMiddleware,
            allow_origins=config.cors_origins,
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type"],
            expose_headers=["Retry-After", *TEI_HEADERS],
            max_age=600,
        )
    return app


def _add_error_handlers(app: FastAPI, state: ServerState) -> None:
    """Every refusal a counted JSON error with a one-line message (``error_response``)."""

    def counted(
        request: Request,
        status: int,
        message: str,
        kind: str,
        param: str | None = None,
        headers: dict | None = None,
    ) -> JSONResponse:
        state.metrics.errors.labels(kind).inc()
        if status < 500:  # a 500 logs its traceback (on_crash); a 503 is counted in /metrics
            log_refusal(request.method, request.url.path, status, kind, message)
        return error_response(request.url.path, status, message, kind, param, headers)

    @app.exception_handler(APIError)
    async def on_api_error(request: Request, err: APIError) -> JSONResponse:
        return counted(request, err.status, err.message, err.kind, err.param, err.headers)

    @app.exception_handler(Overloaded)
    async def on_overloaded(request: Request, err: Overloaded) -> JSONResponse:
        headers = {"Retry-After": str(state.config.retry_after_s)}
        return counted(request, 503, str(err), "overloaded", headers=headers)

    @app.exception_handler(RequestValidationError)
    async def on_invalid(request: Request, err: RequestValidationError) -> JSONResponse:
        content_type = request.headers.get("content-type", "")
        if request.method == "POST" and content_type.split(";")[0].strip().lower() != "application/json":
            message = f"Content-Type must be application/json, got {content_type or 'none'!r}"
            return counted(request, 415, message, "unsupported_media_type")
        status, message, kind = _validation_message(err)
        return counted(request, status, message, kind)

    @app.exception_handler(StarletteHTTPException)
    async def on_http(request: Request, err: StarletteHTTPException) -> JSONResponse:
        return counted(request, err.status_code, str(err.detail), "http_error", headers=err.headers)

    @app.exception_handler(Exception)
    async def on_crash(request: Request, err: Exception) -> JSONResponse:
        log.exception("modsenc serve: %s %s failed", request.method, request.url.path)
        return counted(request, 500, f"internal error: {type(err).__name__}: {err}", "internal")


def _add_embedding_endpoints(app: FastAPI, state: ServerState) -> None:
    """OpenAI's ``/v1/embeddings`` and text-embeddings-inference's ``/embed`` and ``POST /``."""

    def timed(endpoint: str) -> Callable[[], None]:
        start = time.perf_counter()
        return lambda: state.metrics.request_seconds.labels(endpoint).observe(time.perf_counter() - start)

    @app.post("/v1/embeddings")
    async def openai_embeddings(request: Request, body: OpenAIEmbeddingRequest) -> JSONResponse:
        done = timed("/v1/embeddings")
        for name in ("model", "user"):  # unused, but any invalid Unicode in a request is refused
            if getattr(body, name) is not None:
                check_unicode(getattr(body, name), name, name)
        service, routes, embedded = await state.embed(
            request,
            body.input,
            "input",
            body.lang,
            body.mode,
            body.truncate,
            body.dimensions,
            body.prompt_name,
        )
        response = _openai_response(body, service.model_name, routes, embedded)
        done()
        return response

    async def tei_embed(request: Request, body: TEIEmbedRequest) -> JSONResponse:
        done = timed(request.url.path)
        _, routes, embedded = await state.embed(
            request,
            body.inputs,
            "inputs",
            body.lang,
            body.mode,
            body.truncate,
            body.dimensions,
            body.prompt_name,
        )
        vectors = _vectors(embedded, body.normalize, body.dimensions)
        truncated = [str(i) for i, e in enumerate(embedded) if e.truncated]
        values = (
            ",".join(r.lang or "und" for r in routes),
            ",".join(r.route for r in routes),
            ",".join(truncated),
            str(sum(e.tokens for e in embedded)),
        )
        done()
        return JSONResponse([v.tolist() for v in vectors], headers=dict(zip(TEI_HEADERS, values)))

    # TEI serves its model's task at the root too: huggingface_hub's InferenceClient(model=URL)
    # posts there.
    for path in ("/embed", "/"):
        app.add_api_route(path, tei_embed, methods=["POST"])


def _add_model_endpoints(app: FastAPI, state: ServerState) -> None:
    """OpenAI's ``GET /v1/models`` and ``GET /v1/models/{id}``: the one model this server serves."""

    def model() -> dict[str, Any]:
        return {"id": state.config.name, "object": "model", "created": state.created, "owned_by": "modsenc"}

    @app.get("/v1/models")
    async def models() -> JSONResponse:
        return JSONResponse({"object": "list", "data": [model()]})

    @app.get("/v1/models/{model_id:path}")
    async def one_model(model_id: str) -> JSONResponse:
        if model_id != state.config.name:
            message = f"the model {model_id!r} does not exist; this server serves {state.config.name!r}"
            raise APIError(404, message, "model_not_found", "model")
        return JSONResponse(model())


def _openai_response(
    body: OpenAIEmbeddingRequest, model_name: str, routes: list[Detection], embedded: list[Embedded]
) -> JSONResponse:
    """OpenAI's embeddings list; ``usage`` counts the tokens the model ran on (``Embedded.tokens``)."""
    vectors = _vectors(embedded, body.normalize, body.dimensions)
    data = []
    for i, (vector, route, e) in enumerate(zip(vectors, routes, embedded)):
        value: Any = (
            base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
            if body.encoding_format == "base64"
            else vector.tolist()
        )
        data.append(
            {
                "object": "embedding",
                "index": i,
                "embedding": value,
                "lang": route.lang,  # the bundle's language, or the one detected when no bundle took it
                "route": route.route,  # "bundle" or "backbone" (no modules: a language the zoo lacks)
                "truncated": e.truncated,
            }
        )
    tokens = sum(e.tokens for e in embedded)
    return JSONResponse(
        {
            "object": "list",
            "model": model_name,
            "data": data,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
    )


def _add_status_endpoints(app: FastAPI, state: ServerState) -> None:
    """``/health``, ``/info`` and ``/metrics``."""

    @app.get("/health")
    async def health() -> JSONResponse:
        if state.load_error is not None:
            return JSONResponse({"status": "failed", "error": state.load_error}, status_code=500)
        if state.batcher is None:
            return JSONResponse(
                {"status": "loading"},
                status_code=503,
                headers={"Retry-After": str(state.config.retry_after_s)},
            )
        if state.batcher.closing:
            return JSONResponse({"status": "draining"}, status_code=503)
        return JSONResponse({"status": "ok"})

    @app.get("/info")
    async def info() -> JSONResponse:
        return JSONResponse(_info(state))

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(state.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")


def _vectors(embedded: list[Embedded], normalize: bool, dimensions: int | None = None) -> np.ndarray:
    """The vectors, cut to their first ``dimensions`` (Matryoshka-style) and then normalised."""
    vectors = np.stack([e.vector for e in embedded]).astype(np.float32, copy=False)
    if dimensions is not None:
        vectors = vectors[:, :dimensions]
    if normalize:
        # The same arithmetic as torch.nn.functional.normalize (eps 1e-12), in float32.
        norms = np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), np.float32(1e-12))
        vectors = vectors / norms
    return vectors


def _versions() -> dict[str, str]:
    out = {}
    for package in ("modsenc", "torch", "transformers", "peft", "adapters", "torchao", "fastapi", "uvicorn"):
        try:
            out[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            out[package] = "not installed"
    return out


def _info(state: ServerState) -> dict[str, Any]:
    config = state.config
    limits = {k: v for k, v in asdict(config).items() if k.startswith("max_") or k == "request_timeout"}
    out: dict[str, Any] = {
        "ready": state.service is not None,
        "zoo": str(config.zoo),
        "limits": limits,
        "api_key_required": config.api_key is not None,  # never the key itself
        "cors_origins": config.cors_origins,
        "versions": _versions(),
        "resident_memory_bytes": state.metrics.registry.get_sample_value("process_resident_memory_bytes"),
    }
    if state.load_error is not None:
        out["error"] = state.load_error
    service = state.service
    if service is None:
        return out
    encoder = service.encoder
    backbone = encoder.modular.backbone
    out |= {
        "model": service.model_name,
        "dimension": service.dimension,
        "max_input_tokens": service.max_tokens,
        "device": str(backbone.device),
        "quantization": encoder.quantization,
        "precision": encoder.precision,
        "runtime": encoder.runtime,
        "backbone": {
            "fingerprint": encoder.zoo.backbone_fingerprint(),
            "model_type": backbone.model.config.model_type,
            "parameters": service.backbone_parameters,
        },
        "languages": {
            "installed": service.installed,
            "loaded": service.loaded,  # least recently used first
            "fallback": encoder.router.fallback,
            # languages recognised without a bundle (their text goes by the `other` policy)
            "recognised_without_bundle": encoder.router.known,
            "other": encoder.router.other,
            "gate": str(encoder.router.gate.path) if encoder.router.gate is not None else None,
        },
        "queue": {"texts": state.batcher.queued if state.batcher else 0},
    }
    return out
