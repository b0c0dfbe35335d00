"""modsenc scale encode / mine refuse bad input with one line, before any Ray worker starts."""

from __future__ import annotations

import gzip
import json
import logging

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from modsenc.cli import main
from modsenc.scale import encode as scale_encode
from modsenc.scale import mine as scale_mine
from modsenc.scale.encode import shard_path, write_embeddings
from modsenc.scale.inputs import list_inputs, plan_shards, read_shard
from modsenc.scale.mine import mine_corpus
from modsenc.scale.output import hash_path, write_hash
from tests.scale._shards import shift_vectors


def _encode(zoo, *args: str) -> str:
    result = CliRunner().invoke(main, ["scale", "encode", "--zoo", str(zoo), *args])
    assert result.exit_code == 1, result.output
    message = result.output.strip()
    assert message.startswith("Error: ") and "\n" not in message and "Traceback" not in message
    return message


@pytest.fixture
def ray_starts(monkeypatch) -> list[str]:
    """Every attempt of scale encode or mine to start Ray, recorded (and failed): a refusal comes first."""
    started: list[str] = []

    def no_ray(*args, **kwargs):
        started.append("ray")
        raise RuntimeError("Ray was started")

    monkeypatch.setattr(scale_encode, "ray_session", no_ray)
    monkeypatch.setattr(scale_mine, "ray_session", no_ray)
    return started


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
    bad = '{"text": 3}\n{"txt": "c"}\nnot json\n'
    source.write_text('{"text": "a"}\n' + bad, encoding="utf-8")
    # Among a file's first 100 rows: refused when the job is planned, before any worker starts.
    with pytest.raises(ValueError, match=r"in.jsonl, line 2: field 'text' is int, expected a string"):
        plan_shards(list_inputs([source]), shard_size=1)
    # Further down: by the worker that reads the shard.
    source.write_text('{"text": "a"}\n' * 100 + bad, encoding="utf-8")
    infos, shards = plan_shards(list_inputs([source]), shard_size=1)
    assert [s.offset for s in shards[99:]] == [1386, 1400, 1412, 1425]
    assert read_shard(infos[0], shards[0]) == (["a"], None, None)
    with pytest.raises(ValueError, match=r"in.jsonl, line 101: field 'text' is int, expected a string"):
        read_shard(infos[0], shards[100])
    with pytest.raises(ValueError, match=r"line 102: no field 'text' \(--text-field\); fields: txt"):
        read_shard(infos[0], shards[101])
    with pytest.raises(ValueError, match=r"line 103: not valid JSON"):
        read_shard(infos[0], shards[102])


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


def test_unknown_fields_are_refused_before_ray_starts(fake_zoo, tmp_path, ray_starts) -> None:
    """A mistyped --lang-field or --text-field names the field, the file and the fields it has, in one
    line, before Ray starts and before --output is created (the typo used to route rows by detection)."""
    rows = [{"text": "one", "lang": "en"}, {"text": "two", "lang": "uz", "source": "web"}]
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = str(tmp_path / "out")
    message = _encode(fake_zoo, "--input", str(source), "--output", out, "--lang-field", "lnag")
    assert message == (
        f"Error: {source}: no field 'lnag' (--lang-field) in its first 2 rows; fields: text, lang, source"
    )
    message = _encode(fake_zoo, "--input", str(source), "--output", out, "--text-field", "body")
    assert message == f"Error: {source}, line 1: no field 'body' (--text-field); fields: text, lang"
    packed = tmp_path / "in.jsonl.gz"
    with gzip.open(packed, "wt", encoding="utf-8") as handle:
        handle.write(source.read_text(encoding="utf-8"))
    message = _encode(fake_zoo, "--input", str(packed), "--output", out, "--lang-field", "language")
    assert f"{packed}: no field 'language' (--lang-field)" in message
    table = tmp_path / "in.parquet"
    pq.write_table(pa.table({"text": ["one", "two"], "lang": ["en", "uz"], "source": [None, "web"]}), table)
    message = _encode(fake_zoo, "--input", str(table), "--output", out, "--lang-field", "lnag")
    assert message == f"Error: {table}: no column 'lnag' (--lang-field); columns: text, lang, source"
    assert ray_starts == [] and not (tmp_path / "out").exists()
    # A row may leave its language out (--lang decides it): the field found in a later row is enough.
    sparse = tmp_path / "sparse.jsonl"
    sparse.write_text('{"text": "a"}\n{"text": "b", "lang": "uz"}\n', encoding="utf-8")
    infos, _ = plan_shards(list_inputs([sparse]), shard_size=1, lang_field="lang")
    assert infos[0].rows == 2


