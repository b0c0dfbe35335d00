"""add-language's stages, looked up through the module-kind registry.

A stage is named after the module kind it trains (``modsenc.modules.kinds``: the registry gives
the stages and their order). Each kind's folder holds its stage (``KIND/stage.py``: a
``StageRecipe``, ``modsenc.modules.kinds.stage``): what it checks and loads before any output is
touched (``prepare``), how it trains and saves its module (``train``), what beyond the recipe and
data enters its cache key (``key_parts``), whether dev metrics are taken after it
(``evaluate_after``), what it records in the bundle manifest (``manifest_fields``) and what it
trains on, for the summary (``plan``).

    vocab  a SentencePiece tokenizer for LANG + FOCUS-initialised embeddings (deepfocus)
    la     language adapter: LoRA on q/k/v + the embeddings, masked language modelling
    se     sentence-encoding adapter: LoRA on all linears, stacked (additively) on the LA, MNRL
    cla    cross-lingual alignment: a parallel bottleneck adapter (adapters' ParBnConfig) that maps
           LANG onto the frozen pivot's embeddings (paraphrase MNRL, parallel cosine, or both)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from modsenc.modules.kinds import MODULE_KINDS, module_kind
from modsenc.modules.kinds.stage import StageRecipe

PIVOT_STAGES = ["se"]  # the pivot's stages when the recipe names none (it has no cla either)


def stage_recipe(stage: str) -> StageRecipe:
    """The recipe of the stage that trains the module kind ``stage``."""
    recipe = module_kind(stage).stage()
    if recipe is None:
        raise ValueError(f"module kind {stage!r} is not trained by add-language (it has no stage)")
    return recipe


class _StageRecipes(Mapping[str, StageRecipe]):
    """Every registered kind's stage recipe, by name, in the registry's order (read when asked)."""

    def __getitem__(self, stage: str) -> StageRecipe:
        if stage not in MODULE_KINDS or MODULE_KINDS[stage].stage() is None:
            raise KeyError(stage)
        return stage_recipe(stage)

    def __iter__(self) -> Iterator[str]:
        return iter([name for name, kind in MODULE_KINDS.items() if kind.stage() is not None])

    def __len__(self) -> int:
        return len(list(iter(self)))


STAGE_RECIPES: Mapping[str, StageRecipe] = _StageRecipes()
