"""The command line: help, overrides, and clear errors for bad input (no traceback)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from modsenc.cli import main
from modsenc.cli.app import ModsencGroup
from modsenc.utils.errors import UnknownNameError


@pytest.fixture()
def runner() -> CliRunner:
    return CliRunner()


def _train_on(runner: CliRunner, tmp_path: Path, data: Path):
    return runner.invoke(
        main, ["train-backbone", "--output", str(tmp_path / "out"), "--set", f"data.parallel=[{data}]"]
    )


def test_help_lists_commands_and_options(runner: CliRunner) -> None:
    result = runner.invoke(main, ["--help"])
    assert result.exit_code == 0
    assert "train-backbone" in result.output
    result = runner.invoke(main, ["train-backbone", "--help"])
    assert result.exit_code == 0
    for option in ("--recipe", "--output", "--resume", "--max-steps", "--set"):
        assert option in result.output


def test_unknown_recipe_lists_available(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(main, ["train-backbone", "--recipe", "nope", "--output", str(tmp_path)])
    assert result.exit_code == 1
    assert "no recipe named 'nope'" in result.output
    assert "cpu-small" in result.output and "demo" in result.output


def test_unknown_override_key_is_an_error(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(
        main, ["train-backbone", "--output", str(tmp_path), "--set", "training.max_stepz=3"]
    )
    assert result.exit_code == 1
    assert "unknown recipe key 'training.max_stepz'; training takes: " in result.output
    assert "max_steps" in result.output  # the keys that do exist are listed


def test_missing_data_file_is_named(runner: CliRunner, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.tsv"
    result = _train_on(runner, tmp_path, missing)
    assert result.exit_code == 1
    assert str(missing) in result.output
    assert "Traceback" not in result.output


def test_ragged_data_file_names_file_and_line(runner: CliRunner, tmp_path: Path) -> None:
    bad = tmp_path / "bad.tsv"
    bad.write_text("en\tde\nHello.\tHallo.\nOne field only\nBye.\tTschüss.\n", encoding="utf-8")
    result = _train_on(runner, tmp_path, bad)
    assert result.exit_code == 1
    assert f"{bad}, line 3" in result.output


def test_corpus_without_pivot_language_is_an_error(runner: CliRunner, tmp_path: Path) -> None:
    data = tmp_path / "de-fr.tsv"
    data.write_text("de\tfr\nHallo.\tBonjour.\n", encoding="utf-8")
    result = _train_on(runner, tmp_path, data)
    assert result.exit_code == 1
    assert str(data) in result.output and "en" in result.output


def test_add_language_help_and_errors(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(main, ["add-language", "--help"])
    assert result.exit_code == 0
    for option in ("--backbone", "--zoo", "--mono", "--paraphrase", "--parallel", "--stages", "--resume"):
        assert option in result.output
    result = runner.invoke(main, ["add-language", "../uz", "--zoo", str(tmp_path / "zoo")])
    assert result.exit_code == 1 and "invalid language code '../uz'" in result.output
    assert "Traceback" not in result.output
    result = runner.invoke(
        main, ["add-language", "uz", "--zoo", str(tmp_path / "zoo"), "--work-dir", str(tmp_path / "w")]
    )
    assert result.exit_code == 1
    assert "run `modsenc add-language en` first" in result.output
    result = runner.invoke(main, ["add-language", "en", "--zoo", str(tmp_path / "zoo"), "--stages", "se,foo"])
    assert result.exit_code == 1 and "unknown stage(s) ['foo']" in result.output
    result = runner.invoke(
        main,
        [
            "add-language",
            "en",
            "--zoo",
            str(tmp_path / "zoo"),
            "--work-dir",
            str(tmp_path / "w2"),
            "--paraphrase",
            str(tmp_path / "missing.tsv"),
        ],
    )
    assert result.exit_code == 1 and "missing.tsv: no such file" in result.output


def test_finetune_help_and_errors(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(main, ["finetune", "--help"])
    assert result.exit_code == 0
    for option in ("--backbone", "--output", "--pairs", "--resume", "--set"):
        assert option in result.output
    result = runner.invoke(
        main, ["finetune", "--backbone", str(tmp_path / "none"), "--output", str(tmp_path)]
    )
    assert result.exit_code == 2 and "Directory" in result.output and "does not exist" in result.output
    result = runner.invoke(main, ["finetune", "--output", str(tmp_path)])
    assert result.exit_code == 2 and "Missing option '--backbone'" in result.output
    result = runner.invoke(
        main, ["finetune", "--backbone", str(tmp_path), "--output", str(tmp_path), "--set", "mono.epoch=1"]
    )
    assert result.exit_code == 1 and "unknown recipe key 'mono.epoch'; mono takes: epochs," in result.output
    assert "Traceback" not in result.output


def _commands(group, prefix: str = ""):
    """(path, command) for every command under a click group, e.g. ("zoo list", <Command list>)."""
    for name, command in group.commands.items():
        path = f"{prefix}{name}"
        if hasattr(command, "commands"):
            yield from _commands(command, f"{path} ")
        else:
            yield path, command


def test_every_command_resolves_the_default_zoo_the_same_way(monkeypatch, tmp_path: Path) -> None:
    from modsenc.modules.defaults import DEFAULT_ZOO, ZOO_ENV, default_zoo

    with_zoo = {path: cmd for path, cmd in _commands(main) if any(p.name == "zoo_dir" for p in cmd.params)}
    assert set(with_zoo) == {
        "add-language",
        "encode",
        "zoo list",
        "zoo info",
        "zoo install",
        "export",
        "mine",
        "serve",
        "scale encode",
    }
    for path, command in with_zoo.items():
        option = next(p for p in command.params if p.name == "zoo_dir")
        assert option.default is default_zoo, path
        assert f"{DEFAULT_ZOO}, or ${ZOO_ENV}" in option.help, path
    src = tmp_path / "src.txt"
    src.write_text("Hello.\n", encoding="utf-8")
    required = {
        "add-language": ["uz"],
        "encode": ["--output", "v.npy"],
        "zoo info": ["uz"],
        "zoo install": ["bundle"],
        "export": ["--lang", "uz", "--output", "out"],
        "mine": [str(src), str(src), "--output", "pairs.tsv"],
        "scale encode": ["--input", str(src), "--output", "emb"],
    }
    elsewhere = str(tmp_path / "z")
    for value, expected in ((None, DEFAULT_ZOO), ("", DEFAULT_ZOO), (elsewhere, elsewhere)):
        if value is None:
            monkeypatch.delenv(ZOO_ENV, raising=False)
        else:
            monkeypatch.setenv(ZOO_ENV, value)
        assert default_zoo() == expected
        for path, command in with_zoo.items():  # parsed, not run: the defaults resolve as at run time
            context = command.make_context(path, list(required.get(path, [])))
            assert context.params["zoo_dir"] == expected, path


def test_the_cli_choices_are_the_librarys_own() -> None:
    """cli.py spells its choices out (importing torch-heavy modules would slow `--help`); they must
    stay the lists the library accepts."""
    import click

    from modsenc.backbone.attention import ATTENTION_CHOICES
    from modsenc.backbone.encoder import POOLINGS
    from modsenc.backbone.precision import PRECISIONS
    from modsenc.backbone.quantization import QUANTIZATIONS
    from modsenc.encoder import MODES
    from modsenc.runtimes import RUNTIME_CHOICES
    from modsenc.scale.encode import VECTOR_DTYPES

    declared = {
        "--attention": ATTENTION_CHOICES,
        "--pooling": POOLINGS,
        "--dtype": PRECISIONS,
        "--quantize": QUANTIZATIONS,
        "--mode": MODES,
        "--vector-dtype": VECTOR_DTYPES,
        "--runtime": RUNTIME_CHOICES,
    }
    seen: dict[str, set[tuple[str, ...]]] = {}
    commands = [main] + [c for c in main.commands.values()]
    commands += [
        sub for c in main.commands.values() if isinstance(c, click.Group) for sub in c.commands.values()
    ]
    for command in commands:
        for param in command.params:
            if isinstance(param.type, click.Choice) and param.opts[0] in declared:
                seen.setdefault(param.opts[0], set()).add(tuple(param.type.choices))
    assert seen == {option: {tuple(choices)} for option, choices in declared.items()}


@pytest.mark.parametrize(
    ("error", "shown"),
    [
        (UnknownNameError("no bundle for 'xx' in the zoo"), "no bundle for 'xx' in the zoo"),
        (KeyError("a key error's message, unquoted"), "a key error's message, unquoted"),
        (
            FileNotFoundError("zoo/uz/modsenc_bundle.json: no such file"),
            "zoo/uz/modsenc_bundle.json: no such file",
        ),
    ],
)
def test_a_command_error_is_one_line_from_the_group(monkeypatch, tmp_path: Path, error, shown) -> None:
    """The commands catch nothing themselves: main (a ModsencGroup) turns a ModsencError, or a
    builtin error the library raises for bad input, into "Error: MESSAGE" and exit status 1."""
    from modsenc.modules.bundle import Zoo  # noqa: PLC0415

    def fail(self, lang):
        raise error

    monkeypatch.setattr(Zoo, "read_manifest", fail)
    result = CliRunner().invoke(main, ["zoo", "info", "uz", "--zoo", str(tmp_path)])
    assert (result.exit_code, result.output) == (1, f"Error: {shown}\n")
    assert isinstance(main, ModsencGroup)
