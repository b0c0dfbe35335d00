"""The library stays readable in pieces: no module of modsenc/ over 500 lines, no function over 60
(docs/design.md: a file that grows past it is split by concern, a function by its steps)."""

from __future__ import annotations

import ast
from pathlib import Path

import modsenc

PACKAGE = Path(modsenc.__file__).parent
MAX_FILE_LINES, MAX_FUNCTION_LINES = 500, 60


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_no_module_is_over_500_lines() -> None:
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in _sources()
        if (n := p.read_text().count("\n")) > MAX_FILE_LINES
    }
    assert long == {}


def test_no_function_is_over_60_lines() -> None:
    long = {}
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}"] = lines
    assert long == {}


def test_the_checks_see_the_whole_package() -> None:
    # the registry, a runtime and the CLI's command files are among the sources checked
    names = {str(p.relative_to(PACKAGE)) for p in _sources()}
    assert {"modules/kinds/__init__.py", "runtimes/openvino.py", "cli/app.py"} <= names
