"""Tell a local path from a Hugging Face Hub name before anything is loaded, and fail fast offline.

transformers and datasets take any string that is not an existing folder for a hub name and retry
the network for a minute before a long traceback: ``eval runs/typo_zoo`` should instead say "no
such folder" at once. So a name that looks like a path (``./x``, ``/x``, ``~/x``, ``a/b/c``, or
``a/b`` whose ``a`` is a local folder) and does not exist is refused without any network; a hub
name offline (``HF_HUB_OFFLINE=1``) must be in the local cache; online, one short request checks
that the hub answers and knows the name.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from types import MappingProxyType
from typing import Any

HUB_TIMEOUT_S = 5.0
_TRUE = {"1", "ON", "YES", "TRUE"}


def hub_offline() -> bool:
    from huggingface_hub import constants  # noqa: PLC0415 - read at call time, tests set the variable

    return constants.HF_HUB_OFFLINE or os.environ.get("HF_HUB_OFFLINE", "").upper() in _TRUE


def looks_local(name: str) -> bool:
    """True for what can only be a path: a hub name is ``name`` or ``owner/name``."""
    if name.startswith((".", "/", "~")) or "\\" in name or name.endswith("/") or name.count("/") > 1:
        return True
    return "/" in name and Path(name.split("/", 1)[0]).is_dir()


@functools.cache
def _ask_hub(kind: str, name: str) -> str | None:
    """None if the hub knows ``name`` (a model or dataset), else why not (one request, no retries)."""
    from huggingface_hub import constants, get_session  # noqa: PLC0415

    url = f"{constants.ENDPOINT}/api/{kind}s/{name}"
    try:
        response = get_session().head(url, timeout=HUB_TIMEOUT_S, allow_redirects=True)
    except Exception as err:  # requests' connection errors and timeouts, whatever their class
        return (
            f"the Hugging Face Hub could not be reached ({type(err).__name__}, {HUB_TIMEOUT_S:.0f} s "
            "timeout); to use a cached copy set HF_HUB_OFFLINE=1, or pass a local folder"
        )
    if response.status_code in (401, 403, 404):
        return (
            f"no such {kind} on the Hugging Face Hub (HTTP {response.status_code}), nor a local folder; "
            "check the name"
        )
    return None


def check_model_source(name: str, kind: str = "model") -> None:
    """Raise FileNotFoundError/OSError (one line) unless ``name`` is an existing local path, or a hub
    name that is cached (offline) or that the hub knows (online)."""
    if os.path.exists(os.path.expanduser(name)):
        return
    if looks_local(name):
        raise FileNotFoundError(f"{name}: no such folder")
    if hub_offline():
        if kind != "model":
            return  # datasets finds its own cache offline, and fails at once when it is not there
        from huggingface_hub import try_to_load_from_cache  # noqa: PLC0415

        if not isinstance(try_to_load_from_cache(name, "config.json"), str):
            raise OSError(
                f"{name}: not a local folder, and not in the Hugging Face cache (HF_HUB_OFFLINE is set); "
                f"check the name, download it once online (`hf download {name}`), or pass a local folder"
            )
        return
    problem = _ask_hub(kind, name)
    if problem is not None:
        raise OSError(f"{name}: {problem}")


# transformers 4.57.3 to 4.57.6 take any local tokenizer of over 100K pieces whose config.json they
# wrote themselves (e5's, NLLB's, every backbone modsenc saves) for a Mistral one, since the check
# reads only config.json's transformers_version, and warn that it has "an incorrect regex pattern
# ... will lead to incorrect tokenization". Passing the flag as False says it is not one: the
# tokenizer loads exactly as saved, without the false warning.
NOT_MISTRAL = MappingProxyType({"fix_mistral_regex": False})  # read-only: callers copy it


def load_tokenizer(name_or_path: str | Path) -> Any:
    """``AutoTokenizer.from_pretrained(name_or_path)`` without the false Mistral warning."""
    from transformers import AutoTokenizer  # noqa: PLC0415 - transformers loads on first use

    return AutoTokenizer.from_pretrained(name_or_path, **NOT_MISTRAL)
