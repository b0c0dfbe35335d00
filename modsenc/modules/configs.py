"""The library configs of the per-language modules, as peft and adapters define them.

Each kind's own ``config.py`` (``modsenc/modules/kinds/KIND/config.py``) fills in the paper's
values (Huang et al., 2025, appendix B); this module names them in one place for code outside the
kinds (``finetune``'s LoRA phases, tests).
"""

from __future__ import annotations

from modsenc.modules.kinds.cla.config import alignment_adapter_config
from modsenc.modules.kinds.la.config import ATTENTION_QKV, language_adapter_config
from modsenc.modules.kinds.se.config import ALL_LINEAR, sentence_adapter_config

__all__ = [
    "ALL_LINEAR",
    "ATTENTION_QKV",
    "alignment_adapter_config",
    "language_adapter_config",
    "sentence_adapter_config",
]
