"""README.md and the command line agree: every command and recipe is documented, and every option
that the documentation gives a command exists on it. Cheap (no model is loaded)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from modsenc.cli import main

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
RECIPES = sorted(p.stem for p in (ROOT / "recipes").glob("*.yaml"))
# Where command lines are written: the READMEs, docs/ and its results pages, the recipes' comments and
# the Makefile (and the commands' own --help, below).
DOCUMENTS = [README, ROOT / "adapters_zoo" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
DOCUMENTS += sorted((ROOT / "docs" / "results").glob("*.md"))
DOCUMENTS += [*sorted((ROOT / "recipes").glob("*.yaml")), ROOT / "Makefile"]
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _commands(group: click.Group, prefix: str = "") -> Iterator[tuple[str, click.Command]]:
    for name, command in group.commands.items():
        path = f"{prefix}{name}"
        if isinstance(command, click.Group):
            yield from _commands(command, f"{path} ")
        else:
            yield path, command


COMMANDS = dict(_commands(main))


def _options(command: click.Command) -> set[str]:
    return {o for p in command.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")} | {"--help"}


def _resolve(tokens: list[str]) -> tuple[str, list[str]]:
    """("zoo list", the remaining tokens) for the tokens after `modsenc`."""
    command: click.Command = main
    path: list[str] = []
    while isinstance(command, click.Group) and tokens and tokens[0] in command.commands:
        command = command.commands[tokens[0]]
        path.append(tokens.pop(0))
    return " ".join(path), tokens


def _code_lines(text: str, markdown: bool) -> Iterator[tuple[int, str]]:
    """(line number, line) of the code in ``text``: in Markdown the fenced and indented blocks,
    elsewhere every line. Continuation lines ending in a backslash are joined."""
    lines, fenced, i = text.splitlines(), False, 0
    while i < len(lines):
        number, line = i + 1, lines[i]
        i += 1
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if markdown and not fenced and not line.startswith("    "):
            continue
        while line.rstrip().endswith("\\") and i < len(lines):
            line = line.rstrip()[:-1] + " " + lines[i]
            i += 1
        yield number, line


def _command_lines(text: str, markdown: bool = True) -> Iterator[tuple[int, str, list[str]]]:
    """(line number, command path, arguments) for each `modsenc CMD ...`, `VAR=x modsenc CMD ...` or
    `torchrun ... -m modsenc.cli CMD ...` in the code of ``text`` ("CMD (unknown)" when CMD is no command)."""
    for number, line in _code_lines(text, markdown):
        try:
            tokens = shlex.split(line.strip().lstrip("#$ "), comments=True)
        except ValueError:  # an unbalanced quote: prose, not a command line
            continue
        segments: list[list[str]] = [[]]
        for token in tokens:  # `cat uz.txt | modsenc encode ...`
            segments.append([]) if token == "|" else segments[-1].append(token)
        for segment in segments:
            while segment and re.fullmatch(r"[A-Z_]+=.*", segment[0]):  # MODSENC_ZOO=... modsenc
                segment.pop(0)
            if segment and (segment[0] == "modsenc" or segment[0].endswith("/modsenc")):
                rest = segment[1:]
            elif "modsenc.cli" in segment and segment[segment.index("modsenc.cli") - 1] == "-m":
                rest = segment[segment.index("modsenc.cli") + 1 :]
            else:
                continue
            if rest and re.fullmatch(r"[a-z][a-z0-9-]*", rest[0]):
                path, args = _resolve(list(rest))
                yield number, path or rest[0] + " (unknown)", args


def _documented_lines() -> Iterator[tuple[str, str, list[str]]]:
    for document in DOCUMENTS:
        markdown = document.suffix == ".md"
        for number, path, rest in _command_lines(document.read_text(encoding="utf-8"), markdown):
            yield f"{document.relative_to(ROOT)}:{number}", path, rest
    for name, command in COMMANDS.items():
        for number, path, rest in _command_lines(command.help or "", markdown=False):
            yield f"`modsenc {name} --help`, line {number}", path, rest


def _tables(text: str, header: str) -> list[list[str]]:
    """The first cells of the rows of every Markdown table whose first column is ``header``."""
    tables, rows = [], []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            rows.append(line.split("|")[1].strip())
            continue
        if rows and rows[0] == header:
            tables.append([r for r in rows[1:] if not set(r) <= set("-: ")])
        rows = []
    return tables


def test_every_command_is_in_the_readme() -> None:
    text = README.read_text(encoding="utf-8")
    used = {path for _, path, _ in _command_lines(text)}
    assert set(COMMANDS) - used == set(), "commands without an example line in README.md"
    (table,) = _tables(text, "command")
    listed = {
        p
        for cell in table
        for span in re.findall(r"`([^`]+)`", cell)
        for p in COMMANDS
        if (span + " ").startswith(p + " ")
    }
    assert set(COMMANDS) - listed == set(), "commands missing from README's command table"


def test_every_recipe_is_in_the_readme_table() -> None:
    """Each recipes/*.yaml has a row (its name in backticks in the first cell) of README's recipe
    table, and the table names no recipe that is not there."""
    (table,) = _tables(README.read_text(encoding="utf-8"), "recipe")
    listed = {name for cell in table for name in re.findall(r"`([^`]+)`", cell)}
    assert set(RECIPES) - listed == set(), "recipes/ files without a row in README's recipe table"
    assert listed - set(RECIPES) == set(), "README's recipe table names recipes that recipes/ lacks"


def test_recipe_defaults_are_the_commands_defaults() -> None:
    """The rows marked "(default)" are the --recipe defaults of their commands."""
    text = README.read_text(encoding="utf-8")
    marked = dict(re.findall(r"^\| `([^`]+)` \| ([a-z-]+) \(default\) \|", text, re.MULTILINE))
    defaults = {path: p.default for path, c in COMMANDS.items() for p in c.params if p.name == "recipe"}
    assert {command: recipe for recipe, command in marked.items()} == defaults


def test_documented_command_lines_use_real_commands_and_options() -> None:
    wrong = []
    for where, path, rest in _documented_lines():
        if path not in COMMANDS:
            wrong.append(f"{where}: `modsenc {' '.join([path, *rest]).strip()}` is not a command")
            continue
        for token in rest:
            flag = token.split("=", 1)[0]
            if flag.startswith("--") and flag not in _options(COMMANDS[path]):
                wrong.append(f"{where}: modsenc {path} has no option {flag}")
    assert not wrong, "\n".join(wrong)


def _sections(text: str) -> Iterator[tuple[str, str]]:
    for chunk in re.split(r"^(?=## )", text, flags=re.MULTILINE):
        yield chunk.splitlines()[0] if chunk else "", chunk


@pytest.mark.parametrize("document", [README, ROOT / "adapters_zoo" / "README.md"], ids=lambda p: p.name)
def test_options_named_in_prose_belong_to_the_commands_there(document: Path) -> None:
    """An option in `backticks` belongs to the command it follows (`encode --no-verify`), or else to
    one of the commands whose example lines are in the same section (the serve limits table)."""
    wrong = []
    for title, chunk in _sections(document.read_text(encoding="utf-8")):
        here = {path for _, path, _ in _command_lines(chunk)} & set(COMMANDS)
        for span in re.findall(r"`([^`\n]+)`", chunk):
            flags = FLAG.findall(span)
            if not flags:
                continue
            words = span.removeprefix("modsenc ").split()
            named = [p for p in COMMANDS if words[: len(p.split())] == p.split()]
            owners = named or sorted(here) or sorted(COMMANDS)
            for flag in flags:
                if not any(flag in _options(COMMANDS[o]) for o in owners):
                    wrong.append(f"{title}: `{span}`: {flag} is not an option of {', '.join(owners)}")
    assert not wrong, "\n".join(wrong)


def test_options_named_in_help_texts_exist() -> None:
    """An option that a command's help (or one of its options' help) names is an option of some
    modsenc command; torchrun's own is the one exception."""
    everything = set().union(*map(_options, COMMANDS.values())) | {"--nproc-per-node"}
    wrong = []
    for path, command in COMMANDS.items():
        texts = [command.help or "", *(getattr(p, "help", None) or "" for p in command.params)]
        wrong += [
            f"modsenc {path} --help: {flag}"
            for t in texts
            for flag in FLAG.findall(t)
            if flag not in everything
        ]
    assert not wrong, "options that no command has:\n" + "\n".join(wrong)
