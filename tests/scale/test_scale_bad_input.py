"""modsenc scale encode / mine refuse bad input with one line, before any Ray worker starts."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from modsenc.cli import main
from modsenc.scale.encode import write_embeddings
from modsenc.scale.inputs import list_inputs, plan_shards, read_shard


def _encode(zoo, *args: str) -> str:
    result = CliRunner().invoke(main, ["scale", "encode", "--zoo", str(zoo), *args])
    assert result.exit_code == 1, result.output
    message = result.output.strip()
    assert message.startswith("Error: ") and "\n" not in message and "Traceback" not in message
    return message


@pytest.fixture
def fake_zoo(tmp_path):
    """Enough of a zoo for the checks that run before any model loads (index.json, a backbone manifest)."""
    zoo = tmp_path / "zoo"
    (zoo / "backbone").mkdir(parents=True)
    (zoo / "backbone" / "modsenc_backbone.json").write_text(json.dumps({"fingerprint": "f" * 64}))
    (zoo / "index.json").write_text(
        json.dumps({"languages": {"en": {"is_pivot": True}, "uz": {}}, "backbone": {"fingerprint": "f" * 64}})
    )
    return zoo


def test_missing_empty_and_unreadable_inputs(fake_zoo, tmp_path) -> None:
    out = str(tmp_path / "out")
    assert "--input nowhere.txt: no such file or folder" in _encode(
        fake_zoo, "--input", "nowhere.txt", "--output", out
    )
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    assert f"{empty}: is empty (no rows)" in _encode(fake_zoo, "--input", str(empty), "--output", out)
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "notes.md").write_text("x\n")
    assert "holds no .txt, .jsonl" in _encode(fake_zoo, "--input", str(folder), "--output", out)
    table = tmp_path / "t.parquet"
    pq.write_table(pa.table({"sentence": ["a", "b"]}), table)
    message = _encode(fake_zoo, "--input", str(table), "--output", out)
    assert "no column 'text' (--text-field); columns: sentence" in message
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"not parquet at all")
    assert "not a readable Parquet file" in _encode(fake_zoo, "--input", str(broken), "--output", out)
    text = tmp_path / "a.txt"
    text.write_text("one\n")
    assert "given twice" in _encode(fake_zoo, "--input", str(text), "--input", str(text), "--output", out)
    assert "plain-text inputs have no fields" in _encode(
        fake_zoo, "--input", str(text), "--output", out, "--lang-field", "lang"
    )
    assert "--lang tr: no bundle for it" in _encode(
        fake_zoo, "--input", str(text), "--output", out, "--lang", "tr"
    )
    assert not (tmp_path / "out").exists()  # nothing written for a refused job


def test_output_holding_other_files_or_another_job(fake_zoo, tmp_path) -> None:
    text = tmp_path / "a.txt"
    text.write_text("one\ntwo\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    assert "holds no manifest.json" in _encode(fake_zoo, "--input", str(text), "--output", str(out))
    assert (out / "mine.txt").read_text() == "keep me"
    other = tmp_path / "other"
    write_embeddings(other, __import__("numpy").zeros((2, 4)), ["a", "b"], shard_size=1)
    message = _encode(fake_zoo, "--input", str(text), "--output", str(other))
    assert "holds job synthetic (complete); pass --resume" in message
    message = _encode(fake_zoo, "--input", str(text), "--output", str(other), "--resume")
    assert "differs from this one in" in message and "inputs" in message
    assert "is inside the zoo" in _encode(fake_zoo, "--input", str(text), "--output", str(fake_zoo / "emb"))


def test_bad_jsonl_rows_name_file_and_line(tmp_path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text('{"text": "a"}\n{"text": 3}\n{"txt": "c"}\nnot json\n', encoding="utf-8")
    infos, shards = plan_shards(list_inputs([source]), shard_size=1)
    assert [s.offset for s in shards] == [0, 14, 26, 39]
    assert read_shard(infos[0], shards[0]) == (["a"], None)
    with pytest.raises(ValueError, match=r"in.jsonl, line 2: field 'text' is int, expected a string"):
        read_shard(infos[0], shards[1])
    with pytest.raises(ValueError, match=r"line 3: no field 'text' \(--text-field\); fields: txt"):
        read_shard(infos[0], shards[2])
    with pytest.raises(ValueError, match=r"line 4: not valid JSON"):
        read_shard(infos[0], shards[3])


def test_shards_of_text_gzip_and_parquet_read_the_same_rows(tmp_path) -> None:
    import gzip

    rows = ["é one", "", "three\r", "four"]
    (tmp_path / "a.txt").write_bytes("\ufeff".encode() + "\n".join(rows).encode() + b"\n")
    with gzip.open(tmp_path / "b.txt.gz", "wt", encoding="utf-8") as handle:
        handle.write("\n".join(rows) + "\n")
    pq.write_table(pa.table({"text": rows}), tmp_path / "c.parquet", row_group_size=3)
    infos, shards = plan_shards(list_inputs([tmp_path]), shard_size=3)
    assert [(i.format, i.gzip, i.rows) for i in infos] == [
        ("text", False, 4),
        ("text", True, 4),
        ("parquet", False, 4),
    ]
    assert [(s.file, s.start, s.stop, s.first_id) for s in shards] == [
        (0, 0, 3, 0), (0, 3, 4, 3), (1, 0, 3, 4), (1, 3, 4, 7), (2, 0, 3, 8), (2, 3, 4, 11),
    ]  # fmt: skip
    # Text as `modsenc encode` reads lines (BOM and \r dropped); a Parquet cell is taken as it is.
    lines = ["é one", "", "three", "four"]
    got = [read_shard(infos[s.file], s)[0] for s in shards]
    assert got == [lines[:3], lines[3:], lines[:3], lines[3:], rows[:3], rows[3:]]


def test_mine_refuses_what_is_not_a_finished_encode(tmp_path) -> None:
    runner = CliRunner()
    write_embeddings(tmp_path / "ok", __import__("numpy").ones((3, 4)), ["a", "b", "c"], shard_size=2)
    (tmp_path / "plain").mkdir()
    result = runner.invoke(
        main, ["scale", "mine", str(tmp_path / "plain"), str(tmp_path / "ok"), "--output", "p.tsv"]
    )
    assert result.exit_code == 1 and "SRC" in result.output and "no manifest.json" in result.output
    manifest = json.loads((tmp_path / "ok" / "manifest.json").read_text())
    (tmp_path / "ok" / "manifest.json").write_text(json.dumps(manifest | {"status": "running"}))
    result = runner.invoke(
        main, ["scale", "mine", str(tmp_path / "ok"), str(tmp_path / "ok"), "--output", "p.tsv"]
    )
    assert result.exit_code == 1 and "did not finish; rerun it with --resume" in result.output
