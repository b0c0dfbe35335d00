"""Uvicorn's HTTP protocol with a time limit on a request's head (its request line and headers).

Uvicorn times out a connection idle between two requests (``timeout_keep_alive``), and the
middleware (``guard.receive_body``) a body that is slow to arrive, but nothing times out a head
that never finishes: the app is called only once the headers are whole, and h11 has no header
timeout, so a client that opens a connection and sends nothing, or half a header, holds it (and a
file descriptor) for ever. This protocol starts a clock when a connection opens, and again when
the first byte of a following request arrives on it; if the head is not whole within
``max_header_seconds`` it answers 408 (TEI's error shape: the path is not known yet) and closes the
connection, or, where not one byte of a request came, only closes it, as uvicorn's keep-alive
timeout does.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from uvicorn.protocols.http.auto import AutoHTTPProtocol

HEADER_TIMEOUT = "header_timeout"


def timeout_response(message: str) -> bytes:
    """The raw 408 written when a head is late: uvicorn's own writer works on whole requests."""
    body = json.dumps({"error": message, "error_type": HEADER_TIMEOUT}).encode()
    head = (
        "HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class HeaderTimeout:
    """Mixed in before uvicorn's protocol class (``header_timeout_protocol``)."""

    max_header_seconds: float = 10.0
    # Called with the message when a 408 is sent (the server's log line and metric).
    on_timeout: Callable[[str], None] | None = None

    cycle: Any
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_bytes = 0
        self._start_head_clock()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_clock()
        super().connection_lost(exc)  # type: ignore[misc]

    def data_received(self, data: bytes) -> None:
        before = self.cycle
        if before is None or before.response_complete:  # between requests: a head is arriving
            if self._head_timer is None:
                self._start_head_clock()
            self._head_bytes += len(data)
        super().data_received(data)  # type: ignore[misc]
        if self.cycle is not before:  # a new request's head arrived whole
            self._stop_head_clock()

    def _start_head_clock(self) -> None:
        self._stop_head_clock()
        self._head_bytes = 0
        self._head_timer = self.loop.call_later(self.max_header_seconds, self._head_timed_out)

    def _stop_head_clock(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing():
            return
        if self._head_bytes:
            message = (
                f"request headers did not arrive within {self.max_header_seconds:g} s "
                f"({self._head_bytes} bytes received)"
            )
            self.transport.write(timeout_response(message))
            if self.on_timeout is not None:
                self.on_timeout(message)
        self.transport.close()


def header_timeout_protocol(
    seconds: float, on_timeout: Callable[[str], None] | None = None
) -> type[asyncio.Protocol]:
    """Uvicorn's HTTP protocol (``auto``: httptools where installed, else h11) with a
    ``seconds`` limit on each request's head; pass it as ``uvicorn.Config(http=...)``."""
    settings = {"max_header_seconds": seconds, "on_timeout": staticmethod(on_timeout) if on_timeout else None}
    return type("HeaderTimeoutProtocol", (HeaderTimeout, AutoHTTPProtocol), settings)
