"""modsenc eval / mine end to end on a tiny zoo; classification; the MTEB adapter."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from modsenc.cli import main
from modsenc.data.demo import demo_path
from modsenc.eval.classification import LabelledText, classification
from modsenc.eval.runner import EncoderSet, MTEBEncoder, evaluate
from tests._zoo import write_sts

pytestmark = pytest.mark.slow


def test_classification_monolingual_and_zero_shot() -> None:
    rng = np.random.default_rng(0)
    centres = {"sport": rng.standard_normal(8), "food": rng.standard_normal(8)}
    vectors: dict[str, np.ndarray] = {}

    def make(lang: str, i: int, label: str) -> LabelledText:
        text = f"{lang}-{label}-{i}"
        vectors[text] = centres[label] + 0.3 * rng.standard_normal(8)
        return LabelledText(lang, text, label)

    train = [make("en", i, label) for i in range(20) for label in centres]
    test = [make(lang, 100 + i, label) for lang in ("en", "uz") for i in range(10) for label in centres]
    encode = lambda texts: np.stack([vectors[t] for t in texts])  # noqa: E731
    result = classification(train, test, {"en": encode, "uz": encode})
    assert result["monolingual"] == {"en": 100.0}  # no uz training data: no monolingual uz score
    assert result["zero_shot"] == {"uz": 100.0}
    other = {"sport": "food", "food": "sport"}

    def swapped(texts):  # a uz space where the two topics trade places: zero-shot transfer must fail
        return np.stack(
            [vectors[t] - centres[t.split("-")[1]] + centres[other[t.split("-")[1]]] for t in texts]
        )

    assert classification(train, test, {"en": encode, "uz": swapped})["zero_shot"]["uz"] == 0.0


def test_evaluate_a_zoo_and_write_reports(zoo_dir, tmp_path) -> None:
    sts = tmp_path / "sts.tsv"
    rows = [
        ("en", "en", "A man plays guitar.", "A man is playing a guitar.", 4.8),
        ("en", "en", "A dog runs.", "The market is closed.", 0.2),
        ("en", "en", "Kids swim.", "Children are swimming.", 4.5),
        ("en", "uz", "A dog runs.", "It yuguradi.", 4.9),
        ("en", "uz", "A man eats.", "Bozor yopiq.", 0.1),
        ("en", "uz", "Kids swim.", "Bolalar suzmoqda.", 4.7),
        ("en", "kk", "A dog runs.", "Ит жүгіреді.", 4.9),
        ("en", "kk", "A man eats.", "Базар жабық.", 0.1),
        ("en", "kk", "Kids swim.", "Балалар жүзіп жүр.", 4.6),
    ]
    write_sts(sts, rows)
    runner = CliRunner()
    out = tmp_path / "r"
    result = runner.invoke(
        main,
        [
            "eval",
            str(zoo_dir),
            "--bitext",
            str(demo_path("parallel.tsv")),
            "--sts",
            str(sts),
            "--json",
            f"{out}.json",
            "--markdown",
            f"{out}.md",
            "--heatmap",
            f"{out}.png",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "r.json").read_text())
    pairs = data["bitext"]["parallel.tsv"]
    assert {"en-uz", "uz-en", "en-kk", "de-en"} <= set(pairs)
    assert all(0 <= m["xsim_error"] <= 100 and m["n"] == 320 for m in pairs.values())
    assert set(data["sts"]["sts.tsv"]["spearman"]) == {"en-en", "en-uz", "en-kk"}
    assert "language_bias" in data["sts"]["sts.tsv"]
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"
    assert "| en-uz |" in (tmp_path / "r.md").read_text()
    assert runner.invoke(main, ["eval", str(zoo_dir)]).exit_code == 2  # nothing to evaluate


def test_any_encoder_with_an_encode_method_and_the_mteb_adapter(zoo_dir) -> None:
    class Constant:
        def encode(self, texts, batch_size=32, convert_to_numpy=True):
            return np.ones((len(texts), 4), dtype=np.float32)

    fn = EncoderSet(Constant()).for_language("uz")
    assert fn(["a", "b"]).shape == (2, 4)
    with pytest.raises(TypeError, match="has no encode"):
        EncoderSet(object())
    result = evaluate(Constant(), bitext=[demo_path("parallel.tsv")])
    assert result["bitext"]["parallel.tsv"]["en-de"]["xsim_error"] > 90  # a constant encoder cannot mine

    from modsenc.encoder import ModularEncoder  # noqa: PLC0415

    encoder = ModularEncoder.from_pretrained(zoo_dir, runtime="torch")
    adapter = MTEBEncoder(encoder)
    texts = ["Hello there.", "Salom dunyo, bugun havo yaxshi."]
    np.testing.assert_array_equal(
        adapter.encode(texts, task_name="STS22", prompt_type=None), encoder.encode(texts)
    )


def test_mine_cli_finds_the_translations(zoo_dir, tmp_path) -> None:
    from modsenc.data.readers import read_parallel_tsv  # noqa: PLC0415

    columns = read_parallel_tsv(demo_path("parallel.tsv")).columns
    (tmp_path / "en.txt").write_text("\n".join(columns["en"][:40]) + "\n", encoding="utf-8")
    (tmp_path / "de.txt").write_text("\n".join(reversed(columns["en"][:40])) + "\n", encoding="utf-8")
    result = CliRunner().invoke(
        main,
        [
            "mine",
            str(tmp_path / "en.txt"),
            str(tmp_path / "de.txt"),
            "--zoo",
            str(zoo_dir),
            "--src-lang",
            "en",
            "--tgt-lang",
            "en",
            "--output",
            str(tmp_path / "pairs.tsv"),
        ],
    )
    assert result.exit_code == 0, result.output
    lines = (tmp_path / "pairs.tsv").read_text(encoding="utf-8").splitlines()
    scores = [float(line.split("\t")[0]) for line in lines]
    assert scores == sorted(scores, reverse=True) and len(lines) == 40
    assert all(line.split("\t")[1] == line.split("\t")[2] for line in lines)  # identical texts pair up


def test_bitext_from_a_hugging_face_dataset(tmp_path) -> None:
    """A `datasets` source (here the packaged json builder on a local file: no hub needed)."""
    rows = [{"translation": {"en": f"sentence {i}", "de": f"Satz {i}"}} for i in range(12)]
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    vectors = {f"sentence {i}": np.eye(12)[i] for i in range(12)} | {
        f"Satz {i}": np.eye(12)[i] for i in range(12)
    }

    class Lookup:
        def encode(self, texts, batch_size=32, convert_to_numpy=True):
            return np.stack([vectors[t] for t in texts]).astype(np.float32)

    result = evaluate(Lookup(), bitext=[{"hf": "json", "data_files": str(data), "split": "train"}])
    ((name, pairs),) = result["bitext"].items()
    assert name.startswith("hf:json") and pairs["en-de"] == {"xsim_error": 0.0, "p@1": 100.0, "n": 12}


def test_route_sends_every_language_through_one_bundle(zoo_dir, tiny_backbone_dir) -> None:
    """route="en" is Mod_en: Uzbek text goes through the English modules, not through its own."""
    from modsenc.encoder import ModularEncoder  # noqa: PLC0415

    encoder = ModularEncoder.from_pretrained(zoo_dir, runtime="torch")
    texts = ["Bolalar suzmoqda.", "Bozor yopiq."]
    routed = EncoderSet(zoo_dir, route="en", runtime="torch").for_language("uz")(texts)
    np.testing.assert_allclose(routed, encoder.encode(texts, lang="en"), atol=1e-6)
    assert np.abs(routed - encoder.encode(texts, lang="uz")).max() > 1e-3
    with pytest.raises(ValueError, match="route='fr': not installed"):
        EncoderSet(zoo_dir, route="fr")
    with pytest.raises(ValueError, match="route='en' needs a zoo"):
        EncoderSet(tiny_backbone_dir, route="en")
