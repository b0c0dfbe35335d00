from modsenc.objectives.base import Objective, ObjectiveData, ObjectiveOutput, TokenizedPair
from modsenc.objectives.mexma import MEXMABatch, MEXMAConfig, MEXMAObjective
from modsenc.objectives.registry import build_objective

__all__ = [
    "MEXMABatch",
    "MEXMAConfig",
    "MEXMAObjective",
    "Objective",
    "ObjectiveData",
    "ObjectiveOutput",
    "TokenizedPair",
    "build_objective",
]
