"""export: a standalone sentence-transformers model with the modules merged, same embeddings."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch
from sentence_transformers import SentenceTransformer

from modsenc.encoder import ModularEncoder
from modsenc.modules.export import export_sentence_transformer
from modsenc.modules.modular import ModularBackbone
from modsenc.utils.outputs import OutputError
from tests._zoo import HELD_OUT

pytestmark = pytest.mark.slow

TEXTS = HELD_OUT["uz"] + ["Salom", "Bugun havo juda issiq va quyoshli, biz parkka boramiz."]


@pytest.mark.parametrize(("lang", "mode"), [("uz", "cross"), ("uz", "mono"), ("kk", "mono"), ("en", "cross")])
def test_export_round_trip(zoo_dir, tmp_path, lang, mode) -> None:
    out = export_sentence_transformer(zoo_dir, lang, tmp_path / "model", mode=mode)
    assert (out / "modules.json").exists() and (out / "model.safetensors").exists()
    assert not list(out.rglob("*.bin"))
    st = SentenceTransformer(str(out), device="cpu")
    expected = ModularEncoder.from_pretrained(zoo_dir, device="cpu", dtype="fp32", runtime="torch").encode(
        TEXTS, lang=lang, mode=mode
    )
    np.testing.assert_allclose(st.encode(TEXTS), expected, atol=1e-5)


def test_a_relu_cla_exports_to_the_zoos_cross_lingual_vectors(zoo_dir, tmp_path) -> None:
    """kk's CLA keeps adapters' default ReLU beside the GELU FFN: merged as scaled GELU neurons."""
    out = export_sentence_transformer(zoo_dir, "kk", tmp_path / "model", mode="cross")
    texts = HELD_OUT["kk"]
    exported = SentenceTransformer(str(out), device="cpu").encode(texts, normalize_embeddings=True)
    zoo = ModularEncoder.from_pretrained(zoo_dir, device="cpu", dtype="fp32", runtime="torch")
    expected = zoo.encode(texts, lang="kk", mode="cross", normalize_embeddings=True)
    assert (exported * expected).sum(axis=1).min() > 0.9999


def test_adapters_itself_does_not_merge_a_bottleneck(zoo_dir) -> None:
    """Why export.py folds the CLA into the FFN itself: adapters' merge_adapter leaves it unmerged."""
    from modsenc.backbone import Backbone  # noqa: PLC0415
    from modsenc.modules.bundle import Zoo  # noqa: PLC0415

    zoo = Zoo(zoo_dir)
    modular = ModularBackbone(Backbone.from_pretrained(zoo.backbone_dir, attention="sdpa")).eval()
    modular.load_bundle(zoo.bundle_dir("uz"), "uz", kinds=["cla"])
    with_cla = modular.encode(TEXTS, "uz", ["cla"], convert_to_tensor=True)
    with contextlib.suppress(
        ValueError, NotImplementedError, AttributeError
    ):  # refusing: cannot merge either
        modular.backbone.model.merge_adapter("uz_cla")
    modular.select(None)
    modular.backbone.model.set_active_adapters(None)
    without = modular.backbone.encode(TEXTS, convert_to_tensor=True)
    assert (with_cla - without).abs().max() > 1e-3 and not torch.equal(with_cla, without)


def test_export_keeps_mean_pooling_and_the_prefix(tiny_backbone_dir, tmp_path) -> None:
    """An e5-style backbone (mean pooling, "query: " prefix): the export pools and prompts the same way."""
    import json  # noqa: PLC0415

    from modsenc.backbone import Backbone  # noqa: PLC0415
    from modsenc.training.add_language import run  # noqa: PLC0415
    from tests._zoo import fast_recipe  # noqa: PLC0415

    backbone = Backbone.from_pretrained(tiny_backbone_dir, attention="sdpa", pooling="mean", prefix="query: ")
    mean_dir = backbone.save_pretrained(tmp_path / "mean-backbone")
    zoo = tmp_path / "zoo"
    run("en", fast_recipe(), zoo, backbone_dir=mean_dir, work_dir=tmp_path / "w-en")
    run(
        "uz",
        fast_recipe(**{"cla.adapter": "{non_linearity: gelu}"}),
        zoo,
        work_dir=tmp_path / "w-uz",
        stages=["se", "cla"],
    )
    out = export_sentence_transformer(zoo, "uz", tmp_path / "model", mode="cross")
    pooling = json.loads((out / "1_Pooling" / "config.json").read_text())
    assert pooling["pooling_mode"] == "mean" and pooling["include_prompt"] is True
    st = SentenceTransformer(str(out), device="cpu")
    # the prefix is the default prompt, named "" so that loading logs nothing (export.DEFAULT_PROMPT_NAME)
    assert st.default_prompt_name == "" and st.prompts[""] == st.prompts["query"] == "query: "
    expected = ModularEncoder.from_pretrained(zoo, device="cpu", dtype="fp32", runtime="torch").encode(
        TEXTS, lang="uz"
    )
    np.testing.assert_allclose(st.encode(TEXTS), expected, atol=1e-5)
    # the prefix and the pooling both matter: without the prompt the vectors differ
    assert np.abs(st.encode(TEXTS, prompt="") - expected).max() > 1e-3


