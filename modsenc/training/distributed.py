"""Re-export: the process-group helpers live in ``modsenc.utils.distributed``.

They moved down a layer because the objectives need them and must not import ``training``; this
name stays so code written against ``modsenc.training.distributed`` keeps working.
"""

from modsenc.utils.distributed import DistContext, init_distributed

__all__ = ["DistContext", "init_distributed"]
