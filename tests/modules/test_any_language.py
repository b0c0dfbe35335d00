"""add-language for a language nobody tuned for: the default recipe's shared files, ISO 639-3 codes."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from modsenc.data.demo import demo_path
from modsenc.data.language_data import load_language_data
from modsenc.data.readers import read_parallel_tsv
from modsenc.encoder import ModularEncoder
from modsenc.modules.bundle import Zoo
from modsenc.serving.app import ServeConfig, create_app
from modsenc.training.add_language import run
from modsenc.training.configs import AddLanguageRecipe
from modsenc.training.recipe import load_recipe
from tests._zoo import fast_recipe

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
TINY_BUDGET = {
    "se.epochs": "null",
    "se.max_steps": "2",
    "se.batch_size": "8",
    "cla.epochs": "null",
    "cla.max_steps": "2",
    "cla.batch_size": "8",
    "cla.eval_every": "1",
    "dev.sts": "[]",
    "training.checkpoint_every": "1",
}


def _e5_recipe(**extra: str) -> AddLanguageRecipe:
    overrides = TINY_BUDGET | extra
    return load_recipe(
        "add-language-e5", [f"{k}={v}" for k, v in overrides.items()], schema=AddLanguageRecipe
    )


@pytest.mark.skipif(not SHARED.is_dir(), reason="needs ../shared/data (the Kardeş files)")
def test_add_language_ky_with_the_default_recipe_reads_the_shared_files_ky_columns(
    tiny_backbone_dir, tmp_path
) -> None:
    """No ky entry in add-language-e5: its SE and CLA train on the ky rows and column of the
    Kardeş files the recipe lists for every language; files without ky count 0."""
    recipe = _e5_recipe()
    assert "ky" not in recipe.data.per_language
    zoo = tmp_path / "zoo"
    run("en", recipe, zoo, backbone_dir=tiny_backbone_dir, work_dir=tmp_path / "w-en")
    run("ky", recipe, zoo, work_dir=tmp_path / "w-ky")
    manifest = Zoo(zoo).read_manifest("ky")
    assert manifest.stages == ["se", "cla"] and sorted(manifest.modules) == ["cla", "se"]
    assert manifest.script == "Cyrl"
    counts = {
        kind: {Path(r["path"]).name: r["count"] for r in files}
        for kind, files in manifest.data["files"].items()
    }
    # kardes-xnli.tsv: 1,007 ky paraphrase rows, of which the last 100 pair ids are dev; minus the
    # rows holding a sentence of the 300 held-out translations
    assert counts["paraphrase"]["stsb-mt.tsv"] == 0 and counts["paraphrase"]["kardes-xnli.tsv"] == 1007
    assert counts["parallel"]["kardes-xnli.tsv"] > 4000
    assert counts["parallel"]["stsb-mt.train.tsv"] == 0 and counts["parallel"]["multi30k.tsv"] == 0
    data = load_language_data("ky", "en", recipe.data, recipe.recipe_path)
    assert len(data.dev_parallel) == 300 and len(data.dev_paraphrases) == 100
    # transfer pairs come from the Kardeş file only (the file holding ky), not from stsb-mt's languages
    assert {p.lang for p in data.other_paraphrases} == {"en", "uz", "kk", "az", "ug"}


@pytest.mark.skipif(not SHARED.is_dir(), reason="needs ../shared/data (the Kardeş files)")
def test_a_language_without_data_gets_one_line_saying_what_to_pass(tiny_backbone_dir, tmp_path) -> None:
    recipe = _e5_recipe()
    zoo = tmp_path / "zoo"
    run("en", recipe, zoo, backbone_dir=tiny_backbone_dir, work_dir=tmp_path / "w-en")
    with pytest.raises(ValueError) as caught:
        run("kaa", recipe, zoo, work_dir=tmp_path / "w-kaa")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(
        "stage se needs kaa paraphrase data and none of kardes-xnli.tsv, stsb-mt.tsv has any"
    )
    assert "pass --paraphrase FILE, --data DIR" in message and "modsenc synthesize" in message
    assert "(add-language-e5's data has no kaa rows at all: kaa needs files of its own)" in message
    with pytest.raises(
        ValueError,
        match=r"cla variant pl needs en-kaa parallel pairs and none of "
        r"kardes-xnli.tsv, stsb-mt.train.tsv, multi30k.tsv has any \(add-language-e5's data has no "
        r"kaa rows at all: kaa needs files of its own\): pass --parallel FILE",
    ):
        run("kaa", recipe, zoo, work_dir=tmp_path / "w-kaa2", stages=["cla"])


def _karakalpak_files(tmp_path: Path) -> tuple[Path, Path]:
    """Stand-in Karakalpak (ISO 639-3 ``kaa``, no 639-1 code) data: the demo corpus's Uzbek text
    under the kaa code, as paraphrase pairs and as a parallel file with English."""
    corpus = read_parallel_tsv(demo_path("parallel.tsv"))
    en, uz = corpus.columns["en"][:200], corpus.columns["uz"][:200]
    parallel = tmp_path / "kaa-parallel.tsv"
    parallel.write_text("en\tkaa\n" + "".join(f"{a}\t{b}\n" for a, b in zip(en, uz)), encoding="utf-8")
    paraphrase = tmp_path / "kaa-paraphrase.tsv"
    rows = [f"kaa-{i}\tkaa\t{uz[i]}\t{uz[i + 1]}\t\n" for i in range(0, 120, 2)]
    paraphrase.write_text("pair_id\tlang\tanchor\tpositive\tnegative\n" + "".join(rows), encoding="utf-8")
    return paraphrase, parallel


def test_an_iso_639_3_code_round_trips_through_add_language_encode_and_the_server(
    tiny_backbone_dir, tmp_path
) -> None:
    paraphrase, parallel = _karakalpak_files(tmp_path)
    zoo = tmp_path / "zoo"
    run("en", fast_recipe(), zoo, backbone_dir=tiny_backbone_dir, work_dir=tmp_path / "w-en", stages=["se"])
    recipe = fast_recipe(
        **{"data.paraphrase": f"[{paraphrase}]", "data.parallel": f"[{parallel}]", "cla.variant": "pl"}
    )
    run("kaa", recipe, zoo, work_dir=tmp_path / "w-kaa", stages=["se", "cla"])
    assert Zoo(zoo).languages() == ["en", "kaa"]
    assert (zoo / "kaa" / "se").is_dir() and Zoo(zoo).read_manifest("kaa").language == "kaa"
    encoder = ModularEncoder.from_pretrained(zoo, device="cpu", gate=None, runtime="torch")
    text = ["Men kitob o'qiyman."]
    mine = encoder.encode(text, lang="kaa")
    bare = encoder.encode(text, lang="backbone")
    assert mine.shape == bare.shape and not np.allclose(mine, bare)  # kaa's modules were applied
    with TestClient(create_app(ServeConfig(str(zoo), device="cpu", runtime="torch"))) as client:
        deadline = time.monotonic() + 60
        while client.get("/health").status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        response = client.post("/v1/embeddings", json={"input": text, "lang": "kaa"})
        assert response.status_code == 200, response.text
        assert response.json()["data"][0]["lang"] == "kaa"
        unit = mine[0] / np.linalg.norm(mine[0])  # the server's vectors are normalised (OpenAI's)
        np.testing.assert_allclose(response.json()["data"][0]["embedding"], unit, atol=1e-5)
        bad = client.post("/v1/embeddings", json={"input": text, "lang": "kaa-latn"})
        assert bad.status_code in (400, 422) and "language code" in bad.text
