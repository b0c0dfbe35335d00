"""`modsenc zoo init DIR`: an empty zoo of one's own (with a wheel install, the default zoo is the
shipped one inside site-packages)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from modsenc.cli import main


def test_zoo_init_makes_an_empty_zoo_and_refuses_an_existing_one(tmp_path) -> None:
    zoo = tmp_path / "my-zoo"
    result = CliRunner().invoke(main, ["zoo", "init", str(zoo)])
    assert result.exit_code == 0, result.output
    index = json.loads((zoo / "index.json").read_text(encoding="utf-8"))
    assert index == {"format": "modsenc-zoo/1", "backbone": None, "languages": {}}
    listed = CliRunner().invoke(main, ["zoo", "list", "--zoo", str(zoo)])
    assert listed.exit_code == 0, listed.output
    again = CliRunner().invoke(main, ["zoo", "init", str(zoo)])
    assert again.exit_code == 1
    message = f"Error: {zoo / 'index.json'} exists: {zoo} is a zoo already"
    assert again.output.strip().splitlines() == [message]
