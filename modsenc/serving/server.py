"""Run the app under uvicorn: ``modsenc serve`` calls :func:`serve`."""

from __future__ import annotations

import logging

import uvicorn

from modsenc.modules.bundle import Zoo, check_language_code
from modsenc.serving.app import ServeConfig, create_app


def check_zoo(config: ServeConfig) -> None:
    """Fail before binding a port when the zoo or ``--languages`` is wrong (the model loads later)."""
    zoo = Zoo(config.zoo)
    if not zoo.backbone_dir.is_dir():
        raise FileNotFoundError(
            f"{config.zoo} is not a modsenc zoo: no backbone/ (see `modsenc add-language`)"
        )
    installed = zoo.languages()
    if not installed:
        raise FileNotFoundError(f"no languages installed in {config.zoo}; run `modsenc add-language LANG`")
    for code in config.languages:
        if check_language_code(code) not in installed:
            raise KeyError(
                f"--languages: {code!r} is not installed in {config.zoo} (installed: {', '.join(installed)})"
            )
    config.check()


def serve(config: ServeConfig, host: str = "127.0.0.1", port: int = 8080, log_level: str = "info") -> None:
    """Serve until SIGINT/SIGTERM. On a signal uvicorn stops accepting connections and waits for the
    requests in flight; the app's shutdown then lets the batcher finish every queued text."""
    check_zoo(config)
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    uvicorn.run(create_app(config), host=host, port=port, log_level=log_level, access_log=False)