def test_the_computation_and_the_stored_vectors_have_their_own_dtype(fake_zoo, tmp_path, ray_starts) -> None:
    """scale encode's --dtype is the computation's precision, as modsenc encode's; the stored vectors'
    type is --vector-dtype, and a storage type given as dtype is refused, naming vector_dtype."""
    source = tmp_path / "in.txt"
    source.write_text("one\n", encoding="utf-8")
    out = tmp_path / "out"
    args = ["scale", "encode", "--zoo", str(fake_zoo), "--input", str(source), "--output", str(out)]
    result = CliRunner().invoke(main, [*args, "--dtype", "float16"])
    assert result.exit_code == 2 and "'float16' is not one of 'auto', 'fp32', 'bf16'" in result.output
    with pytest.raises(ValueError, match="the stored vectors' type is --vector-dtype"):
        scale_encode.encode_corpus(fake_zoo, [source], out, dtype="float16", device="cpu")
    with pytest.raises(ValueError, match="--vector-dtype must be one of float32, float16, got 'bf16'"):
        scale_encode.encode_corpus(fake_zoo, [source], out, vector_dtype="bf16", device="cpu")
    with pytest.raises(ValueError, match="runtime must be one of torch, openvino, auto, got 'onnx'"):
        scale_encode.encode_corpus(fake_zoo, [source], out, runtime="onnx", device="cpu")
    assert ray_starts == [] and not out.exists()


def test_mine_refuses_a_shard_changed_after_it_was_written(tmp_path, ray_starts) -> None:
    """A shard rewritten as valid Parquet with its vectors shifted one row (mined silently before: every
    pair wrong) differs from the sha256 the manifest recorded: refused in one line naming the shard."""
    rng = np.random.default_rng(0)
    src = rng.normal(size=(40, 8)).astype(np.float32)
    write_embeddings(tmp_path / "src", src, [f"s{i}" for i in range(40)], shard_size=10)
    write_embeddings(tmp_path / "tgt", src + 0.01, [f"t{i}" for i in range(40)], shard_size=10)
    shard = shard_path(tmp_path / "tgt", 1)
    shift_vectors(shard)
    assert pq.read_metadata(shard).num_rows == 10
    changed, manifest = shard.read_bytes(), (tmp_path / "tgt" / "manifest.json").read_bytes()
    pairs = tmp_path / "pairs.tsv"
    result = CliRunner().invoke(
        main, ["scale", "mine", str(tmp_path / "src"), str(tmp_path / "tgt"), "--output", str(pairs)]
    )
    assert result.exit_code == 1, result.output
    message = result.output.strip()
    assert "\n" not in message and "Traceback" not in message
    expected = f"Error: TGT {tmp_path / 'tgt'}: shard {shard} differs from the sha256 recorded"
    assert message.startswith(expected)
    assert "delete it and rerun `modsenc scale encode --resume`" in message
    assert ray_starts == [] and not pairs.exists()
    assert shard.read_bytes() == changed and (tmp_path / "tgt" / "manifest.json").read_bytes() == manifest


def test_mine_takes_an_output_without_shard_hashes_with_a_warning(tmp_path, ray_starts, caplog) -> None:
    """A manifest from before shard hashes (no shard_sha256) is mined as before, with a warning."""
    write_embeddings(tmp_path / "old", np.eye(4, dtype=np.float32), list("abcd"), shard_size=2)
    manifest_path = tmp_path / "old" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    del manifest["shard_sha256"]
    manifest_path.write_text(json.dumps(manifest))
    with caplog.at_level(logging.WARNING, logger="modsenc.scale"), pytest.raises(RuntimeError, match="Ray"):
        mine_corpus(tmp_path / "old", tmp_path / "old", tmp_path / "p.tsv")
    assert ray_starts == ["ray"]  # accepted: the search was about to start
    assert "records no shard sha256" in caplog.text and "used unverified" in caplog.text


def test_an_unknown_or_bad_id_column_is_refused_before_ray_starts(fake_zoo, tmp_path, ray_starts) -> None:
    """--id-column: a JSONL field or Parquet column every row has, a string or an integer; refused
    in one line, before any worker starts, when a file lacks it, has no fields (plain text) or one of
    its first rows holds no usable id."""
    out = str(tmp_path / "out")
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text('{"doc": "a", "text": "x"}\n{"doc": 7, "text": "y"}\n', encoding="utf-8")
    message = _encode(fake_zoo, "--input", str(jsonl), "--output", out, "--id-column", "dco")
    assert message == f"Error: {jsonl}, line 1: no field 'dco' (--id-column); fields: doc, text"
    table = tmp_path / "in.parquet"
    pq.write_table(pa.table({"text": ["one", "two"], "doc": ["d1", "d2"]}), table)
    message = _encode(fake_zoo, "--input", str(table), "--output", out, "--id-column", "id")
    assert message == f"Error: {table}: no column 'id' (--id-column); columns: text, doc"
    text = tmp_path / "in.txt"
    text.write_text("one\n", encoding="utf-8")
    message = _encode(
        fake_zoo, "--input", str(table), "--input", str(text), "--output", out, "--id-column", "doc"
    )
    assert (
        message
        == f"Error: {text}: plain text has no fields, so no 'doc' (--id-column): give JSONL or Parquet"
    )
    for bad, shown in (("null", "None"), ("1.5", "1.5"), ("true", "True"), ('"a\\tb"', "'a\\tb'")):
        jsonl.write_text(f'{{"doc": "a", "text": "x"}}\n{{"doc": {bad}, "text": "y"}}\n', encoding="utf-8")
        message = _encode(fake_zoo, "--input", str(jsonl), "--output", out, "--id-column", "doc")
        assert message.startswith(f"Error: {jsonl}, line 2: field 'doc' (--id-column) is {shown}"), message
    assert ray_starts == [] and not (tmp_path / "out").exists()
    # Read by a worker: each row's id as text (an integer as its digits); a bad Parquet cell named by row.
    jsonl.write_text('{"doc": "a", "text": "x"}\n{"doc": 7, "text": "y"}\n', encoding="utf-8")
    infos, shards = plan_shards(list_inputs([jsonl, table]), shard_size=2, id_field="doc")
    assert [read_shard(infos[s.file], s, id_field="doc").ids for s in shards] == [["a", "7"], ["d1", "d2"]]
    pq.write_table(pa.table({"text": ["one", "two"], "doc": [1.0, None]}), table)
    infos, shards = plan_shards(list_inputs([table]), shard_size=2, id_field="doc")
    with pytest.raises(ValueError, match=r"in.parquet: row 1: column 'doc' \(--id-column\) is 1.0, expected"):
        read_shard(infos[0], shards[0], id_field="doc")


