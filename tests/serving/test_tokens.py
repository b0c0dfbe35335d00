"""text-embeddings-inference's ``/tokenize``, ``/decode`` and ``/embed_all`` on a zoo whose languages
have tokenizers of their own (issue 51)."""

from __future__ import annotations

import numpy as np
import pytest

from modsenc.encoder import ModularEncoder
from tests._zoo import HELD_OUT
from tests.serving.conftest import assert_api_error
from tests.serving.test_server import serving

pytestmark = pytest.mark.slow

TEXTS = [HELD_OUT["uz"][0], HELD_OUT["en"][0], HELD_OUT["kk"][0]]
LANGS = ["uz", "en", "kk"]


@pytest.fixture(scope="module")
def reference(zoo_dir) -> ModularEncoder:
    return ModularEncoder.from_pretrained(zoo_dir, device="cpu", runtime="torch")


@pytest.fixture(scope="module")
def client(zoo_dir):
    with serving(zoo_dir) as client:
        yield client


def test_tokenize_gives_the_ids_each_text_is_encoded_with_in_teis_shape(client, reference) -> None:
    response = client.post("/tokenize", json={"inputs": TEXTS, "lang": LANGS})
    assert response.status_code == 200, response.text
    assert response.headers["x-modsenc-languages"] == "uz,en,kk"
    tokens = response.json()
    for text, lang, row in zip(TEXTS, LANGS, tokens):
        assert [t["id"] for t in row] == reference.tokenize([text], lang).ids[0]  # what encode runs on
        assert all(set(t) == {"id", "text", "special", "start", "stop"} for t in row)
        assert [t["special"] for t in row] == [True] + [False] * (len(row) - 2) + [True]
        tokenizer = reference.tokenizer_for(lang)
        assert [t["text"] for t in row[1:-1]] == [tokenizer.decode([t["id"]]) for t in row[1:-1]]
    # kk tokenises with its own vocabulary: other ids than the backbone's for the same text
    backbone = client.post("/tokenize", json={"inputs": TEXTS[2], "lang": "backbone"}).json()[0]
    assert [t["id"] for t in backbone] != [t["id"] for t in tokens[2]]
    bare = client.post("/tokenize", json={"inputs": TEXTS[0], "lang": "uz", "add_special_tokens": False})
    assert bare.json() == [tokens[0][1:-1]]
    auto = client.post("/tokenize", json={"inputs": TEXTS})  # each text's detected language
    detected = [d.bundle or "backbone" for d in reference.detect_languages(TEXTS)]
    assert auto.headers["x-modsenc-languages"] == ",".join(detected)


def test_decode_turns_a_languages_ids_back_into_text(client, reference) -> None:
    ids = reference.tokenize([TEXTS[2]], "kk").ids[0]
    tokenizer = reference.tokenizer_for("kk")
    decoded = client.post("/decode", json={"ids": ids, "lang": "kk"})
    assert decoded.status_code == 200, decoded.text
    assert decoded.json() == [tokenizer.decode(ids, skip_special_tokens=True)]
    both = client.post("/decode", json={"ids": [ids, ids[:3]], "lang": "kk", "skip_special_tokens": False})
    assert both.json() == [tokenizer.decode(ids), tokenizer.decode(ids[:3])]
    backbone_ids = reference.tokenize([TEXTS[1]], "en").ids[0]
    assert client.post("/decode", json={"ids": backbone_ids}).json() == [
        reference.tokenizer.decode(backbone_ids, skip_special_tokens=True)
    ]


BAD = [
    (
        "/decode",
        {"ids": [5, 10**6], "lang": "kk"},
        400,
        "invalid_input",
        "ids[0]: token id 1000000 is not in kk's",
    ),
    ("/decode", {"ids": [-1]}, 400, "invalid_input", "token id -1 is not in the backbone's tokenizer"),
    ("/decode", {"ids": [5], "lang": "fr"}, 400, "unknown_language", "'fr' is not installed"),
    ("/decode", {"ids": ["a"]}, 422, "invalid_request", "ids"),
    ("/tokenize", {"inputs": []}, 400, "empty_input", "inputs is an empty list"),
    ("/tokenize", {"inputs": "a", "prompt_name": "web"}, 400, "invalid_prompt_name", "'web' is not one"),
    ("/tokenize", {"inputs": "a", "lang": "fr"}, 400, "unknown_language", "'fr' is not installed"),
    ("/embed_all", {"inputs": "a b " * 100, "lang": "uz"}, 413, "input_too_long", "inputs[0] has more than"),
    ("/embed_all", {"inputs": ["a", 3]}, 400, "invalid_input", "inputs[1] is int"),
]


def test_embed_all_gives_each_tokens_vector_as_encode_does(client, reference) -> None:
    response = client.post("/embed_all", json={"inputs": TEXTS, "lang": LANGS})
    assert response.status_code == 200, response.text
    assert response.headers["x-modsenc-languages"] == "uz,en,kk"
    expected = reference.encode(TEXTS, lang=LANGS, output_value="token_embeddings")
    assert len(response.json()) == len(TEXTS)
    for served, matrix in zip(response.json(), expected):
        np.testing.assert_allclose(served, matrix.numpy(), atol=1e-5)
    long = client.post("/embed_all", json={"inputs": "a b " * 100, "lang": "uz", "truncate": True})
    assert long.status_code == 200 and len(long.json()[0]) == reference.max_seq_length


@pytest.mark.parametrize(("path", "body", "status", "code", "words"), BAD)
def test_bad_token_requests_are_refused_in_one_line(client, path, body, status, code, words) -> None:
    assert_api_error(client.post(path, json=body), path, status, code, words)
