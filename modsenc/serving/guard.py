"""The ASGI middleware in front of every route: API key, body size and read time, UTF-8, and one
access line per request."""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from modsenc.serving.errors import error_response, log_refusal, printable
from modsenc.serving.requests import POLLED, PUBLIC, endpoint_label
from modsenc.utils.errors import ModsencError

if TYPE_CHECKING:
    from modsenc.serving.state import ServerState

log = logging.getLogger("modsenc.serving")
# One line per request; a logger of its own, so it can be silenced or routed apart from the rest.
access_log = log.getChild("access")


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
