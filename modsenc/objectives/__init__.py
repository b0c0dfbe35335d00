from modsenc.objectives.base import Objective, ObjectiveOutput, TokenizedPair
from modsenc.objectives.mexma import MEXMABatch, MEXMAConfig, MEXMAObjective, build_objective

__all__ = [
    "MEXMABatch",
    "MEXMAConfig",
    "MEXMAObjective",
    "Objective",
    "ObjectiveOutput",
    "TokenizedPair",
    "build_objective",
]
