"""Zoos and bundles on the Hugging Face Hub, through ``huggingface_hub`` itself.

``resolve_zoo`` turns what a user passes to ``from_pretrained`` into a local folder: None is the
default zoo (``modsenc.modules.defaults``), an existing path is itself, and ``org/name`` is
downloaded with ``snapshot_download`` (``revision=``, the HF cache, ``HF_HUB_OFFLINE=1`` reading
the cache alone, ``HF_ENDPOINT`` for a mirror). This module imports nothing heavy: the CLI
resolves ``--zoo org/name`` with it before any model loads. ``push_zoo`` packs a zoo (no backbone when it is
rebuildable, fp16 weights by default) with a model card and uploads it with ``HfApi.upload_folder``.
``download_bundle`` fetches a single-language bundle repo for ``modsenc zoo install``.
"""

from __future__ import annotations

import os
from pathlib import Path

from modsenc.modules.defaults import default_zoo
from modsenc.utils.hub import hub_offline, looks_local
from modsenc.utils.outputs import BUNDLE_MANIFEST, ZOO_INDEX


def is_repo_id(name: str) -> bool:
    """``owner/name`` that is not a local path (what the Hub calls a repo id)."""
    return name.count("/") == 1 and not looks_local(name) and not os.path.exists(name)


def download(repo_id: str, revision: str | None = None) -> Path:
    """The snapshot of ``repo_id`` at ``revision`` in the HF cache (downloaded when online)."""
    from huggingface_hub import snapshot_download  # noqa: PLC0415 - the hub client loads on first use
    from huggingface_hub.errors import (  # noqa: PLC0415
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    try:
        return Path(snapshot_download(repo_id, revision=revision))
    except LocalEntryNotFoundError as err:
        state = "HF_HUB_OFFLINE is set" if hub_offline() else "the Hub could not be reached"
        raise FileNotFoundError(
            f"{repo_id}: not a local folder, and not in the Hugging Face cache ({state}); download it "
            "once online, or pass a local zoo folder"
        ) from err
    except (RepositoryNotFoundError, RevisionNotFoundError) as err:
        what = f"revision {revision!r} of " if isinstance(err, RevisionNotFoundError) else ""
        raise FileNotFoundError(f"no {what}{repo_id} on the Hugging Face Hub (nor a local folder)") from err


def resolve_zoo(path: str | os.PathLike | None, revision: str | None = None) -> Path:
    """The local folder of the zoo ``path`` names (see the module docstring)."""
    if path is None:
        return Path(default_zoo())
    name = str(path)
    if not is_repo_id(name):
        if revision is not None:
            raise ValueError(f"revision= is for a Hub repo id; {name} is a local folder")
        return Path(name)
    folder = download(name, revision)
    if not (folder / ZOO_INDEX).is_file():
        if (folder / BUNDLE_MANIFEST).is_file():
            raise ValueError(
                f"{name} is a single-language bundle, not a zoo: install it into a zoo with "
                f"`modsenc zoo install {name} --zoo ZOO`"
            )
        raise ValueError(f"{name} on the Hub is not a modsenc zoo (no {ZOO_INDEX})")
    return folder


def download_bundle(name: str, revision: str | None = None) -> Path:
    """A bundle folder: a local path as is, or a Hub repo holding one bundle at its root."""
    folder = download(name, revision) if is_repo_id(name) else Path(name)
    if not (folder / BUNDLE_MANIFEST).is_file():
        raise FileNotFoundError(f"{name} is not a modsenc bundle (no {BUNDLE_MANIFEST})")
    return folder


def push_zoo(
    zoo_dir: str | os.PathLike,
    repo_id: str,
    private: bool = False,
    revision: str | None = None,
    weights: str = "fp16",
    commit_message: str | None = None,
) -> str:
    """Pack ``zoo_dir`` with a model card and upload it to ``repo_id`` (created if missing);
    returns the commit URL. The token is huggingface_hub's (``HF_TOKEN`` or ``hf auth login``)."""
    from huggingface_hub import HfApi  # noqa: PLC0415

    from modsenc.modules.distribution import staged_for_upload  # noqa: PLC0415 - torch loads here

    if not is_repo_id(repo_id):
        raise ValueError(f"{repo_id!r} is not a Hub repo id (owner/name)")
    if hub_offline():
        raise OSError("HF_HUB_OFFLINE is set: pushing needs the Hub; unset it")
    with staged_for_upload(zoo_dir, repo_id, weights) as staging:
        api = HfApi()
        api.create_repo(repo_id, private=private, exist_ok=True)
        info = api.upload_folder(
            folder_path=str(Path(staging) / "zoo"),
            repo_id=repo_id,
            revision=revision,
            commit_message=commit_message or f"modsenc zoo: {', '.join(sorted(_languages(zoo_dir)))}",
        )
    return str(getattr(info, "commit_url", info))


def _languages(zoo_dir: str | os.PathLike) -> list[str]:
    from modsenc.modules.bundle import Zoo  # noqa: PLC0415

    return Zoo(zoo_dir).languages()
