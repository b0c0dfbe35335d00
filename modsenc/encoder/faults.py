"""Whose fault a wrong vector is: the runtime's, or the bundle's (or the backbone's)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from modsenc.modules.bundle import Zoo
from modsenc.modules.modular import ModularBackbone
from modsenc.runtimes import Runtime, load_runtime
from modsenc.utils.errors import IntegrityError, ModsencError, RuntimeFaultError


def non_finite_error(
    runtime: Runtime,
    modular: ModularBackbone,
    zoo: Zoo,
    lang: str | None,
    kinds: frozenset[str],
    token_ids: Sequence[Sequence[int]],
    batch_size: int,
) -> ModsencError:
    """The error for NaN or infinite vectors that ``runtime`` gave for ``token_ids``: the runtime's
    fault when the reference runtime (torch, fp32) gives finite vectors for the same ids (a compiler
    or kernel fault: rebuilding the bundle would not help), else the bundle's or the backbone's.
    Call it with the encoder's lock held."""
    if not runtime.is_reference:
        again = load_runtime("torch", modular, zoo, "fp32").encode_tokens(lang, kinds, token_ids, batch_size)
        if torch.isfinite(again).all():
            return RuntimeFaultError(
                f"the {runtime.name} runtime ({runtime.precision}) produced non-finite embeddings for "
                f"{lang or 'the backbone'} where the torch runtime gives finite ones: the bundle is "
                f"fine; encode with runtime='torch', or clear the runtime's cache "
                f"({runtime.cache_folder() or 'none'}) and report the fault"
            )
    where = f"the {lang} modules in {zoo.bundle_dir(lang)}" if lang else "the backbone"
    return IntegrityError(
        f"{where} produced non-finite embeddings (NaN or inf); the bundle or the backbone "
        f"is damaged: rebuild it with `modsenc add-language {lang or 'LANG'}`"
    )
