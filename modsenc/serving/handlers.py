"""The app's exception handlers: every refusal a counted JSON error with a one-line message
(errors.py's ``error_response``), a crash a logged traceback and a 500."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from modsenc.serving.batcher import Overloaded
from modsenc.serving.errors import APIError, error_response, log_refusal
from modsenc.serving.state import ServerState

log = logging.getLogger("modsenc.serving")


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


def add_error_handlers(app: FastAPI, state: ServerState) -> None:
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
