"""``ModularEncoder``'s precision: ``auto`` follows the CPU (detection mocked), and its bf16 and int8
paths stay at cosine >= 0.99 to fp32 on a two-language zoo (en, uz), on a mixed batch."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

from modsenc.data.demo import demo_path
from modsenc.data.readers import read_parallel_tsv
from modsenc.encoder import ModularEncoder
from modsenc.eval.sts import row_cosines
from tests._zoo import HELD_OUT

pytestmark = pytest.mark.slow

LANGUAGES = ["en", "uz"]


@pytest.fixture(scope="module")
def texts() -> tuple[list[str], list[str]]:
    """en and uz sentences interleaved (held-out ones and 14 demo rows each), with their codes."""
    columns = read_parallel_tsv(demo_path("parallel.tsv")).columns
    texts, langs = [], []
    for lang in LANGUAGES:
        rows = HELD_OUT[lang] + [t for t in columns[lang] if t][:14]
        texts += rows
        langs += [lang] * len(rows)
    order = np.random.default_rng(0).permutation(len(texts))
    return [texts[i] for i in order], [langs[i] for i in order]


@pytest.fixture(scope="module")
def two_zoo(zoo_dir, tmp_path_factory) -> Path:
    """The session zoo cut down to its backbone, en (the pivot) and uz."""
    zoo = tmp_path_factory.mktemp("two_languages") / "zoo"
    for name in ("backbone", *LANGUAGES):
        shutil.copytree(zoo_dir / name, zoo / name)
    index = json.loads((zoo_dir / "index.json").read_text(encoding="utf-8"))
    index["languages"] = {lang: index["languages"][lang] for lang in LANGUAGES}
    (zoo / "index.json").write_text(json.dumps(index), encoding="utf-8")
    return zoo


@pytest.fixture(scope="module")
def reference(two_zoo, texts) -> dict[str, np.ndarray]:
    """Vectors of the mixed batch in fp32 and bf16, both modes, languages given."""
    out = {}
    for dtype in ("fp32", "bf16"):
        encoder = ModularEncoder.from_pretrained(
            two_zoo, device="cpu", languages=LANGUAGES, dtype=dtype, runtime="torch"
        )
        assert encoder.precision == dtype
        for mode in ("cross", "mono"):
            out[f"{dtype}-{mode}"] = encoder.encode(texts[0], lang=texts[1], mode=mode)
    return out


@pytest.mark.parametrize(("native", "expected"), [(True, "bf16"), (False, "fp32")])
def test_auto_encodes_in_bf16_only_on_a_cpu_with_native_bf16(
    two_zoo, texts, reference, cpu_reports_bf16, caplog, native, expected
) -> None:
    cpu_reports_bf16(native)
    with caplog.at_level(logging.INFO, logger="modsenc.encoder"):
        encoder = ModularEncoder.from_pretrained(
            two_zoo, device="cpu", languages=LANGUAGES, runtime="torch"
        )  # dtype auto
    assert encoder.precision == expected
    assert f"encoding in {expected} (asked: auto) on cpu with torch" in caplog.messages
    # The choice acts: the routed vectors are exactly those of the explicit dtype.
    vectors, routed = encoder.encode(texts[0], return_languages=True)
    assert routed == texts[1]  # every sentence went to its own language's modules
    np.testing.assert_array_equal(vectors, reference[f"{expected}-cross"])


def test_bf16_vectors_stay_close_to_fp32(reference) -> None:
    for mode in ("cross", "mono"):
        fp32, bf16 = reference[f"fp32-{mode}"], reference[f"bf16-{mode}"]
        assert not np.array_equal(fp32, bf16)  # the GEMMs did run in bf16
        assert bf16.dtype == np.float32 and np.isfinite(bf16).all()
        assert row_cosines(fp32, bf16).min() >= 0.99, mode


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_int8_vectors_stay_close_to_fp32(two_zoo, texts, reference, dtype) -> None:
    """int8 linears (torchao, dynamic activations), with fp32 or bf16 for the rest of the model."""
    pytest.importorskip("torchao")
    encoder = ModularEncoder.from_pretrained(
        two_zoo, device="cpu", languages=LANGUAGES, quantize="int8", dtype=dtype, runtime="torch"
    )
    assert (encoder.quantization, encoder.precision) == ("int8", dtype)
    for mode in ("cross", "mono"):
        int8 = encoder.encode(texts[0], lang=texts[1], mode=mode)
        assert not np.array_equal(int8, reference[f"fp32-{mode}"])
        assert row_cosines(reference[f"fp32-{mode}"], int8).min() >= 0.99, mode
