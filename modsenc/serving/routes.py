"""The API's routes: OpenAI's ``/v1/embeddings`` and ``/v1/models``, text-embeddings-inference's
``/embed`` (and ``POST /``), and ``/health``, ``/info`` and ``/metrics``."""

from __future__ import annotations

import base64
import importlib.metadata
import logging
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import numpy as np
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from modsenc.routing.router import Detection
from modsenc.serving.errors import APIError, check_unicode
from modsenc.serving.requests import TEI_HEADERS, OpenAIEmbeddingRequest, TEIEmbedRequest
from modsenc.serving.service import (
    Embedded,
)
from modsenc.serving.token_ids import texts_of_token_ids

if TYPE_CHECKING:
    from modsenc.serving.state import ServerState

log = logging.getLogger("modsenc.serving")


def add_embedding_endpoints(app: FastAPI, state: ServerState) -> None:
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
            texts_of_token_ids(body.input, "input"),  # OpenAI's API takes cl100k_base ids too
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


def add_model_endpoints(app: FastAPI, state: ServerState) -> None:
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
                # why (issue 48): what the router recognised (None: no installed language accepted
                # it, or the caller gave the language), how surely, and whether it was unsure
                "detected": route.detected,
                "confidence": round(route.confidence, 4),
                "unsure": route.unsure,
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


def add_status_endpoints(app: FastAPI, state: ServerState) -> None:
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


def _added_since_start(zoo, installed: list[str]) -> list[str]:
    """Languages the zoo's index lists now but the server did not load at start (restart to serve
    them); [] when the index cannot be read."""
    try:
        return sorted(set(zoo.languages()) - set(installed))
    except (OSError, ValueError):
        return []


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
            # the zoo's index as read at start: a language added since (modsenc add-language) is
            # served after a restart, and listed here until then
            "installed": service.installed,
            "added_since_start": _added_since_start(encoder.zoo, service.installed),
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
