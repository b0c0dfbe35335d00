"""The ``modsenc`` command line. Each command is a thin wrapper around a recipe entry point.

``main`` (modsenc.cli.app) is the group; each module below adds its family of commands to it. They
import click and JSON readers only: torch and the rest load inside a command, so `modsenc --help`
and `modsenc zoo list` start in a fraction of a second.
"""

from __future__ import annotations

from modsenc.cli import data, measure, scale, serve, train, zoo  # noqa: F401 - they register the commands
from modsenc.cli.app import main

__all__ = ["main"]
