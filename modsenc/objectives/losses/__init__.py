from modsenc.objectives.losses.cross_unmasking import IGNORE_INDEX, CrossUnmaskingHead
from modsenc.objectives.losses.distillation import DistillationLoss, distillation_targets
from modsenc.objectives.losses.infonce_alignment import InfoNCEAlignmentLoss
from modsenc.objectives.losses.koleo import KoLeoLoss
from modsenc.objectives.losses.mse_alignment import MSEAlignmentLoss

__all__ = [
    "IGNORE_INDEX",
    "CrossUnmaskingHead",
    "DistillationLoss",
    "InfoNCEAlignmentLoss",
    "KoLeoLoss",
    "MSEAlignmentLoss",
    "distillation_targets",
]
