"""Where the forward passes run, behind one interface (``Runtime``): torch or OpenVINO.

``load_runtime`` picks one when the encoder is built (as sentence-transformers picks its backend
when the model loads); nothing downstream asks which it is. The encoder hands a runtime token ids
of one language and mode, and gets float32 sentence vectors back.
"""

from modsenc.runtimes.base import RUNTIMES, Runtime
from modsenc.runtimes.load import RUNTIME_CHOICES, check_runtime, load_runtime

__all__ = ["RUNTIMES", "RUNTIME_CHOICES", "Runtime", "check_runtime", "load_runtime"]
