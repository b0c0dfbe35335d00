"""Run the app under uvicorn: ``modsenc serve`` calls :func:`serve`."""

from __future__ import annotations

import logging
import socket
from typing import Any

import uvicorn
from fastapi import FastAPI

from modsenc.encoder import languages_to_load
from modsenc.modules.bundle import Zoo
from modsenc.serving.app import ServeConfig, create_app
from modsenc.serving.protocol import HEADER_TIMEOUT, header_timeout_protocol
from modsenc.utils.devices import check_device

log = logging.getLogger("modsenc.serving")


def check_zoo(config: ServeConfig) -> None:
    """Fail before binding a port when the zoo, ``--languages`` or ``--device`` is wrong (the model
    loads later, in the background: a device this torch lacks would fail only then)."""
    check_device(config.device, "--device")
    try:
        languages_to_load(Zoo(config.zoo), config.languages)
    except KeyError as err:  # name the option the language came from
        raise KeyError(f"--languages: {err.args[0]}") from err
    config.check()


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound before anything starts: a port in use or a bad host is a
    one-line error at once, and "ready" is never logged for a server that could not listen."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as err:
        raise ValueError(f"--host {host}: cannot resolve it ({err.strerror})") from err
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as err:
        sock.close()
        raise OSError(f"cannot listen on {host}:{port}: {err.strerror}") from err
    return sock


class FirstLine(logging.Filter):
    """Keep a captured warning to its first line, ``file:line: Category: message``: the
    interpreter's format adds the source line, which says nothing to whoever reads the log."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = record.getMessage().strip().split("\n", 1)[0], None
        return True


def warnings_to_log() -> None:
    """Route Python warnings the server's code does not catch itself (``warnings_logged``) through
    logging, one line each, instead of raw text on stderr."""
    logging.captureWarnings(True)
    logger = logging.getLogger("py.warnings")
    if not any(isinstance(f, FirstLine) for f in logger.filters):
        logger.addFilter(FirstLine())


def uvicorn_config(app: FastAPI, **settings: Any) -> uvicorn.Config:
    """Uvicorn's settings for ``app`` (from ``create_app``): its HTTP protocol with the app's
    ``max_header_seconds`` on each request's head, whose 408 is logged and counted as the app's
    own refusals are."""
    state = app.state.modsenc

    def timed_out(message: str) -> None:
        state.metrics.errors.labels(HEADER_TIMEOUT).inc()
        log.info("modsenc serve: refused, 408 %s: %s", HEADER_TIMEOUT, message)

    protocol = header_timeout_protocol(state.config.max_header_seconds, timed_out)
    return uvicorn.Config(app, http=protocol, **settings)


def serve(config: ServeConfig, host: str = "127.0.0.1", port: int = 8080, log_level: str = "info") -> None:
    """Serve until SIGINT/SIGTERM. On a signal uvicorn stops accepting connections and waits for the
    requests in flight; the app's shutdown then lets the batcher finish every queued text.

    The port is bound first; the model loads in the background while /health answers, and if it
    fails to load (a damaged preloaded bundle) the server stops and this raises: the process exits
    non-zero instead of answering 500 forever."""
    check_zoo(config)
    sock = bind(host, port)
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    warnings_to_log()
    app = create_app(config)
    server = uvicorn.Server(uvicorn_config(app, log_level=log_level, access_log=False))
    state = app.state.modsenc
    state.on_load_error = lambda: setattr(server, "should_exit", True)
    with sock:
        server.run(sockets=[sock])
    if state.load_error is not None:
        raise ValueError(f"could not load {config.zoo}: {state.load_error}")