def test_mining_one_mixed_output_needs_two_languages_it_has(tmp_path, ray_starts) -> None:
    """scale mine JOB (no TGT) takes --src-lang and --tgt-lang, two different languages of its rows;
    refused in one line otherwise, before Ray starts."""
    write_embeddings(tmp_path / "mixed", np.eye(4, dtype=np.float32), list("abcd"), 2, lang=["en", "uz"] * 2)
    runner, pairs = CliRunner(), str(tmp_path / "p.tsv")
    for args, expected in (
        ([], "one folder (no TGT) is mined with --src-lang and --tgt-lang: give both, or TGT"),
        (["--src-lang", "en"], "one folder (no TGT) is mined with --src-lang and --tgt-lang"),
        (["--src-lang", "uz", "--tgt-lang", "uz"], "--src-lang and --tgt-lang are both uz"),
        (["--src-lang", "en", "--tgt-lang", "kk"], f"TGT {tmp_path / 'mixed'}: no rows of language 'kk'; "
         "languages there: en, uz"),
    ):  # fmt: skip
        result = runner.invoke(main, ["scale", "mine", str(tmp_path / "mixed"), "--output", pairs, *args])
        assert result.exit_code == 1 and result.output.startswith(f"Error: {expected}"), result.output
    assert ray_starts == [] and not (tmp_path / "p.tsv").exists()


def test_mine_verifies_shards_by_the_hashes_beside_them_when_the_manifest_lost_its_own(
    tmp_path, ray_starts
) -> None:
    """Issue 50: a real scale encode output records each shard's sha256 in hashes/ as well as in the
    manifest. With the manifest's list removed, a shifted shard was mined (wrong pairs) after one
    warning; the files beside the shards still vouch for them, so they are used, and a shard with
    some of them deleted too is refused."""
    rng = np.random.default_rng(0)
    src = rng.normal(size=(40, 8)).astype(np.float32)
    write_embeddings(tmp_path / "src", src, [f"s{i}" for i in range(40)], shard_size=10)
    tgt = tmp_path / "tgt"
    write_embeddings(tgt, src + 0.01, [f"t{i}" for i in range(40)], shard_size=10)
    manifest = json.loads((tgt / "manifest.json").read_text())
    for index, digest in enumerate(manifest.pop("shard_sha256")):
        write_hash(tgt, index, digest)  # as scale encode's writers do
    (tgt / "manifest.json").write_text(json.dumps(manifest))
    shift_vectors(shard_path(tgt, 1))
    pairs = tmp_path / "pairs.tsv"
    args = ["scale", "mine", str(tmp_path / "src"), str(tgt), "--output", str(pairs)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    assert f"shard {shard_path(tgt, 1)} differs from the sha256 recorded" in result.output
    hash_path(tgt, 2).unlink()
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    assert f"the manifest records no shard sha256 and {hash_path(tgt, 2)} is missing too" in result.output
    assert ray_starts == [] and not pairs.exists()


@pytest.mark.parametrize("fmt", ["txt", "jsonl"])
def test_a_gzip_input_with_its_trailer_cut_is_refused_naming_it(fake_zoo, tmp_path, ray_starts, fmt) -> None:
    """Issue 50: a .gz whose last bytes (the CRC and size trailer) are cut is refused with its name."""
    lines = [json.dumps({"text": f"row {i}"}) if fmt == "jsonl" else f"row {i}" for i in range(500)]
    cut = tmp_path / f"in.{fmt}.gz"
    cut.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode())[:-8])
    message = _encode(fake_zoo, "--input", str(cut), "--output", str(tmp_path / "out"))
    assert f"{cut}: cannot be read" in message
    assert ray_starts == [] and not (tmp_path / "out").exists()
