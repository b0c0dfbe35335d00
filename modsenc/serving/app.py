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
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware

from modsenc.encoder import ModularEncoder
from modsenc.serving.config import ORIGIN, ServeConfig, check_origin
from modsenc.serving.guard import Guard
from modsenc.serving.handlers import add_error_handlers
from modsenc.serving.requests import TEI_HEADERS
from modsenc.serving.routes import add_embedding_endpoints, add_model_endpoints, add_status_endpoints
from modsenc.serving.state import LOAD_ERRORS, ServerState
from modsenc.serving.token_routes import add_token_endpoints

# The composition root: the settings live in config.py and what the running server holds in
# state.py (the endpoints and the guard are handed a ServerState); these names stay importable here.
__all__ = ["LOAD_ERRORS", "ORIGIN", "ServeConfig", "ServerState", "check_origin", "create_app"]


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
