"""Objectives by recipe name, and how a recipe's ``objective`` section becomes their options.

The section's flat keys are options of the objective that ``name`` picks (MEXMA's, in every recipe
written before the other objectives existed). A sub-section named after an objective holds that
objective's options, so one recipe can carry several objectives' settings and
``--set objective.name=ems`` switches between them:

    objective:
      name: mexma
      alpha: 1.0            # MEXMA's
      ems: {tied_embedding: false}
      emmax: {phase1_steps: 50}

Flat keys that belong to another objective are left to it; a key no objective knows is an error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from modsenc.backbone.encoder import Backbone
from modsenc.objectives.base import Objective, ObjectiveData
from modsenc.objectives.contrastive import ContrastiveConfig, ContrastiveObjective
from modsenc.objectives.emmax import EMMAXConfig, EMMAXObjective
from modsenc.objectives.ems import EMSConfig, EMSObjective
from modsenc.objectives.mexma import MEXMAConfig, MEXMAObjective
from modsenc.utils.config import Section

CONFIGS: dict[str, type[Section]] = {
    "mexma": MEXMAConfig,
    "ems": EMSConfig,
    "emmax": EMMAXConfig,
    "contrastive": ContrastiveConfig,
}
_BUILDERS: dict[str, Callable[[Backbone, Any, ObjectiveData], Objective]] = {
    "mexma": lambda backbone, config, data: MEXMAObjective(backbone, config),
    "ems": lambda backbone, config, data: EMSObjective(backbone, config, data.languages),
    "emmax": lambda backbone, config, data: EMMAXObjective(backbone, config, data.non_parallel),
    "contrastive": lambda backbone, config, data: ContrastiveObjective(backbone, config),
}

# Objectives that train on text without translations (data.monolingual, data.paraphrase).
NON_PARALLEL_OBJECTIVES = frozenset({"emmax"})


def objective_options(name: str, section: Mapping[str, Any]) -> dict[str, Any]:
    """The options of objective ``name`` in a recipe's ``objective`` section (without ``name``)."""
    if name not in CONFIGS:
        raise ValueError(f"unknown objective.name {name!r}; available: {', '.join(CONFIGS)}")
    own = set(CONFIGS[name].keys())
    others = set().union(*(set(CONFIGS[n].keys()) for n in CONFIGS if n != name))
    options: dict[str, Any] = {}
    for key, value in section.items():
        sub_section = key in CONFIGS and (value is None or isinstance(value, Mapping))
        if key == "name" or (sub_section and key != name):
            continue
        if sub_section:
            continue  # this objective's own, applied below over the flat keys
        if key in own:
            options[key] = value
        elif key not in others:
            raise ValueError(
                f"objective.{key} is not an option of {name} (its options: {', '.join(sorted(own))}) "
                "nor of any other objective"
            )
    for key, value in (section.get(name) or {}).items():
        if key not in own:
            raise ValueError(
                f"objective.{name}.{key} is not an option of {name}; its options: {', '.join(sorted(own))}"
            )
        options[key] = value
    return options


def objective_config(name: str, section: Mapping[str, Any], where: str = "objective") -> Section:
    """The typed config of objective ``name`` from a recipe's ``objective`` section: its keys
    checked (``objective_options``), its values converted to the declared types, its cross-key
    checks run; every error a one-line RecipeError naming the key."""
    return CONFIGS[name].from_dict(objective_options(name, dict(section)), where)


def build_objective(
    name: str,
    backbone: Backbone,
    options: Mapping[str, Any] | Section | None = None,
    data: ObjectiveData | None = None,
) -> Objective:
    """The objective ``name`` with ``options``: its typed config, or the options of a recipe's
    ``objective`` section (see the module doc)."""
    if name not in CONFIGS:
        raise ValueError(f"unknown objective.name {name!r}; available: {', '.join(CONFIGS)}")
    config = options if isinstance(options, CONFIGS[name]) else objective_config(name, options or {})
    return _BUILDERS[name](backbone, config, data or ObjectiveData())
