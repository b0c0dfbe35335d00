"""The code stays readable in pieces: no module of modsenc/, bench/ or experiments/ over 500 lines, no
function over 60 (docs/design.md: a file that grows past it is split by concern, a function by its
steps). The scripts of bench/ and experiments/ are packages run as ``python -m bench.x``: none
edits ``sys.path``, and none imports another script (what they share is in the folder's common.py).
Import cycles inside modsenc are lint-imports' (pyproject.toml, the acyclic_siblings contract)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import modsenc

PACKAGE = Path(modsenc.__file__).parent
ROOT = Path(__file__).resolve().parents[1]
SCRIPT_FOLDERS = ("bench", "experiments")
MAX_FILE_LINES, MAX_FUNCTION_LINES = 500, 60
# sys.path.insert(...), .append, .extend, .remove, sys.path[...] = ..., sys.path += ...: in code or
# in a string a script runs (a subprocess's -c program), not a mention in prose
SYS_PATH_EDIT = re.compile(r"sys\.path\s*(\.\s*(insert|append|extend|remove)\s*\(|\[[^\]]*\]\s*=|\+=|=[^=])")


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _scripts() -> list[Path]:
    return sorted(p for folder in SCRIPT_FOLDERS for p in (ROOT / folder).rglob("*.py"))


def _name(path: Path) -> str:
    """modsenc's files relative to the package (as before), the scripts' to the repository."""
    return str(path.relative_to(PACKAGE if path.is_relative_to(PACKAGE) else ROOT))


def test_no_module_is_over_500_lines() -> None:
    long = {_name(p): n for p in _sources() + _scripts() if (n := p.read_text().count("\n")) > MAX_FILE_LINES}
    assert long == {}


def test_no_function_is_over_60_lines() -> None:
    long = {}
    for path in _sources() + _scripts():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{_name(path)}:{node.lineno} {node.name}"] = lines
    assert long == {}


def test_the_checks_see_the_whole_package() -> None:
    # the registry, a runtime and the CLI's command files are among the sources checked
    names = {str(p.relative_to(PACKAGE)) for p in _sources()}
    assert {"modules/kinds/__init__.py", "runtimes/openvino.py", "cli/app.py"} <= names


def test_the_checks_see_the_scripts() -> None:
    names = {_name(p) for p in _scripts()}
    assert {"bench/backbone_throughput.py", "bench/common.py", "experiments/common.py"} <= names
    assert {"bench/__init__.py", "experiments/__init__.py"} <= names  # packages: python -m bench.x


def test_no_script_edits_sys_path() -> None:
    edits = {}
    for path in _scripts():
        text = path.read_text()
        for m in SYS_PATH_EDIT.finditer(text):
            edits[f"{_name(path)}:{text.count(chr(10), 0, m.start()) + 1}"] = m.group()
    assert edits == {}


def _is_script(tree: ast.Module) -> bool:
    """A module with an ``if __name__ == "__main__":`` block."""
    return any(
        isinstance(node, ast.If)
        and isinstance(node.test, ast.Compare)
        and isinstance(node.test.left, ast.Name)
        and node.test.left.id == "__name__"
        for node in tree.body
    )


def _imported(node: ast.AST) -> list[str]:
    """The modules an import statement names (``from bench import x``: ``bench.x`` too)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
    return []


def test_no_script_imports_another_script() -> None:
    trees = {path: ast.parse(path.read_text()) for path in _scripts()}
    modules = {".".join(path.relative_to(ROOT).with_suffix("").parts): path for path in trees}
    scripts = {name for name, path in modules.items() if _is_script(trees[path])}
    siblings = {path.stem for path in trees}  # a bare `import common`: only with the folder on sys.path
    found = {}
    for path, tree in trees.items():
        for node in ast.walk(tree):
            for name in _imported(node):
                if name in scripts or name.split(".")[0] in siblings:
                    found.setdefault(_name(path), set()).add(name)
    assert found == {}
