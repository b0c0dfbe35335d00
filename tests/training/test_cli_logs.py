"""What `modsenc train-backbone` writes to a non-interactive stderr (a log file): log lines, no bars."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from modsenc.cli import main
from modsenc.utils.logs import PROGRESS_ENV, THIRD_PARTY_BAR_SWITCHES
from tests.training.conftest import tiny_recipe

STEP_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d INFO train step (\d+)/4: loss=\S+ .*tok/s=\d+ lr=")


@pytest.fixture()
def train(tmp_path: Path, tiny_data: Path, monkeypatch):
    """Run a 4-step tiny train-backbone (a metrics line every 2 steps) with the given global options;
    click's runner gives the command a non-TTY stderr, as a redirected log has."""
    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    for name in THIRD_PARTY_BAR_SWITCHES:  # the CLI sets them in this process: undo that afterwards
        monkeypatch.setenv(name, "x")
        monkeypatch.delenv(name)
    recipe = tmp_path / "tiny.yaml"
    recipe.write_text(yaml.safe_dump(tiny_recipe(tiny_data, max_steps=4, log_every=2, checkpoint_every=4)))

    def invoke(*options: str, name: str):
        args = [*options, "train-backbone", "--recipe", str(recipe), "--output", str(tmp_path / name)]
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output
        return result

    return invoke


def test_a_log_gets_one_line_per_log_every_and_no_carriage_returns(train) -> None:
    result = train(name="default")
    assert "\r" not in result.output  # stdout and stderr: no progress-bar redraws
    assert result.stdout.strip().startswith("backbone written to ")  # the command's result, on stdout
    lines = result.stderr.splitlines()
    assert [int(m.group(1)) for m in map(STEP_LINE.match, lines) if m] == [2, 4], lines
    assert any(" INFO modsenc train-backbone: " in line and "world_size=1" in line for line in lines)
    assert not any(" DEBUG " in line for line in lines)
    assert os.environ["TQDM_DISABLE"] == "1"  # deepfocus's bars are off too


def test_quiet_keeps_only_the_result(train) -> None:
    result = train("-q", name="quiet")
    assert "\r" not in result.output
    assert " INFO " not in result.stderr and "train step" not in result.stderr
    assert result.stdout.strip().startswith("backbone written to ")


def test_verbose_adds_debug_lines(train) -> None:
    result = train("--verbose", name="verbose")
    assert "\r" not in result.output
    checkpoint = r" DEBUG modsenc\.training\.loop: checkpoint written to .*step-000004$"
    assert re.search(checkpoint, result.stderr, re.M)
    assert "INFO modsenc.training.loop: train step 4/4:" in result.stderr


def test_verbose_and_quiet_exclude_each_other() -> None:
    result = CliRunner().invoke(main, ["-q", "-v", "zoo", "list"])
    assert result.exit_code == 2 and "--verbose and --quiet exclude each other" in result.output
