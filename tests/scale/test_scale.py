"""modsenc scale encode / mine on a local Ray cluster of 2 CPUs, against the single-process paths."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from modsenc.cli import main
from modsenc.data.demo import demo_path
from modsenc.data.readers import read_parallel_tsv
from modsenc.encoder import ModularEncoder
from modsenc.eval.mining import mine
from modsenc.scale import encode as scale_encode
from modsenc.scale.encode import encode_corpus, shard_path, write_embeddings
from modsenc.scale.mine import mine_corpus
from modsenc.scale.output import ShardIntegrityError, hash_path
from modsenc.utils.io import file_sha256, temporary_file
from tests._zoo import HELD_OUT
from tests.scale._shards import shift_vectors

ray = pytest.importorskip("ray")

ROOT = Path(__file__).resolve().parents[2]
CORPUS = read_parallel_tsv(demo_path("parallel.tsv")).columns
# Every test here starts Ray actors (seconds each on a busy machine): the module is slow as a whole.
pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::UserWarning")]


@pytest.fixture(scope="module")
def cluster():
    """One local Ray cluster for the module; workers import this checkout's modsenc, one thread each."""
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        logging_level="WARNING",
        runtime_env={"env_vars": {"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}},
    )
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def encoder(zoo_dir) -> ModularEncoder:
    return ModularEncoder.from_pretrained(zoo_dir, device="cpu", runtime="torch")


def _mixed() -> list[str]:
    """en, uz and kk interleaved, with an empty line (encoded as empty text, as `modsenc encode` does)."""
    rows = []
    for i in range(240, 248):
        rows += [CORPUS["en"][i], CORPUS["uz"][i], CORPUS["kk"][i]]
    return rows[:11] + [""] + rows[11:] + HELD_OUT["kk"]


def _read(output: Path) -> pa.Table:
    manifest = json.loads((output / "manifest.json").read_text(encoding="utf-8"))
    return pa.concat_tables([pq.read_table(output / name) for name in manifest["shard_files"]])


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def _vectors(table: pa.Table) -> np.ndarray:
    return np.stack(table.column("vector").to_numpy(zero_copy_only=False)).astype(np.float32)


def test_two_workers_equal_one_process(cluster, zoo_dir, encoder, tmp_path) -> None:
    """Mixed en/uz/kk rows over two files (text and JSONL), 2 actors, 6-row shards: the same ids, routes
    and vectors as ModularEncoder.encode in this process."""
    rows = _mixed()
    text_file, jsonl_file = tmp_path / "in" / "a.txt", tmp_path / "in" / "b.jsonl"
    text_file.parent.mkdir()
    text_file.write_text("\n".join(rows[:20]) + "\n", encoding="utf-8")
    jsonl_file.write_text("".join(json.dumps({"text": t}) + "\n" for t in rows[20:]), encoding="utf-8")
    manifest = encode_corpus(
        zoo_dir, [tmp_path / "in"], tmp_path / "out", shard_size=6, workers=2, device="cpu"
    )
    assert manifest["status"] == "complete" and manifest["shards"] == 4 + 2
    assert manifest["encoded"] == len(rows) and manifest["rejected"] == 0
    table = _read(tmp_path / "out")
    expected, langs = encoder.encode(rows, return_languages=True)
    assert table.column("id").to_pylist() == list(range(len(rows)))
    assert table.column("file").to_pylist() == [0] * 20 + [1] * (len(rows) - 20)
    assert table.column("line").to_pylist() == list(range(1, 21)) + list(range(1, len(rows) - 19))
    assert table.column("text").to_pylist() == rows
    assert table.column("lang").to_pylist() == langs
    assert {"en", "uz", "kk"} <= set(langs)
    assert set(table.column("route").to_pylist()) == {"bundle"}
    assert _cosines(_vectors(table), expected).min() >= 0.99999
    assert (tmp_path / "out" / "rejects.jsonl").read_text(encoding="utf-8") == ""


def test_rejects_list_rows_no_bundle_serves(cluster, zoo_dir, encoder, tmp_path) -> None:
    """A language column naming tr (not installed) and a bad code: those rows go to rejects.jsonl with
    their file and line; the others are encoded with the language given (or detected when empty)."""
    rows = [
        {"text": CORPUS["uz"][250], "lang": "uz"},
        {"text": CORPUS["tr"][250], "lang": "tr"},
        {"text": CORPUS["en"][250], "lang": ""},
        {"text": CORPUS["kk"][250], "lang": "kk"},
        {"text": CORPUS["tr"][251], "lang": "turkish"},
        {"text": "Я вчера купил новый телефон в магазине.", "lang": None},  # detected: ru, no bundle
    ]
    source = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist(rows), source)
    runner = CliRunner()
    result = runner.invoke(
        main,
        ["scale", "encode", "--zoo", str(zoo_dir), "--input", str(source), "--output", str(tmp_path / "out"),
         "--lang-field", "lang", "--vector-dtype", "float16", "--shard-size", "2", "--workers", "2",
         "--device", "cpu"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "4 rows encoded" in result.output and "2 rejected" in result.output
    rejects = [json.loads(line) for line in (tmp_path / "out" / "rejects.jsonl").read_text().splitlines()]
    assert [(r["id"], r["line"], r["lang"], r["text"]) for r in rejects] == [
        (1, 2, "tr", CORPUS["tr"][250]),
        (4, 5, "turkish", CORPUS["tr"][251]),
    ]
    assert rejects[0]["file"] == str(source) and "no bundle for language 'tr'" in rejects[0]["reason"]
    assert "invalid language code 'turkish'" in rejects[1]["reason"]
    table = _read(tmp_path / "out")
    assert table.column("id").to_pylist() == [0, 2, 3, 5]
    assert table.column("lang").to_pylist() == ["uz", "en", "kk", "ru"]
    assert table.column("route").to_pylist() == ["bundle", "bundle", "bundle", "backbone"]
    assert table.column_names[:9] == [
        "id", "file", "line", "lang", "route", "detected", "confidence", "unsure", "text"
    ]  # fmt: skip
    # what the router detected where no language was given (en, ru); a given one is certain
    assert table.column("detected").to_pylist() == [None, "en", None, "ru"]
    assert [table.column("confidence")[i].as_py() for i in (0, 2)] == [1.0, 1.0]
    assert table.schema.field("vector").type.value_type == pa.float16()
    texts = [rows[i]["text"] for i in (0, 2, 3, 5)]
    expected = encoder.encode(texts, lang=["uz", "en", "kk", "backbone"])
    assert _cosines(_vectors(table), expected).min() >= 0.9999  # float16 storage


class DyingEncoder(scale_encode.ShardEncoder):
    """Dies (the process, as an out-of-memory kill would) halfway through writing shard 2, every time."""

    def encode_shard(self, shard):
        if shard.index == 2:
            temporary_file(shard_path(self.output, shard.index)).write_bytes(b"PAR1 half a shard")
            os._exit(1)
        return super().encode_shard(shard)


def test_worker_death_leaves_no_half_shard_and_resume_completes(
    cluster, zoo_dir, encoder, tmp_path, monkeypatch
) -> None:
    """Then every shard's sha256 is in the manifest; a shard changed afterwards is refused by --resume
    and by scale mine, and deleting it and resuming (as their message says) encodes it again."""
    rows = _mixed()[:10]
    source = tmp_path / "in.txt"
    source.write_text("\n".join(rows) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    monkeypatch.setattr(scale_encode, "ShardEncoder", DyingEncoder)
    with pytest.raises(Exception):  # noqa: B017 - Ray's own error once its retries are spent
        encode_corpus(zoo_dir, [source], out, shard_size=2, workers=1, device="cpu")
    assert not shard_path(out, 2).exists()  # retried, then given up: never half-written
    failed = json.loads((out / "manifest.json").read_text())
    assert failed["status"] == "failed" and "\n" not in failed["reason"], failed.get("reason")
    monkeypatch.undo()
    with pytest.raises(FileExistsError, match="pass --resume"):
        encode_corpus(zoo_dir, [source], out, shard_size=2, workers=1, device="cpu")
    with pytest.raises(FileExistsError, match="differs from this one in shard_size"):
        encode_corpus(zoo_dir, [source], out, shard_size=3, workers=1, device="cpu", resume=True)
    manifest = encode_corpus(zoo_dir, [source], out, shard_size=2, workers=2, device="cpu", resume=True)
    assert manifest["status"] == "complete" and manifest["encoded"] == len(rows)
    assert sorted(p.name for p in (out / "shards").iterdir()) == [f"part-{i:05d}.parquet" for i in range(5)]
    table = _read(out)
    assert table.column("id").to_pylist() == list(range(len(rows)))
    assert _cosines(_vectors(table), encoder.encode(rows)).min() >= 0.99999
    assert manifest["shard_sha256"] == [file_sha256(shard_path(out, i)) for i in range(5)]
    assert [hash_path(out, i).read_text().strip() for i in range(5)] == manifest["shard_sha256"]
    _changed_shard_is_refused_then_encoded_again(zoo_dir, source, out)


def _changed_shard_is_refused_then_encoded_again(zoo_dir, source: Path, out: Path) -> None:
    shard = shard_path(out, 3)
    original = shard.read_bytes()
    shift_vectors(shard)  # valid Parquet, same rows: only the hash tells
    changed, manifest = shard.read_bytes(), (out / "manifest.json").read_bytes()
    with pytest.raises(
        ShardIntegrityError, match=r"--resume: shard .*part-00003.parquet differs from the sha256"
    ):
        encode_corpus(zoo_dir, [source], out, shard_size=2, workers=1, device="cpu", resume=True)
    result = CliRunner().invoke(
        main, ["scale", "mine", str(out), str(out), "--output", str(out.parent / "p.tsv")]
    )
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert f"Error: SRC {out}: shard {shard} differs from the sha256 recorded" in result.output
    assert shard.read_bytes() == changed and (out / "manifest.json").read_bytes() == manifest
    assert not (out.parent / "p.tsv").exists()
    shard.unlink()
    resumed = encode_corpus(zoo_dir, [source], out, shard_size=2, workers=1, device="cpu", resume=True)
    assert shard.read_bytes() == original and resumed["shard_sha256"][3] == file_sha256(shard)


class DyingOnce(scale_encode.ShardEncoder):
    """Dies halfway through shard 1 the first time only (a marker file remembers it across processes)."""

    def encode_shard(self, shard):
        marker = self.output.parent / "died"
        if shard.index == 1 and not marker.exists():
            marker.touch()
            temporary_file(shard_path(self.output, shard.index)).write_bytes(b"PAR1 half a shard")
            os._exit(1)
        return super().encode_shard(shard)


def test_a_dead_worker_is_replaced_and_its_shard_retried(cluster, zoo_dir, encoder, tmp_path, monkeypatch):
    rows = _mixed()[:6]
    source = tmp_path / "in.txt"
    source.write_text("\n".join(rows) + "\n", encoding="utf-8")
    monkeypatch.setattr(scale_encode, "ShardEncoder", DyingOnce)
    manifest = encode_corpus(zoo_dir, [source], tmp_path / "out", shard_size=2, workers=1, device="cpu")
    assert (tmp_path / "died").exists() and manifest["encoded"] == len(rows)
    assert sorted(p.name for p in (tmp_path / "out" / "shards").iterdir()) == [
        f"part-{i:05d}.parquet" for i in range(3)
    ]  # the half-written temporary of the dead actor is gone
    table = _read(tmp_path / "out")
    assert table.column("id").to_pylist() == list(range(len(rows)))
    assert _cosines(_vectors(table), encoder.encode(rows)).min() >= 0.99999


_SLOW_JOB = """
import sys, time
from modsenc.scale import encode as scale_encode

class Slow(scale_encode.ShardEncoder):
    def encode_shard(self, shard):
        time.sleep(0.4)  # long enough for the test to kill the job between two shards
        return super().encode_shard(shard)

scale_encode.ShardEncoder = Slow
scale_encode.encode_corpus(sys.argv[1], [sys.argv[2]], sys.argv[3], shard_size=2, workers=1, device="cpu",
                           address=sys.argv[4])
"""


def test_resume_after_killing_the_job(cluster, zoo_dir, encoder, tmp_path) -> None:
    """SIGKILL the driver of a running job (it joined this module's cluster) after its second shard;
    --resume keeps the finished shards as they are and writes the rest: no row twice, same vectors."""
    rows = _mixed()[:24]
    source = tmp_path / "in.txt"
    source.write_text("\n".join(rows) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    address = cluster.get_runtime_context().gcs_address
    env = os.environ | {"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    job = subprocess.Popen(
        [sys.executable, "-c", _SLOW_JOB, str(zoo_dir), str(source), str(out), address],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(list((out / "shards").glob("part-*.parquet"))) < 2:
            assert job.poll() is None, "the job ended before it could be killed"
            time.sleep(0.05)
    finally:
        job.send_signal(signal.SIGKILL)
        job.wait()
    before = {p.name: p.stat().st_mtime_ns for p in (out / "shards").glob("part-*.parquet")}
    assert 2 <= len(before) < 12
    manifest = encode_corpus(zoo_dir, [source], out, shard_size=2, workers=2, device="cpu", resume=True)
    assert manifest["shards"] == 12 and manifest["encoded"] == len(rows)
    after = {p.name: p.stat().st_mtime_ns for p in (out / "shards").glob("part-*.parquet")}
    assert {name: after[name] for name in before} == before  # finished shards kept, not rewritten
    assert not [p for p in (out / "shards").iterdir() if not p.name.startswith("part-")]
    table = _read(out)
    assert table.column("id").to_pylist() == list(range(len(rows)))
    assert _cosines(_vectors(table), encoder.encode(rows)).min() >= 0.99999


def test_mine_equals_single_process(cluster, zoo_dir, tmp_path) -> None:
    """en x uz, exact search over 2 actors in 4 parts (two waves): the pairs, scores and texts of
    modsenc.eval.mining.mine on the same sentences."""
    src = [CORPUS["en"][i] for i in range(200, 230)]
    order = np.random.default_rng(0).permutation(30)
    tgt = [CORPUS["uz"][200 + i] for i in order][:26] + HELD_OUT["uz"]
    for name, texts, lang in (("en", src, "en"), ("uz", tgt, "uz")):
        (tmp_path / f"{name}.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
        encode_corpus(
            zoo_dir,
            [tmp_path / f"{name}.txt"],
            tmp_path / name,
            lang=lang,
            shard_size=4,
            workers=2,
            device="cpu",
            # the runtime and precision of the single-process encoder below: with openvino installed
            # and a bf16 CPU, auto picks openvino bf16 here and torch bf16 there, and near-ties flip
            runtime="torch",
            dtype="fp32",
        )
    pairs = mine_corpus(tmp_path / "en", tmp_path / "uz", tmp_path / "pairs.tsv", workers=2, part_rows=8)
    single = ModularEncoder.from_pretrained(zoo_dir, device="cpu", runtime="torch", dtype="fp32")
    expected = mine(single.encode(src, lang="en"), single.encode(tgt, lang="uz"))
    assert [(p.src, p.tgt) for p in pairs] == [(p.src, p.tgt) for p in expected]
    np.testing.assert_allclose([p.score for p in pairs], [p.score for p in expected], atol=1e-5)
    lines = (tmp_path / "pairs.tsv").read_text(encoding="utf-8").splitlines()
    assert [line.split("\t")[1:] for line in lines] == [[src[p.src], tgt[p.tgt]] for p in expected]
    assert len(lines) == len(expected) >= 2


def test_mine_synthetic_equals_single_process_and_ivf_recall(cluster, tmp_path) -> None:
    """60 sentences with a noisy translation each among 70: the exact sharded search (2 actors, 4 parts,
    7-row query chunks) gives mine()'s 60 pairs and scores; the sharded IVF path (exact_limit 0) finds
    at least 95% of them."""
    rng = np.random.default_rng(1)
    src = rng.normal(size=(60, 16)).astype(np.float32)
    perm = rng.permutation(70)
    tgt = np.concatenate([src, rng.normal(size=(10, 16)).astype(np.float32)])
    tgt = (tgt + 0.05 * rng.normal(size=tgt.shape)).astype(np.float32)[perm]
    write_embeddings(tmp_path / "src", src, [f"s{i}" for i in range(60)], shard_size=9)
    write_embeddings(tmp_path / "tgt", tgt, [f"t{j}" for j in perm], shard_size=11)
    expected = mine(src, tgt)
    truth = {(i, int(np.flatnonzero(perm == i)[0])) for i in range(60)}
    assert {(p.src, p.tgt) for p in expected} == truth
    pairs = mine_corpus(
        tmp_path / "src", tmp_path / "tgt", tmp_path / "p.tsv", workers=2, part_rows=20, chunk_rows=7
    )
    assert [(p.src, p.tgt) for p in pairs] == [(p.src, p.tgt) for p in expected]
    np.testing.assert_allclose([p.score for p in pairs], [p.score for p in expected], atol=1e-5)
    first = (tmp_path / "p.tsv").read_text().splitlines()[0].split("\t")
    assert first[1:] == [f"s{expected[0].src}", f"t{perm[expected[0].tgt]}"]
    ivf = mine_corpus(
        tmp_path / "src", tmp_path / "tgt", tmp_path / "q.tsv", workers=2, part_rows=20, exact_limit=0
    )
    assert len({(p.src, p.tgt) for p in ivf} & truth) >= 57


def test_a_bad_row_fails_the_job_in_one_line_and_the_manifest_says_why(cluster, zoo_dir, tmp_path) -> None:
    """A JSONL row without the text field, past the rows checked before the job starts: the worker's
    error is the command's one-line error (no Ray traceback), exit 1, and the manifest says failed, why."""
    source = tmp_path / "in.jsonl"
    source.write_text('{"text": "a"}\n' * 101 + '{"txt": "b"}\n', encoding="utf-8")
    before = source.read_bytes()
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main,
        ["scale", "encode", "--zoo", str(zoo_dir), "--input", str(source), "--output", str(out),
         "--shard-size", "200", "--device", "cpu"],
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and "UserCodeException" not in result.output
    expected = f"{source}, line 102: no field 'text' (--text-field); fields: txt"
    assert [line for line in result.output.splitlines() if line.startswith("Error")] == [f"Error: {expected}"]
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["status"] == "failed" and manifest["reason"] == f"DataFormatError: {expected}"
    assert not list((out / "shards").iterdir()) and source.read_bytes() == before


def test_mine_one_mixed_set_by_language_with_ids(cluster, tmp_path) -> None:
    """en, uz and kk rows interleaved in one output with --id-column values: --src-lang en --tgt-lang uz
    mines exactly what mine() gives on the en and uz vectors alone (the kk rows, near copies of the en
    ones, never paired), over parts and query chunks that cut across the languages, and writes each
    pair's ids next to its texts."""
    rng = np.random.default_rng(2)
    en = rng.normal(size=(30, 16)).astype(np.float32)
    perm = rng.permutation(34)
    uz = np.concatenate([en, rng.normal(size=(4, 16)).astype(np.float32)])
    uz = (uz + 0.05 * rng.normal(size=uz.shape)).astype(np.float32)[perm]
    kk = (en + 0.01 * rng.normal(size=en.shape)).astype(np.float32)
    rows = [("en", i) for i in range(30)] + [("uz", j) for j in range(34)] + [("kk", i) for i in range(30)]
    order = rng.permutation(len(rows))
    mixed = [rows[r] for r in order]
    vectors = np.stack([{"en": en, "uz": uz, "kk": kk}[lang][i] for lang, i in mixed])
    write_embeddings(
        tmp_path / "mixed",
        vectors,
        [f"{lang} text {i}" for lang, i in mixed],
        shard_size=9,
        lang=[lang for lang, _ in mixed],
        input_ids=[f"{lang}-{i:03d}" for lang, i in mixed],
    )
    pairs = mine_corpus(
        tmp_path / "mixed", None, tmp_path / "p.tsv", workers=2, part_rows=20, chunk_rows=7,
        src_lang="en", tgt_lang="uz",
    )  # fmt: skip
    # Positions count each language's rows in the set's order: map them back to en/uz indices.
    en_at = [i for lang, i in mixed if lang == "en"]
    uz_at = [j for lang, j in mixed if lang == "uz"]
    expected = mine(en[en_at], uz[uz_at])
    assert [(p.src, p.tgt) for p in pairs] == [(p.src, p.tgt) for p in expected]
    np.testing.assert_allclose([p.score for p in pairs], [p.score for p in expected], atol=1e-5)
    assert len(pairs) >= 28 and all(perm[uz_at[p.tgt]] == en_at[p.src] for p in pairs)  # the planted pairs
    lines = (tmp_path / "p.tsv").read_text(encoding="utf-8").splitlines()
    assert [line.split("\t")[1:] for line in lines] == [
        [
            f"en-{en_at[p.src]:03d}",
            f"uz-{uz_at[p.tgt]:03d}",
            f"en text {en_at[p.src]}",
            f"uz text {uz_at[p.tgt]}",
        ]
        for p in expected
    ]
    mine_corpus(tmp_path / "mixed", None, tmp_path / "q.tsv", src_lang="en", tgt_lang="uz", ids=False)
    first = (tmp_path / "q.tsv").read_text(encoding="utf-8").splitlines()[0].split("\t")
    assert first[1:] == [f"en text {en_at[expected[0].src]}", f"uz text {uz_at[expected[0].tgt]}"]


def _cli(*args: str) -> subprocess.CompletedProcess:
    """``modsenc ARGS`` in a fresh process (Ray's own output reaches the terminal, as it does a user's),
    starting its own local Ray: what a user's `modsenc -q scale ...` prints, stdout and stderr."""
    env = os.environ | {"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-c", "from modsenc.cli import main; main()", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)


def test_quiet_encode_keeps_ids_and_mines_a_mixed_set(zoo_dir, encoder, tmp_path) -> None:
    """`modsenc -q scale encode --lang-field --id-column` then `modsenc -q scale mine OUT --src-lang en
    --tgt-lang uz`: each prints its one summary line, no Ray warning (token auth, deprecation, Ray
    Data's progress notes); the pairs are mine()'s on the en and uz rows, written with their ids."""
    en = [CORPUS["en"][i] for i in range(260, 272)]
    uz = [CORPUS["uz"][i] for i in range(260, 272)][::-1]
    kk = [CORPUS["kk"][i] for i in range(260, 264)]
    records = [{"doc": f"e{i}", "text": t, "lang": "en"} for i, t in enumerate(en)]
    records += [{"doc": 100 + j, "text": t, "lang": "uz"} for j, t in enumerate(uz)]  # integer ids
    records += [{"doc": f"k{i}", "text": t, "lang": "kk"} for i, t in enumerate(kk)]
    records = [records[i] for i in np.random.default_rng(3).permutation(len(records))]
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    out, pairs_file = tmp_path / "out", tmp_path / "pairs.tsv"
    encoded = _cli(
        "-q", "scale", "encode", "--zoo", str(zoo_dir), "--input", str(source), "--output", str(out),
        "--lang-field", "lang", "--id-column", "doc", "--shard-size", "10", "--device", "cpu",
    )  # fmt: skip
    mined = _cli(
        "-q", "scale", "mine", str(out), "--src-lang", "en", "--tgt-lang", "uz", "--output", str(pairs_file)
    )  # fmt: skip
    for done, summary in ((encoded, "28 rows encoded to"), (mined, "pairs written to")):
        assert done.returncode == 0, done.stderr
        printed = (done.stdout + done.stderr).splitlines()
        assert "RayDeprecationWarning" not in done.stderr and not [
            line for line in printed if "WARNING" in line
        ]
        # Ray's C++ core prints an error-level note on actors with restarts (ray-project/ray#53727) that
        # no Ray setting silences; anything else is modsenc's one summary line.
        others = [line for line in printed if "core_worker.cc" not in line]
        assert len(others) == 1 and summary in others[0], printed
    table = _read(out)
    assert table.column("input_id").to_pylist() == [str(r["doc"]) for r in records]
    en_rows = [r for r in records if r["lang"] == "en"]
    uz_rows = [r for r in records if r["lang"] == "uz"]
    expected = mine(
        encoder.encode([r["text"] for r in en_rows], lang="en"),
        encoder.encode([r["text"] for r in uz_rows], lang="uz"),
    )
    lines = pairs_file.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(expected) >= 2  # the tiny test zoo pairs few with confidence
    assert [line.split("\t")[1:] for line in lines] == [
        [
            str(en_rows[p.src]["doc"]),
            str(uz_rows[p.tgt]["doc"]),
            en_rows[p.src]["text"],
            uz_rows[p.tgt]["text"],
        ]
        for p in expected
    ]
    np.testing.assert_allclose(
        [float(line.split("\t")[0]) for line in lines], [p.score for p in expected], atol=1e-5
    )
