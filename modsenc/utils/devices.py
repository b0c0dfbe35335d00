"""Check a device name against what this torch build has, before any model loads.

``torch.device("tpu")`` fails with a list of twenty device types modsenc cannot run on, and
``torch.device("cuda")`` on a CPU-only build parses fine and fails only when the first tensor
moves, after the zoo has loaded, as a traceback. :func:`check_device` turns both into one line
that names the option and says what to use instead.
"""

from __future__ import annotations

import torch

# The device types modsenc runs on: torch parses more (xla, meta, hpu, ...), but "meta" would give
# empty tensors and the others have no code path here (autocast, packing) that was ever run on them.
DEVICE_TYPES = ("cpu", "cuda", "mps")
VALID_FORMS = "auto, cpu, cuda, cuda:N or mps"


def _use_cpu(option: str) -> str:
    """How to ask for the CPU, in the words of the caller: a CLI option, a recipe key (with a dot,
    e.g. training.device, set from the command line with --set) or a Python argument."""
    if option.startswith("--"):
        return f"use {option} cpu"
    return f"use --set {option}=cpu" if "." in option else f"use {option}='cpu'"


def check_device(
    name: str | torch.device | None, option: str = "device", available: bool = True
) -> torch.device:
    """The torch device ``name`` stands for: None or ``"auto"`` is the first CUDA device when
    there is one, else the CPU. Raise ValueError (one line naming ``option``) for a name torch does
    not parse or modsenc does not run on, and, with ``available``, for a CUDA or MPS device this
    machine does not have (``available=False``: the device is checked where it will be used, e.g.
    on the workers of a remote Ray cluster)."""
    if name is None or name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError, TypeError):
        device = None
    if device is None or device.type not in DEVICE_TYPES:
        raise ValueError(f"{option} {name}: not a device modsenc can run on; use {VALID_FORMS}")
    if not available:
        return device
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ValueError(f"{option} {name}: torch here has no CUDA device; {_use_cpu(option)}")
        if device.index is not None and device.index >= count:
            last = f"cuda:0 to cuda:{count - 1}" if count > 1 else "cuda:0"
            raise ValueError(f"{option} {name}: torch here has {count} CUDA device(s) ({last})")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"{option} {name}: torch here has no MPS device (Apple GPU); {_use_cpu(option)}")
    return device
