"""Training checkpoints without pickle: tensors in safetensors, everything else in JSON.

A checkpoint directory ``step-000100/`` holds ``model.safetensors`` (every trained module),
``state.safetensors`` + ``state.json`` (optimizer, scheduler, RNG, data position). It is written
through ``atomic_directory``: a kill during the write leaves the previous checkpoint intact.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from modsenc.utils.io import atomic_directory

_STEP_DIR = re.compile(r"^step-(\d+)$")
_TENSOR = "__tensor__"


def flatten_state(obj: Any, prefix: str = "") -> tuple[Any, dict[str, torch.Tensor]]:
    """Split a nested state (dicts, lists, tensors, scalars) into a JSON skeleton and named tensors."""
    tensors: dict[str, torch.Tensor] = {}

    def walk(node: Any, path: str) -> Any:
        if isinstance(node, torch.Tensor):
            tensors[path] = node.detach().cpu().contiguous()
            return {_TENSOR: path}
        if isinstance(node, dict):
            return {
                "__dict__": [
                    [walk(k, f"{path}.k{i}"), walk(v, f"{path}.{i}")] for i, (k, v) in enumerate(node.items())
                ]
            }
        if isinstance(node, (list, tuple)):
            return {
                "__list__": [walk(v, f"{path}.{i}") for i, v in enumerate(node)],
                "tuple": isinstance(node, tuple),
            }
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        raise TypeError(f"cannot checkpoint a {type(node).__name__} at {path or 'root'}")

    return walk(obj, prefix or "s"), tensors


def unflatten_state(skeleton: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(skeleton, dict):
        if _TENSOR in skeleton:
            return tensors[skeleton[_TENSOR]]
        if "__dict__" in skeleton:
            return {unflatten_state(k, tensors): unflatten_state(v, tensors) for k, v in skeleton["__dict__"]}
        if "__list__" in skeleton:
            items = [unflatten_state(v, tensors) for v in skeleton["__list__"]]
            return tuple(items) if skeleton.get("tuple") else items
    return skeleton


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "python": list(random.getstate()),
        "numpy": np.random.get_state()[1].astype(np.int64).tolist(),
        "numpy_pos": int(np.random.get_state()[2]),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    np.random.set_state(("MT19937", np.array(state["numpy"], dtype=np.uint32), state["numpy_pos"], 0, 0.0))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(
    run_dir: str | os.PathLike,
    step: int,
    model_state: dict[str, torch.Tensor],
    training_state: dict[str, Any],
    keep: int = 2,
) -> Path:
    """Write ``run_dir/checkpoints/step-NNNNNN`` atomically and keep only the newest ``keep``."""
    root = Path(run_dir) / "checkpoints"
    path = root / f"step-{step:06d}"
    with atomic_directory(path, owner_marker="state.json") as tmp:
        save_file(
            {k: v.detach().cpu().contiguous() for k, v in model_state.items()}, tmp / "model.safetensors"
        )
        skeleton, tensors = flatten_state(training_state)
        save_file(tensors, tmp / "state.safetensors")
        (tmp / "state.json").write_text(json.dumps({"step": step, "state": skeleton}), encoding="utf-8")
    for old in list_checkpoints(run_dir)[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return path


def list_checkpoints(run_dir: str | os.PathLike) -> list[Path]:
    root = Path(run_dir) / "checkpoints"
    if not root.is_dir():
        return []
    found = [
        p for p in root.iterdir() if p.is_dir() and _STEP_DIR.match(p.name) and (p / "state.json").exists()
    ]
    return sorted(found, key=lambda p: int(_STEP_DIR.match(p.name).group(1)))


def latest_checkpoint(run_dir: str | os.PathLike) -> Path | None:
    checkpoints = list_checkpoints(run_dir)
    return checkpoints[-1] if checkpoints else None


def load_checkpoint(path: str | os.PathLike) -> tuple[int, dict[str, torch.Tensor], dict[str, Any]]:
    path = Path(path)
    try:
        meta = json.loads((path / "state.json").read_text(encoding="utf-8"))
        model_state = load_file(path / "model.safetensors")
        tensors = load_file(path / "state.safetensors")
    except (OSError, ValueError) as err:
        raise RuntimeError(
            f"checkpoint {path} is unreadable ({err}); delete it to resume from an older one"
        ) from err
    return int(meta["step"]), model_state, unflatten_state(meta["state"], tensors)
