"""What the running server holds (``ServerState``): its settings, metrics, the encoder as it loads
in a worker thread, the batcher, and the steps of an embedding request (validate, route, queue,
wait). The endpoints (routes.py, token_routes.py), the error handlers and the request guard are
handed it by ``create_app`` (app.py)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import Request

from modsenc.encoder import ModularEncoder
from modsenc.routing.router import BACKBONE, Detection, explicit_route
from modsenc.serving.batcher import Batcher, Item, Overloaded
from modsenc.serving.config import ServeConfig
from modsenc.serving.errors import APIError, check_dimensions, check_inputs
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

log = logging.getLogger("modsenc.serving")

# What a zoo that cannot load raises for the user's fault (a damaged or missing bundle file, a
# wrong option): its message says what to do, so it is one line, never a traceback.
LOAD_ERRORS = (OSError, ValueError, KeyError, ImportError, TypeError)


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
