"""The HTTP server in-process (FastAPI's TestClient, lifespan included) on the small test zoo."""

from __future__ import annotations

import base64
import json
import logging
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np
import pytest
from fastapi.testclient import TestClient

from modsenc.data.orthography import get_orthography
from modsenc.encoder import ModularEncoder
from modsenc.serving.app import ServeConfig, create_app
from tests._zoo import HELD_OUT
from tests.serving.conftest import assert_api_error

pytestmark = pytest.mark.slow

UZ = get_orthography("uz")

MIXED = [HELD_OUT["kk"][0], HELD_OUT["en"][0], HELD_OUT["uz"][0], HELD_OUT["de"][0], HELD_OUT["uz"][1]]
MIXED_LANGS = ["kk", "en", "uz", "de", "uz"]


@pytest.fixture(scope="module")
def reference(zoo_dir) -> ModularEncoder:
    """An encoder of its own, independent of the server's, for the expected vectors."""
    return ModularEncoder.from_pretrained(zoo_dir, device="cpu", runtime="torch")


@contextmanager
def serving(zoo_dir, **settings):
    app = create_app(ServeConfig(str(zoo_dir), device="cpu", **{"runtime": "torch", **settings}))
    with TestClient(app) as client:
        wait_ready(client)
        yield client


def wait_ready(client, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        health = client.get("/health")
        if health.status_code == 200:
            return
        assert health.status_code == 503 and health.json() == {"status": "loading"}, health.text
        assert time.monotonic() < deadline, "server never became ready"
        time.sleep(0.05)


def metric(client, name: str, labels: str = "") -> float:
    """One sample of /metrics, e.g. metric(c, "modsenc_batch_requests_bucket", 'le="1.0"')."""
    text = client.get("/metrics").text
    pattern = re.escape(name) + (r"\{" + re.escape(labels) + r"\}" if labels else "") + r" (\S+)"
    found = re.search(r"^" + pattern + r"$", text, re.MULTILINE)
    assert found, f"{name}{{{labels}}} not in /metrics"
    return float(found.group(1))


def token_count(encoder: ModularEncoder, text: str, lang: str) -> int:
    """The tokens of ``text`` counted by hand: the language's orthography, then the backbone's
    prefix, then the language's own tokenizer (its vocabulary module's, or the backbone's)."""
    encoder.load_language(lang)
    modular = encoder.modular
    tokenizer = modular.tokenizers[lang] if "vocab" in modular.modules_of(lang) else modular.base_tokenizer
    orthography = modular.orthographies.get(lang)
    if orthography is not None:
        text = orthography.normalize(text)
    return len(tokenizer(modular.backbone.prefix + text)["input_ids"])


def test_usage_counts_the_tokens_encoded_with_the_prefix_and_the_orthography(e5_like_zoo) -> None:
    latin = [t for t in HELD_OUT["uz"] if "ʻ" in t]  # an apostrophe the orthography rewrites
    cyrillic = [UZ.script_variants(t)[1] for t in HELD_OUT["uz"]]
    texts = [*latin, *cyrillic, HELD_OUT["en"][0]]
    langs = ["uz"] * (len(latin) + len(cyrillic)) + ["en"]
    assert latin and all(any("а" <= ch <= "я" for ch in t) for t in cyrillic)
    with serving(e5_like_zoo) as client:
        encoder = client.app.state.modsenc.service.encoder
        backbone = encoder.modular.backbone
        assert backbone.prefix == "query: " and backbone.pooling == "mean"
        assert encoder.modular.orthographies.get("uz") is None  # loaded by the request
        encoded: list[int] = []  # the length of every sequence the model runs on
        # every batch the torch runtime runs is packed by the backbone (merged modules or live)
        pack = backbone.pack

        def counting_pack(ids):
            batch = pack(ids)
            encoded.extend(batch.seqlens)
            return batch

        backbone.pack = counting_pack
        response = client.post("/v1/embeddings", json={"input": texts, "lang": langs})
        assert response.status_code == 200, response.text
        usage = response.json()["usage"]
        assert usage["prompt_tokens"] == usage["total_tokens"] == sum(encoded)
        counted = [len(encoder.tokenize([t], code).ids[0]) for t, code in zip(texts, langs)]
        assert sorted(encoded) == sorted(counted)
        # by hand: uz's orthography (Cyrillic to Latin, one apostrophe), then "query: ", then the tokenizer
        tokenizer = encoder.modular.base_tokenizer  # neither language has its own vocabulary
        uz = encoder.modular.orthographies["uz"]
        assert uz.name == "uz"
        by_hand = [len(tokenizer("query: " + uz.normalize(t))["input_ids"]) for t in texts[:-1]]
        by_hand.append(len(tokenizer("query: " + texts[-1])["input_ids"]))
        assert sorted(encoded) == sorted(by_hand)
        # the count the server used to report (the raw text through the tokenizer) is not that
        assert sum(len(tokenizer(t)["input_ids"]) for t in texts) != sum(by_hand)
        for text, lang in zip(texts, langs):  # per text too, TEI's /embed with its token header
            response = client.post("/embed", json={"inputs": text, "lang": lang})
            assert response.status_code == 200, response.text
            assert int(response.headers["x-modsenc-tokens"]) == token_count(encoder, text, lang)


def test_openai_embeddings_equal_encode_routed_and_in_order(zoo_dir, reference) -> None:
    with serving(zoo_dir) as client:
        response = client.post("/v1/embeddings", json={"input": MIXED, "model": "anything"})
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["object"] == "list" and body["model"] == "zoo"
        assert [d["index"] for d in body["data"]] == list(range(5))
        assert [d["lang"] for d in body["data"]] == MIXED_LANGS
        assert not any(d["truncated"] for d in body["data"])
        served = np.array([d["embedding"] for d in body["data"]])
        expected = reference.encode(MIXED, normalize_embeddings=True)
        np.testing.assert_allclose(served, expected, atol=1e-6)
        tokens = sum(token_count(reference, t, lang) for t, lang in zip(MIXED, MIXED_LANGS))
        assert body["usage"] == {"prompt_tokens": tokens, "total_tokens": tokens}

        # mono mode, one language per input, unnormalised, base64 (little-endian float32)
        langs = ["uz", "uz", "en", "kk", "uz"]
        response = client.post(
            "/v1/embeddings",
            json={
                "input": MIXED,
                "lang": langs,
                "mode": "mono",
                "normalize": False,
                "encoding_format": "base64",
            },
        )
        assert response.status_code == 200, response.text
        data = response.json()["data"]
        assert [d["lang"] for d in data] == langs
        served = np.stack([np.frombuffer(base64.b64decode(d["embedding"]), dtype="<f4") for d in data])
        np.testing.assert_allclose(served, reference.encode(MIXED, lang=langs, mode="mono"), atol=1e-6)

        # a single string, `dimensions` equal to the model's is accepted
        response = client.post("/v1/embeddings", json={"input": MIXED[2], "dimensions": 32, "lang": "uz"})
        assert response.status_code == 200, response.text
        assert len(response.json()["data"]) == 1
        np.testing.assert_allclose(
            response.json()["data"][0]["embedding"],
            reference.encode(MIXED[2], lang="uz", normalize_embeddings=True),
            atol=1e-6,
        )


def test_quantize_int8_serves_the_int8_encoders_vectors(zoo_dir, reference) -> None:
    pytest.importorskip("torchao")
    int8 = ModularEncoder.from_pretrained(zoo_dir, device="cpu", quantize="int8", runtime="torch")
    with serving(zoo_dir, quantize="int8") as client:
        assert client.get("/info").json()["quantization"] == "int8"
        response = client.post("/v1/embeddings", json={"input": MIXED})
        assert response.status_code == 200, response.text
        assert [d["lang"] for d in response.json()["data"]] == MIXED_LANGS
        served = np.array([d["embedding"] for d in response.json()["data"]])
        np.testing.assert_allclose(served, int8.encode(MIXED, normalize_embeddings=True), atol=1e-5)
        exact = reference.encode(MIXED, normalize_embeddings=True)
        assert not np.allclose(served, exact, atol=1e-5)  # quantised: close to float32, not equal
        assert (served * exact).sum(1).min() > 0.99
    with serving(zoo_dir) as client:
        assert client.get("/info").json()["quantization"] is None


def test_the_openvino_runtime_serves_the_routed_vectors(zoo_dir) -> None:
    pytest.importorskip("openvino")
    fp32 = ModularEncoder.from_pretrained(zoo_dir, device="cpu", dtype="fp32", verify=False, runtime="torch")
    with serving(zoo_dir, runtime="openvino", dtype="fp32") as client:
        info = client.get("/info").json()
        assert (info["runtime"], info["precision"]) == ("openvino", "fp32")
        response = client.post("/v1/embeddings", json={"input": MIXED})
        assert response.status_code == 200, response.text
        assert [d["lang"] for d in response.json()["data"]] == MIXED_LANGS
        served = np.array([d["embedding"] for d in response.json()["data"]])
        exact = fp32.encode(MIXED, normalize_embeddings=True)
        assert (served * exact).sum(1).min() > 0.9999  # the same model, compiled: equal to rounding


def test_tei_embed(zoo_dir, reference) -> None:
    with serving(zoo_dir) as client:
        response = client.post("/embed", json={"inputs": MIXED[0]})
        assert response.status_code == 200, response.text
        np.testing.assert_allclose(
            response.json(), [reference.encode(MIXED[0], normalize_embeddings=True)], atol=1e-6
        )
        assert response.headers["x-modsenc-languages"] == "kk"
        response = client.post("/embed", json={"inputs": MIXED, "normalize": False, "mode": "mono"})
        np.testing.assert_allclose(response.json(), reference.encode(MIXED, mode="mono"), atol=1e-6)
        assert response.headers["x-modsenc-languages"] == ",".join(MIXED_LANGS)
        assert response.headers["x-modsenc-truncated"] == ""


def test_concurrent_requests_are_batched_and_each_gets_its_own_vectors(zoo_dir, reference) -> None:
    texts = [f"{HELD_OUT['en'][i % 2]} Number {i}." for i in range(8)]
    # A long wait so the eight requests, sent together, meet in the queue whatever the machine's load.
    with serving(zoo_dir, max_wait_ms=500, max_batch_size=64, languages=["en"]) as client:
        with ThreadPoolExecutor(8) as pool:
            responses = list(
                pool.map(lambda t: client.post("/v1/embeddings", json={"input": [t], "lang": "en"}), texts)
            )
        assert [r.status_code for r in responses] == [200] * 8
        served = np.array([r.json()["data"][0]["embedding"] for r in responses])
        # Batched with other requests' texts, each vector equals the text encoded on its own.
        for text, vector in zip(texts, served):
            np.testing.assert_allclose(
                vector, reference.encode(text, lang="en", normalize_embeddings=True), atol=1e-6
            )
        batches = metric(client, "modsenc_batch_requests_count")
        single = metric(client, "modsenc_batch_requests_bucket", 'le="1.0"')
        assert single < batches  # at least one batch held texts of more than one request
        assert metric(client, "modsenc_batch_inputs_sum") == 8
        assert metric(client, "modsenc_inputs_total", 'lang="en",mode="cross"') == 8
        assert metric(client, "modsenc_requests_total", 'endpoint="/v1/embeddings",status="200"') == 8


def test_languages_load_on_demand_and_the_least_recently_used_is_evicted(zoo_dir) -> None:
    with serving(zoo_dir, languages=["en"], max_languages=2) as client:
        info = client.get("/info").json()
        assert info["languages"]["installed"] == ["de", "en", "kk", "uz"]
        assert info["languages"]["loaded"] == ["en"]
        assert info["dimension"] == 32 and info["limits"]["max_languages"] == 2
        assert len(info["backbone"]["fingerprint"]) == 64
        for lang, loaded in (("uz", ["en", "uz"]), ("kk", ["uz", "kk"]), ("uz", ["kk", "uz"])):
            response = client.post("/embed", json={"inputs": HELD_OUT[lang][0], "lang": lang})
            assert response.status_code == 200, response.text
            assert client.get("/info").json()["languages"]["loaded"] == loaded
        assert metric(client, "modsenc_languages_loaded") == 2
        assert metric(client, "modsenc_language_loads_total", 'lang="en"') == 1
        assert metric(client, "modsenc_language_loads_total", 'lang="uz"') == 1
        assert metric(client, "modsenc_language_evictions_total", 'lang="en"') == 1
        assert metric(client, "process_resident_memory_bytes") > 10e6


BAD = [
    # (path, body, status, error code, words in the message)
    ("/v1/embeddings", {"input": []}, 400, "empty_input", "input is an empty list"),
    ("/v1/embeddings", {"input": ["ok", ""]}, 400, "empty_input", "input[1] is empty"),
    ("/v1/embeddings", {"input": ["ok", 3]}, 400, "invalid_input", "input[1] is int"),
    ("/v1/embeddings", {"input": ["ok", [101, 102]]}, 400, "invalid_input", "input[1] is list: token ids"),
    ("/embed", {"inputs": [[101, 102]]}, 400, "invalid_input", "inputs[0] is list: token ids"),
    ("/v1/embeddings", {"input": {"a": 1}}, 400, "invalid_input", "a string or a list of strings"),
    ("/v1/embeddings", {"input": ["a"] * 5}, 413, "too_many_inputs", "5 texts; at most 4"),
    ("/v1/embeddings", {"input": "x " * 40, "truncate": False}, 413, "input_too_long", "more than 16 tokens"),
    (
        "/v1/embeddings",
        {"input": "hello", "lang": "fr"},
        400,
        "unknown_language",
        "installed: de, en, kk, uz",
    ),
    ("/v1/embeddings", {"input": "hello", "lang": "english"}, 400, "unknown_language", "installed: de, en"),
    ("/v1/embeddings", {"input": ["a", "b"], "lang": ["en"]}, 400, "invalid_lang", "1 codes for 2 inputs"),
    ("/v1/embeddings", {"input": "hello", "dimensions": 64}, 400, "invalid_dimensions", "32-dimensional"),
    ("/v1/embeddings", {"input": "hello", "mode": "both"}, 422, "invalid_request", "mode"),
    ("/v1/embeddings", {"input": "hello", "langs": "en"}, 422, "invalid_request", "langs"),
    ("/v1/embeddings", {"model": "m"}, 422, "invalid_request", "input"),
    ("/embed", {"inputs": []}, 400, "empty_input", "inputs is an empty list"),
    ("/embed", {"inputs": "x " * 40}, 413, "input_too_long", "inputs[0] has more than 16 tokens"),
    (
        "/embed",
        {"inputs": "a", "truncation_direction": "Left"},
        422,
        "invalid_request",
        "truncation_direction",
    ),
]


@pytest.fixture(scope="module")
def strict_client(zoo_dir):
    with serving(zoo_dir, max_inputs=4, max_input_tokens=16, max_body_bytes=4000, max_queue=8) as client:
        yield client


@pytest.mark.parametrize(("path", "body", "status", "code", "words"), BAD)
def test_bad_input_gets_a_4xx_json_error(strict_client, path, body, status, code, words) -> None:
    response = strict_client.post(path, json=body)
    assert_api_error(response, path, status, code, words)


UNICODE = [
    # (path, raw body, error code, words in the message). Sent as bytes: httpx cannot encode a lone
    # surrogate, while JSON's "\ud800" escape is valid JSON that Python decodes to a string no UTF-8
    # encoder takes (the tokenizer's and fastText's answered 500 on it).
    (
        "/v1/embeddings",
        rb'{"input": "\ud800"}',
        "invalid_unicode",
        "input[0] is not valid Unicode: a lone surrogate U+D800 at character 0",
    ),
    (
        "/v1/embeddings",
        rb'{"input": ["ok", "a\udfffb"], "lang": "en"}',
        "invalid_unicode",
        "input[1] is not valid Unicode: a lone surrogate U+DFFF at character 1",
    ),
    (
        "/embed",
        rb'{"inputs": ["ok", "\ud800"]}',
        "invalid_unicode",
        "inputs[1] is not valid Unicode: a lone surrogate U+D800",
    ),
    ("/embed", rb'{"inputs": "\ud800"}', "invalid_unicode", "inputs[0] is not valid Unicode"),
    ("/v1/embeddings", rb'{"input": "ok", "user": "\ud800"}', "invalid_unicode", "user is not valid Unicode"),
    ("/v1/embeddings", rb'{"input": "ok", "mode": "\ud800"}', "invalid_unicode", "mode is not valid Unicode"),
    ("/embed", rb'{"inputs": "ok", "\ud800": 1}', "invalid_unicode", "a field name is not valid Unicode"),
    ("/embed", rb'{"inputs": "ok", "lang": "\ud800"}', "unknown_language", "invalid language code '\\ud800'"),
    (
        "/v1/embeddings",
        b'{"input": "caf\xe9"}',
        "invalid_unicode",
        "request body is not valid UTF-8: byte 0xe9 at offset 14",
    ),
    (
        "/embed",
        b'\xff\xfe{"inputs": "ok"}',
        "invalid_unicode",
        "request body is not valid UTF-8: byte 0xff at offset 0",
    ),
]


@pytest.mark.parametrize(("path", "body", "code", "words"), UNICODE)
def test_invalid_unicode_gets_a_400_naming_it_and_one_log_line(
    strict_client, caplog, path, body, code, words
) -> None:
    caplog.set_level(logging.INFO, logger="modsenc.serving")
    response = strict_client.post(path, content=body, headers={"content-type": "application/json"})
    assert_api_error(response, path, 400, code, words)
    logged = [r.getMessage() for r in caplog.records if r.name == "modsenc.serving"]
    assert len(logged) == 1, logged
    assert logged[0].startswith(f"modsenc serve: POST {path} refused, 400 {code}: ") and words in logged[0]
    assert not any(r.exc_info for r in caplog.records)  # an expected refusal: no traceback


def test_invalid_json_oversized_bodies_and_unknown_paths(strict_client) -> None:
    response = strict_client.post(
        "/v1/embeddings", content=b'{"input": ["a",', headers={"content-type": "application/json"}
    )
    assert response.status_code == 400 and "invalid JSON" in response.json()["error"]["message"]
    big = json.dumps({"inputs": ["word " * 900]})
    response = strict_client.post("/embed", content=big, headers={"content-type": "application/json"})
    assert response.status_code == 413
    assert response.json() == {
        "error": "request body is larger than 4000 bytes",
        "error_type": "body_too_large",
    }

    def chunks():  # no Content-Length: the limit holds while the body streams in
        for _ in range(10):
            yield b" " * 1000

    response = strict_client.post("/embed", content=chunks(), headers={"content-type": "application/json"})
    assert response.status_code == 413
    response = strict_client.get("/v2/nothing")
    assert response.status_code == 404 and response.json()["error_type"] == "http_error"
    assert metric(strict_client, "modsenc_errors_total", 'kind="body_too_large"') == 2


def test_over_long_input_is_truncated_with_a_flag(strict_client, zoo_dir) -> None:
    long_text = " ".join(HELD_OUT["en"] * 4)
    response = strict_client.post("/v1/embeddings", json={"input": [long_text, "Short."], "lang": "en"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert [d["truncated"] for d in body["data"]] == [True, False]
    cut = ModularEncoder.from_pretrained(zoo_dir, device="cpu", max_length=16, runtime="torch")
    short_tokens = token_count(cut, "Short.", "en")
    assert body["usage"]["prompt_tokens"] == 16 + short_tokens
    with pytest.warns(UserWarning, match="truncated"):
        expected = cut.encode(long_text, lang="en", normalize_embeddings=True)
    np.testing.assert_allclose(body["data"][0]["embedding"], expected, atol=1e-6)
    response = strict_client.post("/embed", json={"inputs": [long_text], "lang": "en", "truncate": True})
    assert response.headers["x-modsenc-truncated"] == "0"


def test_full_queue_answers_503_with_retry_after(zoo_dir) -> None:
    with serving(
        zoo_dir, max_queue=4, max_inputs=4, max_wait_ms=1500, max_batch_size=64, languages=["en"]
    ) as client:
        first: dict = {}
        waiting = threading.Thread(
            target=lambda: first.update(
                r=client.post("/embed", json={"inputs": ["a", "b", "c"], "lang": "en"})
            )
        )
        waiting.start()
        deadline = time.monotonic() + 10
        while metric(client, "modsenc_queue_inputs") < 3:  # three texts wait for their batch to fill
            assert time.monotonic() < deadline
            time.sleep(0.01)
        response = client.post("/v1/embeddings", json={"input": ["d", "e"], "lang": "en"})
        assert response.status_code == 503
        assert response.headers["retry-after"] == "1"
        assert "queue is full (3 of 4 texts waiting)" in response.json()["error"]["message"]
        assert client.get("/health").status_code == 200  # the loop answers while texts wait
        waiting.join()
        assert first["r"].status_code == 200 and len(first["r"].json()) == 3
        assert metric(client, "modsenc_errors_total", 'kind="overloaded"') == 1


def test_health_reports_a_model_that_failed_to_load(tmp_path) -> None:
    (tmp_path / "backbone").mkdir()
    app = create_app(ServeConfig(str(tmp_path), device="cpu", runtime="torch"))
    with TestClient(app) as client:
        deadline = time.monotonic() + 30
        while (health := client.get("/health")).status_code == 503:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert health.status_code == 500 and "no languages installed" in health.json()["error"]
        response = client.post("/v1/embeddings", json={"input": "hello"})
        assert response.status_code == 500 and "failed to load" in response.json()["error"]["message"]


def test_the_openai_client_works_with_base_url(zoo_dir, reference) -> None:
    from openai import OpenAI  # noqa: PLC0415

    with serving(zoo_dir) as client:
        # TestClient is an httpx client, so the OpenAI client's requests go to the app in-process;
        # by default it asks for base64 and decodes it.
        openai = OpenAI(base_url="http://testserver/v1", api_key="unused", http_client=client)
        response = openai.embeddings.create(model="zoo", input=MIXED)
        vectors = np.array([d.embedding for d in response.data])
        np.testing.assert_allclose(vectors, reference.encode(MIXED, normalize_embeddings=True), atol=1e-6)
        assert [d.model_extra["lang"] for d in response.data] == MIXED_LANGS
        assert response.usage.prompt_tokens == sum(
            token_count(reference, t, lang) for t, lang in zip(MIXED, MIXED_LANGS)
        )
        with pytest.raises(Exception, match="is not installed in this zoo") as refused:
            openai.embeddings.create(model="zoo", input="hello", extra_body={"lang": "fr"})
        assert refused.value.status_code == 400


OPEN_SET = [
    "Я вчера купил новый телефон в магазине.",  # ru
    "Біз ертең әжемнің үйіне барамыз.",  # kk
    "Dün mağazadan yeni bir telefon satın aldım.",  # tr
    "Kecha doʻkondan yangi telefon sotib oldim.",  # uz
    "I bought a new phone at the shop yesterday.",  # en
]


def test_each_text_says_its_route_and_the_metrics_count_them(e5_like_zoo) -> None:
    """An en + uz zoo: Russian, Kazakh and Turkish go to the backbone (no modules), reported with
    the language detected; the vectors are those of encode(lang="backbone")."""
    reference = ModularEncoder.from_pretrained(e5_like_zoo, device="cpu", runtime="torch")
    with serving(e5_like_zoo) as client:
        response = client.post("/v1/embeddings", json={"input": OPEN_SET})
        assert response.status_code == 200, response.text
        data = response.json()["data"]
        assert [(d["lang"], d["route"]) for d in data] == [
            ("ru", "backbone"),
            ("kk", "backbone"),
            ("tr", "backbone"),
            ("uz", "bundle"),
            ("en", "bundle"),
        ]
        routes = reference.detect_languages(OPEN_SET)  # why, beside each route (issue 48)
        assert [(d["detected"], d["unsure"]) for d in data] == [(r.detected, r.unsure) for r in routes]
        assert [d["confidence"] for d in data] == [round(r.confidence, 4) for r in routes]
        served = np.array([d["embedding"] for d in data])
        expected = reference.encode(OPEN_SET[:3], lang="backbone", normalize_embeddings=True)
        np.testing.assert_allclose(served[:3], expected, atol=1e-6)
        embed = client.post("/embed", json={"inputs": OPEN_SET})
        assert embed.headers["x-modsenc-languages"] == "ru,kk,tr,uz,en"
        assert embed.headers["x-modsenc-routes"] == "backbone,backbone,backbone,bundle,bundle"
        assert metric(client, "modsenc_routes_total", 'lang="ru",route="backbone"') == 2.0
        assert metric(client, "modsenc_routes_total", 'lang="uz",route="bundle"') == 2.0
        given = client.post("/v1/embeddings", json={"input": OPEN_SET[:1], "lang": "backbone"})
        assert [(d["lang"], d["route"]) for d in given.json()["data"]] == [(None, "backbone")]
        assert [(d["detected"], d["confidence"], d["unsure"]) for d in given.json()["data"]] == [
            (None, 1.0, False)
        ]
    with serving(e5_like_zoo, other="refuse") as client:
        response = client.post("/v1/embeddings", json={"input": [OPEN_SET[3], OPEN_SET[0]]})
        assert response.status_code == 422, response.text
        assert "input[1]: detected language 'ru' is not installed" in response.json()["error"]["message"]
        assert metric(client, "modsenc_routes_total", 'lang="ru",route="refused"') == 1.0
