"""StageDir: the per-stage cache add-language and finetune share (key.json, done.json, reuse, refusal)."""

from __future__ import annotations

import json

import pytest

from modsenc.training.stage_cache import StageDir


def _stage(tmp_path) -> StageDir:
    return StageDir(tmp_path / "m", "backbone", command="finetune", option="--output")


def test_a_stage_is_reused_only_when_finished_with_the_same_key(tmp_path) -> None:
    stage = _stage(tmp_path)
    assert stage.finished("k1") is None
    stage.begin("k1", resume=False)
    assert json.loads((stage.path / "key.json").read_text()) == {"key": "k1"}
    assert stage.run_dir == stage.path / "run" and stage.name == "m"
    stage.output.mkdir()
    assert stage.finished("k1") is None  # no done.json yet: unfinished
    stage.finish("k1", {"metrics": {"loss": 1.0}, "seconds": 2.0})
    assert stage.finished("k1") == {"key": "k1", "metrics": {"loss": 1.0}, "seconds": 2.0}
    assert stage.finished("k2") is None


def test_a_stale_stage_starts_over_and_an_unfinished_one_needs_resume(tmp_path) -> None:
    stage = _stage(tmp_path)
    stage.begin("k1", resume=False)
    (stage.run_dir).mkdir()
    (stage.run_dir / "checkpoint").write_text("x")
    with pytest.raises(FileExistsError, match="holds an unfinished run: pass --resume"):
        stage.begin("k1", resume=False)
    stage.begin("k1", resume=True)  # continues: the checkpoint stays
    assert (stage.run_dir / "checkpoint").exists()
    stage.begin("k2", resume=True)  # another key: stale, removed
    assert not stage.run_dir.exists()
    assert json.loads((stage.path / "key.json").read_text()) == {"key": "k2"}


def test_a_folder_the_command_did_not_create_is_never_deleted(tmp_path) -> None:
    stage = _stage(tmp_path)
    stage.path.mkdir()
    (stage.path / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="non-empty folder that finetune did not create .*--output"):
        stage.begin("k1", resume=True)
    assert (stage.path / "notes.txt").read_text() == "mine"
    (stage.path / "notes.txt").unlink()
    stage.begin("k1", resume=False)  # an empty folder is fine