def test_export_marker_model_card_truncation_and_replacing_an_earlier_export(zoo_dir, tmp_path) -> None:
    import json  # noqa: PLC0415

    from modsenc.backbone import Backbone  # noqa: PLC0415
    from modsenc.modules.bundle import Zoo  # noqa: PLC0415

    out = export_sentence_transformer(zoo_dir, "kk", tmp_path / "model", mode="mono")
    marker = json.loads((out / "modsenc_export.json").read_text())
    written = marker.pop("file_sha256")  # every file the export wrote, for --overwrite's ownership check
    assert {"README.md", "config.json", "modules.json"} <= set(written)
    assert all(len(digest) == 64 for digest in written.values())
    assert marker == {
        "format": "modsenc-export/1",
        "language": "kk",
        "mode": "mono",
        "modules": ["la", "vocab"],
        "backbone_fingerprint": Zoo(zoo_dir).backbone_fingerprint(),
    }
    card = (out / "README.md").read_text()  # the model card (tests/test_python_api.py checks more)
    assert "language:\n- kk\n" in card and "mode `mono`" in card and "modules la, vocab merged" in card
    # Texts longer than the backbone's max_length are cut where modsenc cuts them.
    st = SentenceTransformer(str(out), device="cpu")
    assert st.max_seq_length == Backbone.from_pretrained(Zoo(zoo_dir).backbone_dir).max_length
    long_text = [" ".join(HELD_OUT["kk"] * 40)]
    expected = ModularEncoder.from_pretrained(zoo_dir, device="cpu", dtype="fp32", runtime="torch").encode(
        long_text, lang="kk", mode="mono"
    )
    np.testing.assert_allclose(st.encode(long_text), expected, atol=1e-5)
    # The folder holds an export (its marker): a later export replaces it, when asked to.
    with pytest.raises(OutputError, match="holds an earlier modsenc output"):
        export_sentence_transformer(zoo_dir, "uz", out, mode="mono")
    export_sentence_transformer(zoo_dir, "uz", out, mode="mono", overwrite=True)
    assert json.loads((out / "modsenc_export.json").read_text())["language"] == "uz"


def _big_vocab_xlmr(folder) -> tuple:
    """A tiny XLM-R model with a 100,010-piece Unigram tokenizer: transformers 4.57.6 runs its
    Mistral regex check only on tokenizers over 100K pieces, as e5's (250K)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers  # noqa: PLC0415
    from transformers import XLMRobertaConfig, XLMRobertaModel, XLMRobertaTokenizerFast  # noqa: PLC0415

    specials = ["<s>", "<pad>", "</s>", "<unk>"]
    pieces = [(p, 0.0) for p in specials] + [(c, -5.0) for c in "▁abcdefghijklmnopqrstuvwxyz"]
    pieces += [(f"▁w{i}", -10.0) for i in range(100_010 - len(pieces) - 1)] + [("<mask>", 0.0)]
    backend = Tokenizer(models.Unigram(pieces, unk_id=3))
    backend.pre_tokenizer = pre_tokenizers.Metaspace()
    backend.decoder = decoders.Metaspace()
    tokenizer = XLMRobertaTokenizerFast(tokenizer_object=backend)
    config = XLMRobertaConfig(
        vocab_size=len(pieces),
        hidden_size=8,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=16,
        max_position_embeddings=40,
    )
    return XLMRobertaModel(config).eval(), tokenizer


def test_an_export_loads_without_the_mistral_regex_warning(tmp_path, caplog) -> None:
    from types import SimpleNamespace  # noqa: PLC0415

    from transformers import AutoTokenizer  # noqa: PLC0415

    from modsenc.modules.export import _save_sentence_transformer  # noqa: PLC0415

    plain, tokenizer = _big_vocab_xlmr(tmp_path)
    # Without the flag, transformers 4.57.6 warns on its own save of this tokenizer: the check the
    # export answers is real (if a later transformers drops it, this line says so).
    plain.config.save_pretrained(tmp_path / "raw")
    tokenizer.save_pretrained(tmp_path / "raw")
    caplog.clear()
    AutoTokenizer.from_pretrained(tmp_path / "raw")
    assert "incorrect regex pattern" in caplog.text

    backbone = SimpleNamespace(max_length=16, pooling="mean", prefix="query: ")
    (tmp_path / "model").mkdir()
    _save_sentence_transformer(tmp_path / "model", plain, tokenizer, backbone, "tiny")
    caplog.clear()
    st = SentenceTransformer(str(tmp_path / "model"), device="cpu")
    assert "regex" not in caplog.text
    # the tokenizer is the one saved: same ids as the original (the prompt "query: " included)
    ids = st.tokenize(["query: abc w7"])["input_ids"][0].tolist()
    assert ids == tokenizer("query: abc w7")["input_ids"]
