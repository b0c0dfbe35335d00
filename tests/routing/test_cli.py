"""modsenc encode / zoo list / zoo info / export from the command line."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from modsenc.cli import main
from modsenc.encoder import ModularEncoder
from tests._zoo import HELD_OUT

pytestmark = pytest.mark.slow


def test_encode_to_npy_and_jsonl_in_chunks(zoo_dir, tmp_path) -> None:
    lines = [HELD_OUT["uz"][0], HELD_OUT["en"][0], "", HELD_OUT["kk"][0], HELD_OUT["uz"][1]]
    source = tmp_path / "in.txt"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    runner = CliRunner()
    npy = tmp_path / "out.npy"
    result = runner.invoke(
        main,
        [
            "encode",
            "--zoo",
            str(zoo_dir),
            "--input",
            str(source),
            "--output",
            str(npy),
            "--chunk-size",
            "2",
            "--runtime",
            "torch",
        ],
    )
    assert result.exit_code == 0, result.output
    expected = ModularEncoder.from_pretrained(zoo_dir, device="cpu", runtime="torch").encode(lines)
    np.testing.assert_allclose(np.load(npy), expected, atol=1e-5)

    jsonl = tmp_path / "out.jsonl"
    result = runner.invoke(
        main,
        ["encode", "--zoo", str(zoo_dir), "--output", str(jsonl), "--lang", "uz", "--mode", "mono"],
        input="\n".join(lines[:2]) + "\n",
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in jsonl.read_text(encoding="utf-8").splitlines()]
    assert [r["text"] for r in rows] == lines[:2] and [r["lang"] for r in rows] == ["uz", "uz"]
    assert len(rows[0]["embedding"]) == 32


def test_encode_follows_the_mode_asked_for(zoo_dir, tmp_path) -> None:
    """uz has a CLA, so --mode mono (without it) and --mode cross (with it) give other vectors; each
    output, .jsonl or .npy, holds the vectors of the mode asked for (cross when none is given)."""
    texts = HELD_OUT["uz"]
    encoder = ModularEncoder.from_pretrained(zoo_dir, device="cpu", runtime="torch")
    expected = {mode: encoder.encode(texts, lang="uz", mode=mode) for mode in ("mono", "cross")}
    assert np.abs(expected["mono"] - expected["cross"]).max() > 1e-2
    runner = CliRunner()
    stdin = "\n".join(texts) + "\n"
    base = ["encode", "--zoo", str(zoo_dir), "--lang", "uz", "--runtime", "torch"]
    for mode, other in (("mono", "cross"), ("cross", "mono"), (None, "mono")):
        flags = ["--mode", mode] if mode else []
        jsonl, npy = tmp_path / f"{mode}.jsonl", tmp_path / f"{mode}.npy"
        result = runner.invoke(main, [*base, *flags, "--output", str(jsonl)], input=stdin)
        assert result.exit_code == 0, result.output
        rows = [json.loads(line) for line in jsonl.read_text(encoding="utf-8").splitlines()]
        assert [r["text"] for r in rows] == texts and {r["lang"] for r in rows} == {"uz"}
        got = np.array([r["embedding"] for r in rows])
        result = runner.invoke(main, [*base, *flags, "--output", str(npy)], input=stdin)
        assert result.exit_code == 0, result.output
        for vectors in (got, np.load(npy)):
            np.testing.assert_allclose(vectors, expected[mode or "cross"], atol=1e-5)
            assert np.abs(vectors - expected[other]).max() > 1e-2
    # --normalize: the same directions at unit length.
    normalized = [*base, "--mode", "mono", "--normalize", "--output", str(npy), "--overwrite"]
    result = runner.invoke(main, normalized, input=stdin)
    assert result.exit_code == 0, result.output
    unit = expected["mono"] / np.linalg.norm(expected["mono"], axis=1, keepdims=True)
    np.testing.assert_allclose(np.load(npy), unit, atol=1e-5)


def test_encode_errors_name_the_problem(zoo_dir, tmp_path) -> None:
    runner = CliRunner()
    result = runner.invoke(
        main,
        [
            "encode",
            "--zoo",
            str(zoo_dir),
            "--input",
            str(tmp_path / "none.txt"),
            "--output",
            str(tmp_path / "o.npy"),
        ],
    )
    assert result.exit_code == 1 and "none.txt: no such input file" in result.output
    result = runner.invoke(
        main, ["encode", "--zoo", str(zoo_dir), "--output", str(tmp_path / "o.csv")], input="x\n"
    )
    assert result.exit_code == 1 and "must end in .npy or .jsonl" in result.output
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine\n\xff\xfe broken\n")
    result = runner.invoke(
        main, ["encode", "--zoo", str(zoo_dir), "--input", str(bad), "--output", str(tmp_path / "o.npy")]
    )
    assert result.exit_code == 1 and "bad.txt, line 2: not valid UTF-8" in result.output
    assert not (tmp_path / "o.npy").exists() and not list(tmp_path.glob(".o.npy*"))


def test_zoo_list_info_and_export(zoo_dir, tmp_path) -> None:
    runner = CliRunner()
    result = runner.invoke(main, ["zoo", "list", "--zoo", str(zoo_dir)])
    assert result.exit_code == 0
    rows = {line.split()[0]: line.split() for line in result.output.splitlines()[1:-1]}
    assert sorted(rows) == ["de", "en", "kk", "uz"]
    assert (
        rows["uz"][1:4] == ["Latn", "no", "vocab,la,se,cla"]
        and rows["kk"][1] == "Cyrl"
        and rows["en"][2] == "yes"
    )
    result = runner.invoke(main, ["zoo", "info", "uz", "--zoo", str(zoo_dir)])
    assert result.exit_code == 0 and "stages: vocab, la, se, cla (CLA variant jt)" in result.output
    assert "% of backbone" in result.output and "after cla:" in result.output
    result = runner.invoke(main, ["zoo", "info", "fr", "--zoo", str(zoo_dir)])
    assert result.exit_code == 1 and "no bundle for 'fr'" in result.output
    result = runner.invoke(
        main, ["export", "--zoo", str(zoo_dir), "--lang", "kk", "--output", str(tmp_path / "kk")]
    )
    assert result.exit_code == 0, result.output  # a ReLU CLA exports as scaled GELU neurons
    result = runner.invoke(
        main,
        ["export", "--zoo", str(zoo_dir), "--lang", "kk", "--mode", "mono", "--output", str(tmp_path / "m")],
    )
    assert result.exit_code == 0 and (tmp_path / "m" / "modules.json").exists()


def test_encode_reports_each_lines_route_and_other_refuse_names_the_line(zoo_dir, tmp_path) -> None:
    """A Russian line (no ru bundle in the test zoo) goes to the backbone, and the JSONL says so;
    with --other refuse the command stops naming the sentence and its language, writing nothing."""
    lines = [HELD_OUT["uz"][0], "Я вчера купил новый телефон в магазине."]
    source = tmp_path / "in.txt"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    runner = CliRunner()
    jsonl = tmp_path / "out.jsonl"
    result = runner.invoke(
        main, ["encode", "--zoo", str(zoo_dir), "--input", str(source), "--output", str(jsonl)]
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in jsonl.read_text(encoding="utf-8").splitlines()]
    assert [(r["lang"], r["route"]) for r in rows] == [("uz", "bundle"), ("ru", "backbone")]
    # why, beside the route (issue 48): what the router detected, how surely, whether unsure
    assert [(r["detected"], r["unsure"]) for r in rows] == [("uz", False), ("ru", False)]
    assert all(0.5 <= r["confidence"] <= 1.0 for r in rows)
    refused = tmp_path / "refused.jsonl"
    result = runner.invoke(
        main,
        [
            "encode",
            "--zoo",
            str(zoo_dir),
            "--input",
            str(source),
            "--output",
            str(refused),
            "--other",
            "refuse",
        ],
    )
    assert result.exit_code == 1
    assert f"{source}: line 2: detected language 'ru' is not installed" in result.output
    assert not refused.exists()
