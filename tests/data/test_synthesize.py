"""modsenc synthesize: the multi-parallel TSV, the cache that makes a rerun resume, the filters
(counts by value), and a real tiny Marian model built here (random weights, no download)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from modsenc.cli import main
from modsenc.data.language_data import load_language_data
from modsenc.data.readers import ParaphrasePair, read_paraphrase_tsv
from modsenc.data.synthesize import Filters, TranslationCache, english_pairs, flores_code, synthesize


class FakeTranslator:
    """Translates by a table (default: upper-cased text with a language tag), counting each
    sentence it is asked for; ``fail_after`` raises after that many batches (a kill)."""

    name = "fake-mt"

    def __init__(self, table=None, fail_after=None):
        self.table, self.fail_after = table or {}, fail_after
        self.calls: list[str] = []
        self.batches = 0

    def translate(self, texts, lang):
        if self.fail_after is not None and self.batches >= self.fail_after:
            raise KeyboardInterrupt("killed")
        self.batches += 1
        self.calls.extend(texts)
        return [self.table.get(t, f"{t.upper()} {lang}") for t in texts]


def _pairs(n=6):
    return [
        ParaphrasePair(f"p{i}", "en", f"anchor sentence {i}", f"positive sentence {i}", f"negative {i}")
        for i in range(n)
    ]


def test_multi_parallel_tsv_read_by_add_language(tmp_path):
    out = tmp_path / "para.tsv"
    reports = synthesize(_pairs(), ["uz", "kk"], FakeTranslator(), out, batch_size=4, progress=False)
    rows = read_paraphrase_tsv(out)
    assert len(rows) == 18  # 6 English + 6 uz + 6 kk
    assert {r.pair_id for r in rows if r.lang == "kk"} == {f"p{i}" for i in range(6)}
    uz = {r.pair_id: r for r in rows if r.lang == "uz"}
    assert uz["p3"].anchor == "ANCHOR SENTENCE 3 uz" and uz["p3"].negative == "NEGATIVE 3 uz"
    assert reports["uz"].pairs_kept == 6 and reports["uz"].translated == 18
    # add-language's loader: uz paraphrases, and en-uz cross-lingual pairs through the shared pair ids.
    data = load_language_data("uz", "en", {"paraphrase": [str(out)]}, None)
    assert data.counts()["paraphrase_pairs"] == 6
    assert data.counts()["crosslingual_paraphrase_pairs"] > 0
    report = json.loads((tmp_path / "para.tsv.report.json").read_text())
    assert report["languages"]["kk"]["pairs_kept"] == 6


def test_resume_after_a_kill_translates_each_sentence_once(tmp_path):
    out = tmp_path / "para.tsv"
    killed = FakeTranslator(fail_after=2)
    with pytest.raises(KeyboardInterrupt):
        synthesize(_pairs(), ["uz"], killed, out, batch_size=4, progress=False)
    assert not out.exists() and len(killed.calls) == 8  # two batches of four reached the cache
    cache_file = tmp_path / "para.tsv.cache.jsonl"
    with cache_file.open("a", encoding="utf-8") as f:
        f.write('{"model": "fake-mt", "lang": "uz", "sou')  # a line a kill cut short
    resumed = FakeTranslator()
    reports = synthesize(_pairs(), ["uz"], resumed, out, batch_size=4, progress=False)
    assert len(resumed.calls) == 10 and not set(resumed.calls) & set(killed.calls)
    assert sorted(killed.calls + resumed.calls) == sorted(
        {s for p in _pairs() for s in (p.anchor, p.positive, p.negative)}
    )
    assert reports["uz"].from_cache == 8 and reports["uz"].translated == 10
    # A third run translates nothing.
    again = FakeTranslator()
    synthesize(_pairs(), ["uz"], again, out, batch_size=4, progress=False)
    assert again.calls == []
    assert len(TranslationCache(cache_file).entries) == 18


def test_each_filter_drops_a_known_number_of_pairs(tmp_path):
    pairs = _pairs(8)
    table = {
        "anchor sentence 0": "",  # empty
        "positive sentence 1": "   ",  # empty
        "anchor sentence 2": "anchor sentence 2",  # a copy into Cyrillic kk
        "anchor sentence 3": "bir bir bir bir bir",  # repetition of a word
        "positive sentence 4": "xxxxxxxxxxxxxxxxxxxxxxxxx",  # a character loop
        "anchor sentence 5": "a",  # length ratio 1/17
        "positive sentence 6": "z" * 3 + " " + "long " * 20,  # ratio over 2.5 (and not a word loop)
        "negative 7": "",  # only the negative fails: the pair stays without one
    }
    table["positive sentence 6"] = "a rather long translation that goes on well beyond the source"
    out = tmp_path / "para.tsv"
    reports = synthesize(pairs, ["kk", "tr"], FakeTranslator(table), out, progress=False)
    kk = reports["kk"]
    assert kk.dropped == {"empty": 2, "copy": 1, "repetition": 2, "length_ratio": 2}
    assert kk.pairs_kept == 1 and kk.negatives_dropped == 1
    # Into Latin-script Turkish a copy is kept (names and numbers may stay as they are).
    assert reports["tr"].dropped == {"empty": 2, "copy": 0, "repetition": 2, "length_ratio": 2}
    kept = {(r.lang, r.pair_id): r for r in read_paraphrase_tsv(out)}
    assert ("tr", "p2") in kept and ("kk", "p2") not in kept
    assert kept[("kk", "p7")].negative is None


def test_filters_and_codes_by_value():
    f = Filters()
    assert f.reason("the cat sat", "", "uz") == "empty"
    assert f.reason("the cat sat", "the cat sat", "ug") == "copy"
    assert f.reason("the cat sat", "the cat sat", "uz") is None
    assert f.reason("go go go go now", "bor bor bor bor hozir", "uz") is None  # repeated in the source too
    assert f.reason("the cat sat on the mat", "mushuk gilamda o'tirdi", "uz") is None
    assert [flores_code(c) for c in ("uz", "kk", "az", "tr", "ky", "ug")] == [
        "uzn_Latn", "kaz_Cyrl", "azj_Latn", "tur_Latn", "kir_Cyrl", "uig_Arab",
    ]  # fmt: skip
    with pytest.raises(ValueError, match="--lang xx"):
        flores_code("xx")
    with pytest.raises(ValueError, match="length ratio"):
        Filters(2.0, 1.0)
    assert [p.pair_id for p in english_pairs(_pairs(5), max_pairs=3)] == ["p0", "p1", "p2"]


@pytest.fixture(scope="module")
def tiny_marian(tmp_path_factory):
    """A Marian model with random weights and a SentencePiece vocabulary trained here."""
    import sentencepiece as spm
    import torch
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer

    root = tmp_path_factory.mktemp("marian")
    text = root / "text.txt"
    words = "the a cat dog sat ran on under mat tree big small red house went to".split()
    text.write_text(
        "\n".join(" ".join(words[(i * 7 + j) % len(words)] for j in range(6)) for i in range(200))
    )
    spm.SentencePieceTrainer.train(
        input=str(text), model_prefix=str(root / "spm"), vocab_size=30, model_type="unigram", minloglevel=2,
        character_coverage=1.0, bos_id=-1, eos_id=-1, unk_id=0, pad_id=-1,
    )  # fmt: skip
    sp = spm.SentencePieceProcessor(model_file=str(root / "spm.model"))
    vocab = {"</s>": 0, "<unk>": 1, "<pad>": 2}
    for i in range(sp.get_piece_size()):
        vocab.setdefault(sp.id_to_piece(i), len(vocab))
    (root / "vocab.json").write_text(json.dumps(vocab))
    folder = root / "model"
    tokenizer = MarianTokenizer(str(root / "spm.model"), str(root / "spm.model"), str(root / "vocab.json"))
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    config = MarianConfig(
        vocab_size=len(vocab), d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=64,
        pad_token_id=2, eos_token_id=0, decoder_start_token_id=2, forced_eos_token_id=0,
    )  # fmt: skip
    MarianMTModel(config).save_pretrained(folder)
    return folder


def test_cli_with_a_tiny_marian_model(tiny_marian, tmp_path):
    source = tmp_path / "en.tsv"
    source.write_text(
        "pair_id\tlang\tanchor\tpositive\tnegative\n"
        + "".join(f"q{i}\ten\tthe cat sat on the mat {i}\ta dog ran to the house\t\n" for i in range(5))
        + "q0\tuz\tmushuk\tit\t\n"
    )
    out = tmp_path / "para.tsv"
    args = [
        "-q", "synthesize", str(source), "--lang", "uz", "--output", str(out), "--model", str(tiny_marian),
        "--device", "cpu", "--num-beams", "1", "--max-pairs", "4", "--batch-size", "2",
        "--min-length-ratio", "0.01", "--max-length-ratio", "100",
    ]  # fmt: skip
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    rows = read_paraphrase_tsv(out)
    assert sorted(r.pair_id for r in rows if r.lang == "en") == ["q0", "q1", "q2", "q3"]
    report = json.loads((tmp_path / "para.tsv.report.json").read_text())["languages"]["uz"]
    # 4 anchors (different) + 1 shared positive = 5 sentences, each translated once.
    assert report["translated"] == 5 and report["pairs_in"] == 4
    assert report["pairs_kept"] + sum(report["dropped"].values()) == 4
    assert len([r for r in rows if r.lang == "uz"]) == report["pairs_kept"]
    # Rerun: everything from the cache; an existing output needs --overwrite.
    again = CliRunner().invoke(main, args)
    assert again.exit_code != 0 and "--overwrite" in again.output
    again = CliRunner().invoke(main, [*args, "--overwrite"])
    assert again.exit_code == 0, again.output
    assert json.loads((tmp_path / "para.tsv.report.json").read_text())["languages"]["uz"]["translated"] == 0
