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
import logging
import re
import time
from collections.abc import Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from starlette.middleware.cors import CORSMiddleware

from modsenc.backbone.quantization import check_quantization, require_torchao
from modsenc.encoder import ModularEncoder
from modsenc.routing.router import BACKBONE, Detection, explicit_route
from modsenc.serving.batcher import Batcher, Item, Overloaded
from modsenc.serving.errors import APIError, add_error_handlers, check_dimensions, check_inputs
from modsenc.serving.guard import Guard
from modsenc.serving.metrics import ServerMetrics
from modsenc.serving.requests import TEI_HEADERS
from modsenc.serving.routes import add_embedding_endpoints, add_model_endpoints, add_status_endpoints
from modsenc.serving.service import (
    Embedded,
    EmbeddingService,
    InputTooLong,
    Text,
    UnknownLanguage,
    UnknownPrompt,
    warnings_logged,
)
from modsenc.serving.token_routes import add_token_endpoints
from modsenc.utils.errors import InputError

log = logging.getLogger("modsenc.serving")

# What a zoo that cannot load raises for the user's fault (a damaged or missing bundle file, a
# wrong option): its message says what to do, so it is one line, never a traceback.
LOAD_ERRORS = (OSError, ValueError, KeyError, ImportError, TypeError)


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
            try:
                service.check_prompt_name(self.config.default_prompt_name)
            except UnknownPrompt as err:
                raise UnknownPrompt(f"--default-prompt-name: {err}") from None
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
        prompt = self.prompt_of(service, prompt_name)
        timeout = self.config.request_timeout
        answer = self.answer(request, raw, name, lang, (mode, prompt), truncate)
        try:
            return await asyncio.wait_for(answer, timeout)
        except asyncio.TimeoutError:
            message = f"the request was not answered within {timeout:g} s (--request-timeout); retry later"
            headers = {"Retry-After": str(self.config.retry_after_s)}
            raise APIError(503, message, "timeout", headers=headers) from None

    def prompt_of(self, service: EmbeddingService, prompt_name: str | None) -> str | None:
        """The prompt a request runs with: its ``prompt_name``, else ``--default-prompt-name``; a
        400 for one the model lacks."""
        name = self.config.default_prompt_name if prompt_name is None else prompt_name
        try:
            return service.check_prompt_name(name)
        except UnknownPrompt as err:
            raise APIError(400, str(err), "invalid_prompt_name", "prompt_name") from err

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
        routes = await self.route(service, texts, lang, name)
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

    async def route(
        self, service: EmbeddingService, texts: list[str], lang: str | list[str], name: str
    ) -> list[Detection]:
        """Each text's route: the language asked for (``lang``: one code, or one per text), or the
        one detected (``auto``); a refused detection is a 422, counted with the routes."""
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
        return routes


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
    add_error_handlers(app, state)
    add_embedding_endpoints(app, state)
    add_model_endpoints(app, state)
    add_status_endpoints(app, state)
    add_token_endpoints(app, state)
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
