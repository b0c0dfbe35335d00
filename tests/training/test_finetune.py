"""Full-parameter fine-tuning baselines (Full_m / Full_c / Full_mc) on the demo paraphrases."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from safetensors.torch import load_file
from transformers import AutoTokenizer

from modsenc.data.demo import demo_path
from modsenc.data.language_data import load_language_data
from modsenc.training.configs import FinetuneRecipe
from modsenc.training.finetune import load_pairs, run
from modsenc.training.recipe import load_recipe


def _recipe(**extra: str) -> dict:
    overrides = {
        "languages": "[en, uz]",
        "data.paraphrase": "[demo:paraphrase.tsv]",
        "data.dev_pairs": "10",
        "mono.epochs": "null",
        "mono.max_steps": "3",
        "mono.batch_size": "8",
        "mono.lr": "1e-3",
        "cross.epochs": "null",
        "cross.max_steps": "2",
        "cross.batch_size": "8",
    } | extra
    return load_recipe("full-finetune-cpu", [f"{k}={v}" for k, v in overrides.items()], schema=FinetuneRecipe)


def _weights(backbone_dir) -> dict:
    return load_file(backbone_dir / "model.safetensors")


def test_pairs_are_the_ones_add_language_trains_on() -> None:
    recipe = _recipe()
    mono_phase, cross_phase = load_pairs("mono", recipe), load_pairs("cross", recipe)
    mono, mono_counts, files = mono_phase.train, mono_phase.counts, mono_phase.files
    cross, cross_counts = cross_phase.train, cross_phase.counts
    # demo: 150 pair ids in en and uz, 10 held out as dev in each language.
    assert mono_counts == {"en": 140, "uz": 140}
    assert cross_counts == {"en": 0, "uz": 280}  # both directions of 140 pair ids; none for the pivot
    assert [r["count"] for r in files["uz"]] == [150] and len(files["uz"][0]["sha256"]) == 64
    uz = load_language_data("uz", "en", replace(recipe.data, mono=[], parallel=[]), None)
    assert cross == list(uz.crosslingual)
    assert [(p.anchor, p.positive, p.negative) for p in uz.paraphrases] == mono[140:]
    held_out = {p.anchor for p in uz.dev_paraphrases}
    assert not held_out & {a for a, _, _ in mono}
    en_anchor, uz_positive, _ = cross[0]
    assert en_anchor in {p.anchor for p in load_language_data("en", "en", recipe.data, None).paraphrases}
    assert uz_positive in {p.positive for p in uz.paraphrases}
    # the dev pairs, for early stopping, are the held-out ones
    assert len(mono_phase.dev) == 20 and {a for a, _, _ in mono_phase.dev[10:]} == held_out


def test_mixed_phase_is_paraphrases_and_parallel_pairs_with_held_out_dev() -> None:
    recipe = _recipe(**{"data.parallel": "[demo:parallel.tsv]", "data.dev_parallel": "5"})
    mixed = load_pairs("mixed", recipe)
    uz = load_language_data("uz", "en", replace(recipe.data, mono=[]), None)
    para = [(p.anchor, p.positive, p.negative) for p in uz.paraphrases]
    assert mixed.counts["uz"] == len(para) + len(uz.parallel) and len(uz.parallel) > 0
    assert mixed.counts["en"] == 140  # the pivot has paraphrases and no parallel pairs with itself
    assert mixed.train[140:] == para + [(a, b, None) for a, b in uz.parallel]
    assert mixed.dev[-5:] == [(a, b, None) for a, b in uz.dev_parallel]
    assert [r["path"].rsplit("/", 1)[-1] for r in mixed.files["uz"]] == ["paraphrase.tsv", "parallel.tsv"]


def test_lora_phase_is_merged_into_a_plain_backbone(tiny_backbone_dir, tmp_path) -> None:
    recipe = _recipe(**{"mono.lora_r": "4", "mono.eval_every": "1", "mono.patience": "5"})
    final = run(recipe, tiny_backbone_dir, tmp_path / "lora", pairs=["mono"])
    start, after = _weights(tiny_backbone_dir), _weights(final)
    assert set(after) == set(start)  # no LoRA tensors left: merged
    moved = {name for name in start if (start[name] - after[name]).abs().max() > 0}
    # LoRA on every linear layer: those weights moved; embeddings and LayerNorms did not
    assert "encoder.layer.0.attention.self.query.weight" in moved
    assert "encoder.layer.0.output.dense.weight" in moved
    assert not any("embeddings" in name or "LayerNorm" in name for name in moved)
    assert not any(name.endswith(".bias") for name in moved)  # peft's default: bias "none"


def test_full_finetuning_trains_every_parameter_and_reuses_phases(tiny_backbone_dir, tmp_path) -> None:
    recipe = _recipe()
    out = tmp_path / "full"
    final = run(recipe, tiny_backbone_dir, out, pairs=["mono", "cross"])
    assert final == out / "mc" / "backbone"
    start, after_m, after_mc = (
        _weights(tiny_backbone_dir),
        _weights(out / "m" / "backbone"),
        _weights(final),
    )
    assert set(start) == set(after_m) == set(after_mc)
    # Full fine-tuning: every tensor moved (embeddings, attention, FFN, LayerNorms), not an adapter.
    unchanged = [name for name in start if (start[name] - after_m[name]).abs().max() == 0]
    assert unchanged == []
    assert all((after_m[n] - after_mc[n]).abs().max() > 0 for n in ("embeddings.word_embeddings.weight",))
    manifest = json.loads((final / "modsenc_backbone.json").read_text())
    assert manifest["finetune"]["phases"] == ["mono", "cross"]
    assert manifest["finetune"]["pair_counts"] == {"en": 0, "uz": 280}
    # The tokenizer is the backbone's: full fine-tuning adds no vocabulary.
    vocab = AutoTokenizer.from_pretrained(final).get_vocab()
    assert vocab == AutoTokenizer.from_pretrained(tiny_backbone_dir).get_vocab()

    # Full_m is the first phase of Full_mc: asking for it again trains nothing and changes nothing.
    m_bytes = (out / "m" / "backbone" / "model.safetensors").read_bytes()
    assert run(recipe, tiny_backbone_dir, out, pairs=["mono"]) == out / "m" / "backbone"
    assert (out / "m" / "backbone" / "model.safetensors").read_bytes() == m_bytes

    # Another budget is another run: the stale phase is trained again from the start.
    changed = run(_recipe(**{"mono.max_steps": "2"}), tiny_backbone_dir, out, pairs=["mono"])
    assert json.loads((out / "m" / "done.json").read_text())["metrics"]["step"] == 2
    assert (changed / "model.safetensors").read_bytes() != m_bytes


def test_bad_input_is_named(tiny_backbone_dir, tmp_path) -> None:
    with pytest.raises(ValueError, match="pairs must be one of mono, cross, mixed, got 'both'"):
        run(_recipe(), tiny_backbone_dir, tmp_path / "x", pairs=["both"])
    with pytest.raises(ValueError, match="`languages` list is empty"):
        run(_recipe(languages="[]"), tiny_backbone_dir, tmp_path / "x", pairs=["mono"])
    with pytest.raises(ValueError, match=r"no cross pairs for \['en'\]"):
        run(_recipe(languages="[en]"), tiny_backbone_dir, tmp_path / "x", pairs=["cross"])
    with pytest.raises(FileNotFoundError, match="nothing.tsv"):
        run(_recipe(**{"data.paraphrase": "[nothing.tsv]"}), tiny_backbone_dir, tmp_path / "x")


def test_edited_data_with_the_same_path_retrains(tiny_backbone_dir, tmp_path) -> None:
    data = tmp_path / "paraphrase.tsv"
    text = demo_path("paraphrase.tsv").read_text(encoding="utf-8")
    data.write_text(text, encoding="utf-8")
    recipe = _recipe(**{"data.paraphrase": f"[{data}]"})
    out = tmp_path / "full"
    run(recipe, tiny_backbone_dir, out, pairs=["mono"])
    first = json.loads((out / "m" / "done.json").read_text())["key"]
    run(recipe, tiny_backbone_dir, out, pairs=["mono"])  # unchanged: reused
    assert json.loads((out / "m" / "done.json").read_text())["key"] == first
    # Same path, same number of pairs, one sentence edited: another key, trained again.
    data.write_text(
        text.replace("The meeting starts at ten.", "The meeting starts at eleven."), encoding="utf-8"
    )
    run(recipe, tiny_backbone_dir, out, pairs=["mono"])
    assert json.loads((out / "m" / "done.json").read_text())["key"] != first
