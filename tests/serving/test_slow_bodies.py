"""Request bodies that stop short, trickle in or grow past the limit, and request heads that never
finish, against a real uvicorn server in a thread: TestClient hands the app each request at once,
so it cannot stall one. The server runs without its lifespan, so no model loads: the middleware
(or, for a head, the protocol) answers before any endpoint would."""

from __future__ import annotations

import json
import logging
import select
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import uvicorn

from modsenc.serving.app import ServeConfig, create_app
from modsenc.serving.server import bind, uvicorn_config


@contextmanager
def connected(tmp_path, **settings) -> Iterator[socket.socket]:
    """A connection to a server for ``ServeConfig(tmp_path, **settings)``."""
    app = create_app(ServeConfig(str(tmp_path), device="cpu", **{"runtime": "torch", **settings}))
    sock = bind("127.0.0.1", 0)
    # log_config=None: uvicorn leaves logging alone, so caplog sees its records and the app's
    server = uvicorn.Server(uvicorn_config(app, lifespan="off", log_config=None, access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "uvicorn never started"
            time.sleep(0.01)
        with socket.create_connection(sock.getsockname()[:2]) as conn:
            yield conn
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def head(path: str, *headers: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: test", "Content-Type: application/json", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def answered(conn: socket.socket, within: float) -> bool:
    return bool(select.select([conn], [], [], within)[0])


def response(conn: socket.socket) -> tuple[int, dict[str, str], dict]:
    """Status, headers and JSON body, read to the end of the stream: a refusal closes the connection
    (a connection left open fails here on the socket's timeout)."""
    conn.settimeout(10)
    raw = b""
    while data := conn.recv(65536):
        raw += data
    top, _, body = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = top.decode().split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in header_lines)
    return int(status_line.split()[1]), headers, json.loads(body)


def next_response(conn: socket.socket) -> bytes:
    """One whole response on a connection that stays open: its head, then content-length bytes."""
    conn.settimeout(10)
    raw = b""
    while b"\r\n\r\n" not in raw:
        raw += conn.recv(65536)
    top, _, body = raw.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in top.lower().split(b"\r\n") if line.startswith(b"content-length:")
    )
    while len(body) < length:
        body += conn.recv(65536)
    return top


def one_refusal(caplog, status: int, kind: str) -> str:
    """The single line the app logged for the request; nothing logged a traceback."""
    logged = [r.getMessage() for r in caplog.records if r.name == "modsenc.serving"]
    assert len(logged) == 1 and f"refused, {status} {kind}: " in logged[0], logged
    assert not any(r.exc_info or r.levelno >= logging.ERROR for r in caplog.records), caplog.text
    return logged[0]


def test_a_body_that_stops_short_of_its_content_length_gets_408(tmp_path, caplog) -> None:
    caplog.set_level(logging.INFO, logger="modsenc.serving")
    with connected(tmp_path, max_body_idle_seconds=1.0) as conn:
        conn.sendall(head("/embed", "Content-Length: 100") + b'{"inputs":')  # 10 of 100 bytes
        start = time.monotonic()
        assert answered(conn, 10), "no answer to a stalled body"
        waited = time.monotonic() - start
        status, headers, body = response(conn)
    assert status == 408 and headers["connection"] == "close"
    assert body == {
        "error": "request body stalled: nothing received for 1 s after 10 bytes",
        "error_type": "body_timeout",
    }
    assert 0.9 < waited < 5  # the idle timeout, not the 30 s whole-body one
    assert "POST /embed refused, 408 body_timeout: request body stalled" in one_refusal(
        caplog, 408, "body_timeout"
    )


def test_a_body_trickled_in_past_the_time_limit_gets_408(tmp_path, caplog) -> None:
    caplog.set_level(logging.INFO, logger="modsenc.serving")
    with connected(tmp_path, max_body_seconds=1.0) as conn:
        conn.sendall(head("/v1/embeddings", "Transfer-Encoding: chunked"))
        start = time.monotonic()
        sent = 0
        # Five bytes every 0.1 s: never idle, never done; then nothing more once the limit has
        # passed. A chunk sent after the server answered and closed would draw a TCP reset, which
        # can drop the unread 408 from the client's buffer.
        while time.monotonic() - start < 0.8 and not answered(conn, 0.1):
            conn.sendall(chunk(b"     "))
            sent += 1
        assert answered(conn, 10), "no answer to a body trickled in"
        waited = time.monotonic() - start
        status, headers, body = response(conn)
    assert status == 408 and headers["connection"] == "close"
    assert body["error"]["code"] == "body_timeout"
    assert body["error"]["message"].startswith("request body did not arrive within 1 s (")
    assert 0.9 < waited < 5 and sent >= 5
    one_refusal(caplog, 408, "body_timeout")


def test_a_chunked_body_is_refused_with_413_as_it_passes_the_limit(tmp_path, caplog) -> None:
    caplog.set_level(logging.INFO, logger="modsenc.serving")
    with connected(tmp_path, max_body_bytes=1000) as conn:
        conn.sendall(head("/embed", "Transfer-Encoding: chunked"))
        for _ in range(3):  # 900 bytes, slowly: under the limit, no answer yet
            conn.sendall(chunk(b" " * 300))
            assert not answered(conn, 0.2)
        conn.sendall(chunk(b" " * 300))  # 1200: answered now, not at the 10 s or 30 s timeouts
        start = time.monotonic()
        assert answered(conn, 10)
        waited = time.monotonic() - start
        status, headers, body = response(conn)
    assert status == 413 and headers["connection"] == "close"
    assert body == {"error": "request body is larger than 1000 bytes", "error_type": "body_too_large"}
    assert waited < 5
    one_refusal(caplog, 413, "body_too_large")


def test_a_head_that_never_finishes_gets_408_and_the_connection_closed(tmp_path, caplog) -> None:
    caplog.set_level(logging.INFO, logger="modsenc.serving")
    with connected(tmp_path, max_header_seconds=0.5) as conn:
        conn.sendall(b"POST /embed HTTP/1.1\r\nHost: test\r\nContent-Le")  # and no more
        start = time.monotonic()
        assert answered(conn, 10), "no answer to a head that never finishes"
        waited = time.monotonic() - start
        status, headers, body = response(conn)
    assert status == 408 and headers["connection"] == "close"
    assert body == {
        "error": "request headers did not arrive within 0.5 s (44 bytes received)",
        "error_type": "header_timeout",
    }
    assert 0.4 < waited < 5
    logged = [r.getMessage() for r in caplog.records if r.name == "modsenc.serving"]
    assert logged == ["modsenc serve: refused, 408 header_timeout: " + body["error"]]


def test_a_connection_that_sends_nothing_is_closed_at_the_head_limit(tmp_path) -> None:
    with connected(tmp_path, max_header_seconds=0.5) as conn:
        start = time.monotonic()
        assert answered(conn, 10), "a silent connection was held open"
        assert conn.recv(1024) == b""  # closed, with no response: no request was made
    assert time.monotonic() - start < 5


def test_the_head_limit_is_per_request_and_spares_a_slow_body(tmp_path) -> None:
    """The clock stops once a head is whole (a slow body is the body limits' business), and starts
    again with the first byte of the next request on a kept-alive connection."""
    with connected(tmp_path, max_header_seconds=0.5) as conn:
        conn.sendall(b"GET /nowhere HTTP/1.1\r\nHost: test\r\n\r\n")
        assert next_response(conn).startswith(b"HTTP/1.1 404 ")  # answered by the app, kept alive
        conn.sendall(head("/embed", "Content-Length: 2"))
        time.sleep(1.0)  # twice the head limit, before the body
        conn.sendall(b"{}")
        answer = next_response(conn)  # the app's (no inputs: 422), not a 408
        assert answer.startswith(b"HTTP/1.1 422 ") and b"connection: close" not in answer, answer
        conn.sendall(b"GET /nowhere HTTP/1.1\r\n")  # a third request's head stops short
        status, _, body = response(conn)
    assert status == 408 and body["error_type"] == "header_timeout"


@pytest.mark.parametrize("name", ["max_body_seconds", "max_body_idle_seconds", "max_header_seconds"])
def test_body_timeouts_must_be_positive(name) -> None:
    with pytest.raises(ValueError, match=f"{name} must be > 0, got 0"):
        ServeConfig("zoo", **{name: 0}).check()


def test_serve_help_lists_the_body_time_limits() -> None:
    from click.testing import CliRunner  # noqa: PLC0415

    from modsenc.cli import main  # noqa: PLC0415

    result = CliRunner().invoke(main, ["serve", "--help"])
    assert "--max-body-seconds" in result.output and "--max-body-idle-seconds" in result.output
    assert "--max-header-seconds" in result.output
    refused = CliRunner().invoke(main, ["serve", "--max-body-seconds", "0"])
    assert refused.exit_code == 2 and "0.0 is not in the range x>0" in refused.output
