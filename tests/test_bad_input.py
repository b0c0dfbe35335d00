"""The bad-input table: hostile or broken inputs to every command, each with the exit code, a fragment
of the one-line message, and the files and folders that must be byte-identical afterwards.

Classes covered (issue 13): never deleting what modsenc did not create, bundle integrity, concurrent
writers (a separate test: it needs two processes), and one-line errors for malformed inputs.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file, save_file

from modsenc.cli import main
from modsenc.data.demo import demo_path
from modsenc.data.readers import read_parallel_tsv
from modsenc.encoder import ModularEncoder
from modsenc.modules.bundle import BUNDLE_MANIFEST, HASHES_KEY, BundleIntegrityError
from modsenc.modules.manifest import BundleManifest
from modsenc.utils.io import file_sha256
from tests._zoo import HELD_OUT, write_sts

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------------------- helpers
def snapshot(paths: list[Path]) -> dict[str, str | None]:
    """Every file (sha256) and folder under ``paths``; None for a path that does not exist."""
    state: dict[str, str | None] = {}
    for root in paths:
        if not root.exists():
            state[str(root)] = None
            continue
        for path in [root, *sorted(root.rglob("*"))] if root.is_dir() else [root]:
            state[str(path)] = "folder" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return state


@dataclass
class Env:
    """One case's sandbox: ``tmp`` for its files, ``zoo`` a private copy of the test zoo (if asked
    for) or a fake zoo folder, ``backbone`` the tiny backbone."""

    tmp: Path
    zoo: Path
    backbone: Path

    def write(self, name: str, content: str | bytes) -> Path:
        path = self.tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        return path


@dataclass
class Case:
    id: str
    args: Callable[[Env], list[str]]
    code: int
    message: str
    untouched: Callable[[Env], list[Path]] = lambda env: []
    setup: Callable[[Env], None] = lambda env: None
    real_zoo: bool = False  # a copy of the trained test zoo (else a fake zoo folder)
    stdin: bytes | None = None
    absent: Callable[[Env], list[Path]] = lambda env: []  # outputs that must not appear
    not_in_message: list[str] = field(default_factory=list)
    environ: dict[str, str] = field(default_factory=dict)


def _user_folder(env: Env, name: str = "mine") -> Path:
    folder = env.tmp / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "thesis.txt").write_text("years of work\n", encoding="utf-8")
    (folder / "data").mkdir(exist_ok=True)
    (folder / "data" / "notes.md").write_text("keep me\n", encoding="utf-8")
    return folder


def _owned_work_dir(env: Env) -> Path:
    """A work dir an earlier add-language run created (marker and a finished stage's key)."""
    work = env.tmp / "work"
    (work / "vocab").mkdir(parents=True)
    (work / "modsenc_add_language.json").write_text('{"command": "add-language"}\n')
    (work / "vocab" / "key.json").write_text('{"key": "abc"}\n')
    return work


def _fake_zoo(index: str) -> Callable[[Env], None]:
    def setup(env: Env) -> None:
        (env.zoo / "backbone").mkdir(parents=True)
        (env.zoo / "index.json").write_text(index)

    return setup


def _damage(change: Callable[[Path], None], rehash: bool = False) -> Callable[[Env], None]:
    """Apply ``change`` to the uz bundle of the zoo copy; ``rehash`` updates the manifest's hashes
    (a file that is internally broken but listed with its current hash)."""

    def setup(env: Env) -> None:
        bundle = env.zoo / "uz"
        change(bundle)
        if rehash:
            manifest_path = bundle / BUNDLE_MANIFEST
            manifest = json.loads(manifest_path.read_text())
            manifest[HASHES_KEY] = {name: file_sha256(bundle / name) for name in manifest[HASHES_KEY]}
            manifest_path.write_text(json.dumps(manifest))

    return setup


def _flip_byte(bundle: Path) -> None:
    path = bundle / "embeddings.safetensors"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _truncate(bundle: Path) -> None:
    path = bundle / "embeddings.safetensors"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _nan_embeddings(bundle: Path) -> None:
    path = bundle / "embeddings.safetensors"
    weight = load_file(path)["weight"]
    weight[5, 3] = float("nan")
    save_file({"weight": weight}, path)


def _pickled_adapter(bundle: Path) -> None:
    adapter = bundle / "la"
    state = load_file(adapter / "adapter_model.safetensors")
    (adapter / "adapter_model.safetensors").unlink()
    torch.save(state, adapter / "adapter_model.bin")


def _encode(env: Env, *extra: str) -> list[str]:
    return [
        "encode",
        "--zoo",
        str(env.zoo),
        "--lang",
        "uz",
        "--input",
        str(env.write("in.txt", "\n".join(HELD_OUT["uz"]) + "\n")),
        "--output",
        str(env.tmp / "out.npy"),
        *extra,
    ]


def _edit_json(relative: str, change: Callable[[dict], None]) -> Callable[[Env], None]:
    """Setup: apply ``change`` to the JSON file ``relative`` of the zoo copy."""

    def setup(env: Env) -> None:
        path = env.zoo / relative
        data = json.loads(path.read_text())
        change(data)
        path.write_text(json.dumps(data))

    return setup


def _swap_pivot(index: dict) -> None:
    index["languages"]["en"]["is_pivot"], index["languages"]["uz"]["is_pivot"] = False, True


def _fewer_layers(config: dict) -> None:
    config["num_hidden_layers"] = 1


def _link_uz_to_kk(env: Env) -> None:
    shutil.rmtree(env.zoo / "uz")
    (env.zoo / "uz").symlink_to(env.zoo / "kk", target_is_directory=True)


def _hash_a_path_outside(bundle: Path) -> None:
    """The uz manifest vouches for English's router profile: a path outside the bundle."""
    path = bundle / BUNDLE_MANIFEST
    manifest = json.loads(path.read_text())
    manifest[HASHES_KEY]["../en/langid.json"] = file_sha256(bundle.parent / "en" / "langid.json")
    path.write_text(json.dumps(manifest))


def _mean_pooling(manifest: dict) -> None:
    manifest["pooling"] = "mean"


def _passage_prefix(manifest: dict) -> None:
    manifest["prefix"] = "passage: "


def _other_backbone_in_index(index: dict) -> None:
    index["backbone"]["fingerprint"] = "0" * 64


def _future_index_format(index: dict) -> None:
    index["format"] = "modsenc-zoo/9"


def _model_folder(env: Env) -> None:
    (env.tmp / "export").mkdir()
    (env.tmp / "export" / "config.json").write_text('{"model_type": "bert"}\n')


def _truncate_backbone(env: Env) -> None:
    path = env.zoo / "backbone" / "model.safetensors"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _sts_file(env: Env) -> Path:
    return write_sts(
        env.tmp / "sts.tsv", [("en", "uz", "Hi", "Salom", 4.5), ("en", "uz", "Bye", "Xayr", 4.0)]
    )


def _finetune(env: Env, *extra: str) -> list[str]:
    return [
        "finetune",
        "--backbone",
        str(env.backbone),
        "--set",
        "languages=[uz]",
        "--set",
        f"data.paraphrase=[{demo_path('paraphrase.tsv')}]",
        "--set",
        "data.dev_pairs=0",
        *extra,
    ]


def _three_uz_sentences() -> str:
    return "\n".join(read_parallel_tsv(demo_path("parallel.tsv")).columns["uz"][:3]) + "\n"


def _missing_cuda() -> tuple[str, str]:
    """A CUDA device this torch does not have, and the message for it: plain ``cuda`` on a CPU-only
    build (this machine), the first index past the last GPU where there are GPUs."""
    if not torch.cuda.is_available():
        return "cuda", "--device cuda: torch here has no CUDA device; use --device cpu"
    count = torch.cuda.device_count()
    return f"cuda:{count}", f"--device cuda:{count}: torch here has {count} CUDA device(s)"


_MISSING_CUDA = _missing_cuda()
MISTYPED_MODEL = "facebok/nllb-200-distiled-600M"  # facebook/nllb-200-distilled-600M, mistyped


def _synthesize(env: Env, model: str) -> list[str]:
    pairs = env.write("pairs.tsv", "lang\tanchor\tpositive\nen\tHi\tHello\n")
    return ["synthesize", str(pairs), "--lang", "uz", "--output", str(env.tmp / "out.tsv"), "--model", model]


def _synthesize_outputs(env: Env) -> list[Path]:
    return [env.tmp / name for name in ("out.tsv", "out.tsv.cache.jsonl", "out.tsv.report.json")]


# ----------------------------------------------------------------------------------------- issue 50
def _pack(env: Env, target: Path | str, *extra: str) -> list[str]:
    return ["zoo", "pack", str(env.zoo), str(target), "--weights", "fp32", *extra]


def _earlier_pack(env: Env) -> None:
    """``packed/``: a pack of the zoo's en bundle, with a file the user added since."""
    assert CliRunner().invoke(main, _pack(env, env.tmp / "packed", "--languages", "en")).exit_code == 0
    (env.tmp / "packed" / "NOTES.md").write_text("my notes on this pack\n", encoding="utf-8")


def _source_bundle(env: Env, change: Callable[[dict], None], identity: str = "recompute") -> None:
    """``src/uz``: a copy of the zoo's uz bundle with its manifest changed by ``change``; its
    identity_sha256 ``recompute``d (an honest bundle that says so), ``keep``t (an edited label) or
    ``drop``ped (a bundle of the format before identity_sha256)."""
    source = env.tmp / "src" / "uz"
    shutil.copytree(env.zoo / "uz", source)
    path = source / BUNDLE_MANIFEST
    manifest = json.loads(path.read_text())
    change(manifest)
    if identity == "drop":
        del manifest["identity_sha256"]
    elif identity == "recompute":
        manifest["identity_sha256"] = BundleManifest.from_dict(manifest).identity()
    path.write_text(json.dumps(manifest))


def _relabel_kk(manifest: dict) -> None:
    manifest["language"] = "kk"


def _claim_pivot(manifest: dict) -> None:
    manifest["is_pivot"] = True


def _install(env: Env, *extra: str) -> list[str]:
    return ["zoo", "install", str(env.tmp / "src" / "uz"), "--zoo", str(env.zoo), *extra]


def _encode_auto(env: Env) -> list[str]:
    """encode with every line routed by the zoo's router (no --lang)."""
    return ["encode", "--zoo", str(env.zoo), "--output", str(env.tmp / "out.npy")]


def _kk_profile_in_uz(bundle: Path) -> None:
    shutil.copy2(bundle.parent / "kk" / "langid.json", bundle / "langid.json")


def _no_orthography(manifest: dict) -> None:
    manifest["orthography"] = {"name": "none"}


def _uz_is_pivot(manifest: dict) -> None:
    manifest["is_pivot"] = True


_UZ_STDIN = ("\n".join(HELD_OUT["uz"]) + "\n").encode()


def _scale_job(env: Env) -> None:
    env.write("job/manifest.json", json.dumps({"job": {"kind": "modsenc-scale-encode"}, "status": "done"}))


def _add_language(env: Env, *extra: str) -> list[str]:
    return ["add-language", "en", "--stages", "se", *extra]


CASES = [
    # ---- issue 50: --calibration where nothing reads it (the torch runtime, or no int8)
    Case(
        "encode-calibration-on-the-torch-runtime",
        lambda env: [
            "encode",
            "--zoo",
            str(env.zoo),
            "--lang",
            "uz",
            "--runtime",
            "torch",
            "--quantize",
            "int8",
            "--calibration",
            str(env.write("calibration.txt", "Salom.\n")),
            "--output",
            str(env.tmp / "o.npy"),
        ],
        1,
        "calibration sentences are read only by runtime='openvino' with quantize='int8' or 'int8-mixed'; "
        "here runtime is 'torch'",
        absent=lambda env: [env.tmp / "o.npy"],
        real_zoo=True,
    ),
    # ---- 1. never delete what modsenc did not create
    Case(
        "export-into-a-user-folder",
        lambda env: ["export", "--zoo", str(env.zoo), "--lang", "uz", "--output", str(_user_folder(env))],
        1,
        "non-empty folder that modsenc did not write",
        untouched=lambda env: [env.tmp / "mine", env.zoo],
        real_zoo=True,
    ),
    Case(
        "export-into-a-bundle-of-the-zoo",
        lambda env: ["export", "--zoo", str(env.zoo), "--lang", "uz", "--output", str(env.zoo / "uz")],
        1,
        "is inside the zoo",
        untouched=lambda env: [env.zoo],
        real_zoo=True,
    ),
    Case(
        "export-onto-the-zoo-itself",
        lambda env: ["export", "--zoo", str(env.zoo), "--lang", "uz", "--output", str(env.zoo)],
        1,
        "is inside the zoo",
        untouched=lambda env: [env.zoo],
        real_zoo=True,
    ),
    Case(
        "export-onto-a-folder-holding-the-zoo",
        lambda env: ["export", "--zoo", str(env.zoo), "--lang", "uz", "--output", str(env.zoo.parent)],
        1,
        "(or contains it)",
        untouched=lambda env: [env.zoo.parent],
        real_zoo=True,
    ),
    Case(
        "add-language-overwrite-a-user-folder",
        lambda env: [
            "add-language",
            "uz",
            "--zoo",
            str(env.tmp / "z"),
            "--work-dir",
            str(_user_folder(env)),
            "--overwrite",
            "--stages",
            "vocab,la",
        ],
        1,
        "non-empty folder that add-language did not create",
        untouched=lambda env: [env.tmp / "mine"],
        absent=lambda env: [env.tmp / "z"],
    ),
    Case(
        "add-language-overwrite-with-a-missing-input",
        lambda env: [
            "add-language",
            "uz",
            "--zoo",
            str(env.tmp / "z"),
            "--work-dir",
            str(_owned_work_dir(env)),
            "--overwrite",
            "--stages",
            "vocab,la",
            "--mono",
            str(env.tmp / "missing.txt"),
        ],
        1,
        "missing.txt: no such file",
        untouched=lambda env: [env.tmp / "work"],
        absent=lambda env: [env.tmp / "z"],
    ),
    Case(
        "add-language-work-dir-is-the-zoo",
        lambda env: [
            "add-language",
            "uz",
            "--zoo",
            str(env.zoo),
            "--work-dir",
            str(env.zoo),
            "--overwrite",
            "--replace",
            "--stages",
            "vocab,la",
        ],
        1,
        "--work-dir",
        untouched=lambda env: [env.zoo],
        real_zoo=True,
    ),
    Case(
        "finetune-over-a-user-folder-named-like-a-phase",
        lambda env: [
            "finetune",
            "--backbone",
            str(env.backbone),
            "--output",
            str(env.tmp / "out"),
            "--set",
            "languages=[uz]",
            "--set",
            f"data.paraphrase=[{demo_path('paraphrase.tsv')}]",
            "--set",
            "data.dev_pairs=0",
        ],
        1,
        "non-empty folder that finetune did not create",
        setup=lambda env: _user_folder(env, "out/m") and None,
        untouched=lambda env: [env.tmp / "out"],
    ),
    Case(
        "train-backbone-over-a-user-folder-named-backbone",
        lambda env: ["train-backbone", "--output", str(env.tmp / "out"), "--max-steps", "1"],
        1,
        "out/backbone is a non-empty folder that modsenc did not write",
        setup=lambda env: _user_folder(env, "out/backbone") and None,
        untouched=lambda env: [env.tmp / "out"],
    ),
    # ---- 2. bundle integrity
    Case(
        "encode-with-a-corrupted-bundle-file",
        _encode,
        1,
        "embeddings.safetensors is damaged",
        setup=_damage(_flip_byte),
        real_zoo=True,
        untouched=lambda env: [env.zoo],
        absent=lambda env: [env.tmp / "out.npy"],
    ),
    Case(
        "encode-with-a-truncated-bundle-file-unverified",
        lambda env: _encode(env, "--no-verify"),
        1,
        "embeddings.safetensors: cannot be loaded",
        setup=_damage(_truncate),
        real_zoo=True,
        untouched=lambda env: [env.zoo],
        absent=lambda env: [env.tmp / "out.npy"],
    ),
    Case(
        "encode-with-nan-weights-listed-with-their-hash",
        _encode,
        1,
        "embeddings.safetensors: holds NaN or infinite weights",
        setup=_damage(_nan_embeddings, rehash=True),
        real_zoo=True,
        untouched=lambda env: [env.zoo],
        absent=lambda env: [env.tmp / "out.npy"],
    ),
    Case(
        "encode-with-a-pickled-adapter-unverified",
        lambda env: _encode(env, "--no-verify"),
        1,
        "never from pickles",
        setup=_damage(_pickled_adapter),
        real_zoo=True,
        untouched=lambda env: [env.zoo],
        absent=lambda env: [env.tmp / "out.npy"],
    ),
    Case(
        "encode-with-a-pickled-adapter",
        _encode,
        1,
        "adapter_model.safetensors is missing from the bundle",
        setup=_damage(_pickled_adapter),
        real_zoo=True,
        untouched=lambda env: [env.zoo],
        absent=lambda env: [env.tmp / "out.npy"],
    ),
    # ---- 4. one-line errors
    Case(
        "encode-with-an-index-that-is-a-list",
        lambda env: ["encode", "--zoo", str(env.zoo), "--output", str(env.tmp / "o.npy")],
        1,
        "index.json is not a modsenc zoo index (expected a JSON object with a 'languages' mapping, "
        "found list)",
        setup=_fake_zoo("[]"),
        stdin=b"Salom\n",
        untouched=lambda env: [env.zoo],
    ),
    Case(
        "zoo-list-with-an-empty-index",
        lambda env: ["zoo", "list", "--zoo", str(env.zoo)],
        1,
        "found keys []",
        setup=_fake_zoo("{}"),
        untouched=lambda env: [env.zoo],
    ),
    Case(
        "zoo-info-with-a-manifest-that-is-a-list",
        lambda env: ["zoo", "info", "uz", "--zoo", str(env.zoo)],
        1,
        "modsenc_bundle.json is not a bundle manifest",
        setup=lambda env: env.write("zoo/uz/modsenc_bundle.json", "[]") and None,
        untouched=lambda env: [env.zoo],
    ),
    Case(
        "encode-output-inside-the-zoo",
        lambda env: [
            "encode",
            "--zoo",
            str(env.zoo),
            "--lang",
            "uz",
            "--output",
            str(env.zoo / "uz" / "v.npy"),
        ],
        1,
        "--output",
        stdin=b"Salom\n",
        real_zoo=True,
        untouched=lambda env: [env.zoo],
    ),
    Case(
        "encode-stdin-with-invalid-utf8",
        lambda env: ["encode", "--zoo", str(env.zoo), "--lang", "uz", "--output", str(env.tmp / "o.npy")],
        1,
        "standard input, line 2: not valid UTF-8",
        stdin=b"Salom\n\xff\xfe dunyo\n",
        real_zoo=True,
        absent=lambda env: [env.tmp / "o.npy"],
        not_in_message=["stdin.txt"],
    ),
    Case(
        "encode-a-language-not-installed-keeps-its-quotes",
        lambda env: ["encode", "--zoo", str(env.zoo), "--lang", "fr", "--output", str(env.tmp / "o.npy")],
        1,
        "language 'fr' is not installed",
        stdin=b"Bonjour\n",
        real_zoo=True,
        absent=lambda env: [env.tmp / "o.npy"],
    ),
    Case(
        "encode-batch-size-zero",
        lambda env: [
            "encode",
            "--zoo",
            str(env.zoo),
            "--output",
            str(env.tmp / "o.npy"),
            "--batch-size",
            "0",
        ],
        2,
        "--batch-size",
    ),
    Case(
        "mine-an-empty-file",
        lambda env: [
            "mine",
            str(env.write("src.txt", "")),
            str(env.write("tgt.txt", "Salom\n")),
            "--zoo",
            str(env.zoo),
            "--output",
            str(env.tmp / "pairs.tsv"),
        ],
        1,
        "src.txt: no non-blank lines",
        untouched=lambda env: [env.tmp / "src.txt", env.tmp / "tgt.txt"],
        absent=lambda env: [env.tmp / "pairs.tsv"],
    ),
    Case(
        "mine-a-blank-only-file",
        lambda env: [
            "mine",
            str(env.write("src.txt", "Hello\n")),
            str(env.write("tgt.txt", "  \n\t\n\n")),
            "--zoo",
            str(env.zoo),
            "--output",
            str(env.tmp / "pairs.tsv"),
        ],
        1,
        "tgt.txt: no non-blank lines",
        absent=lambda env: [env.tmp / "pairs.tsv"],
    ),
    Case(
        "eval-a-one-row-sts-file",
        lambda env: [
            "eval",
            str(env.backbone),
            "--sts",
            str(env.write("sts.tsv", "lang1\tlang2\tsentence1\tsentence2\tscore\nen\tuz\tHi\tSalom\t4.5\n")),
        ],
        1,
        "sts.tsv: en-uz has 1 scored pair; a Spearman correlation needs at least 2",
        untouched=lambda env: [env.tmp / "sts.tsv"],
    ),
    Case(
        "eval-a-one-column-bitext",
        lambda env: ["eval", str(env.backbone), "--bitext", str(env.write("bi.tsv", "en\nHello\nBye\n"))],
        1,
        "bi.tsv: has the language columns ['en']; bitext mining needs the pivot 'en' and at least one other",
    ),
    Case(
        "add-language-vocab-stage-on-three-sentences",
        lambda env: [
            "add-language",
            "uz",
            "--backbone",
            str(env.backbone),
            "--zoo",
            str(env.tmp / "z"),
            "--work-dir",
            str(env.tmp / "w"),
            "--recipe",
            "add-language",  # the demo recipe: no per-language mono files beside the three sentences
            "--stages",
            "vocab",
            "--mono",
            str(env.write("uz.txt", _three_uz_sentences())),
            "--set",
            "vocab.fasttext_min_count=10",
        ],
        1,
        "FOCUS could not initialise the",
        untouched=lambda env: [env.tmp / "uz.txt"],
        # the 800 MB fastText model FOCUS trained before failing is not left behind
        absent=lambda env: sorted((env.tmp / "w").rglob("*.bin")),
    ),
    # ---- issue 23, 1. one output guard for every command that writes
    Case(
        "encode-output-is-the-input",
        lambda env: [
            "encode",
            "--zoo",
            str(env.zoo),
            "--lang",
            "uz",
            "--input",
            str(env.tmp / "n.jsonl"),
            "--output",
            str(env.tmp / "n.jsonl"),
        ],
        1,
        "is (or holds) the input",
        setup=lambda env: env.write("n.jsonl", "Salom\n") and None,
        untouched=lambda env: [env.tmp],
    ),
    Case(
        "encode-onto-an-existing-file-without-overwrite",
        lambda env: _encode(env),
        1,
        "out.npy exists; pass --overwrite to replace it",
        setup=lambda env: env.write("out.npy", b"my matrix") and None,
        untouched=lambda env: [env.tmp / "out.npy"],
    ),
    Case(
        "encode-onto-a-fifo",
        lambda env: _encode(env, "--overwrite"),
        1,
        "is not a regular file (a FIFO, socket or device)",
        setup=lambda env: os.mkfifo(env.tmp / "out.npy"),
    ),
    Case(
        "mine-output-is-the-source",
        lambda env: [
            "mine",
            str(env.write("src.txt", "Hello\n")),
            str(env.write("tgt.txt", "Salom\n")),
            "--zoo",
            str(env.zoo),
            "--output",
            str(env.tmp / "src.txt"),
            "--overwrite",
        ],
        1,
        "is (or holds) the input",
        untouched=lambda env: [env.tmp / "src.txt", env.tmp / "tgt.txt"],
    ),
    Case(
        "eval-markdown-onto-the-bitext",
        lambda env: [
            "eval",
            str(env.backbone),
            "--bitext",
            str(env.write("bi.tsv", "en\tuz\nHi\tSalom\n")),
            "--markdown",
            str(env.tmp / "bi.tsv"),
            "--overwrite",
        ],
        1,
        "is (or holds) the input",
        untouched=lambda env: [env.tmp / "bi.tsv"],
    ),
    Case(
        "eval-json-onto-the-zoo-index",
        lambda env: [
            "eval",
            str(env.backbone),
            "--sts",
            str(_sts_file(env)),
            "--json",
            str(env.zoo / "index.json"),
            "--overwrite",
        ],
        1,
        "is inside the zoo",
        real_zoo=True,
        untouched=lambda env: [env.zoo],
    ),
    Case(
        "train-backbone-output-is-a-zoo",
        lambda env: ["train-backbone", "--output", str(env.zoo), "--max-steps", "1", "--overwrite"],
        1,
        "is inside the zoo",
        real_zoo=True,
        untouched=lambda env: [env.zoo],
    ),
    Case(
        "import-backbone-over-the-zoo-backbone",
        lambda env: ["import-backbone", "--output", str(env.zoo / "backbone"), "--overwrite"],
        1,
        "is inside the zoo",
        real_zoo=True,
        untouched=lambda env: [env.zoo],
    ),
    Case(
        "finetune-output-is-a-bundle",
        lambda env: _finetune(env, "--output", str(env.zoo / "uz")),
        1,
        "is the bundle",
        real_zoo=True,
        untouched=lambda env: [env.zoo],
    ),
    # ---- issue 23, 2. tampering that changes vectors is refused
    Case(
        "encode-with-an-edited-backbone-config",
        _encode,
        1,
        "config.json is damaged or was edited",
        setup=_edit_json("backbone/config.json", _fewer_layers),
        real_zoo=True,
        untouched=lambda env: [env.zoo],
        absent=lambda env: [env.tmp / "out.npy"],
    ),
    Case(
        "encode-with-a-bundle-linked-to-another-language",
        _encode,
        1,
        "is the bundle of 'kk', not of 'uz'",
        setup=_link_uz_to_kk,
        real_zoo=True,
        absent=lambda env: [env.tmp / "out.npy"],
    ),
    Case(
        "encode-with-the-pivot-swapped-in-the-index",
        _encode,
        1,
        "en's is_pivot is False but its bundle manifest says True",
        setup=_edit_json("index.json", _swap_pivot),
        real_zoo=True,
        untouched=lambda env: [env.zoo],
        absent=lambda env: [env.tmp / "out.npy"],
    ),
    Case(
        "encode-with-the-hashes-deleted",
        _encode,
        1,
        "lists no file hashes (file_sha256)",
        setup=_edit_json("uz/modsenc_bundle.json", lambda m: m.pop(HASHES_KEY)),
        real_zoo=True,
        untouched=lambda env: [env.zoo],
        absent=lambda env: [env.tmp / "out.npy"],
    ),
    Case(
        "encode-with-an-unknown-bundle-format",
        _encode,
        1,
        "unknown format 'modsenc-bundle/99'; this modsenc reads modsenc-bundle/1",
        setup=_edit_json("uz/modsenc_bundle.json", lambda m: m.update(format="modsenc-bundle/99")),
        real_zoo=True,
        untouched=lambda env: [env.zoo],
    ),
    Case(
        "encode-with-truncated-backbone-weights",
        _encode,
        1,
        "model.safetensors is damaged or was edited",
        setup=_truncate_backbone,
        real_zoo=True,
        untouched=lambda env: [env.zoo],
    ),
    Case(
        "encode-with-truncated-backbone-weights-unverified",
        lambda env: _encode(env, "--no-verify"),
        1,
        "model.safetensors: cannot be loaded",
        setup=_truncate_backbone,
        real_zoo=True,
        untouched=lambda env: [env.zoo],
    ),
    # ---- issue 23, 3. arguments
    Case(
        "add-language-negative-max-steps",
        lambda env: [
            "add-language",
            "uz",
            "--zoo",
            str(env.zoo),
            "--work-dir",
            str(env.tmp / "w"),
            "--replace",
            "--set",
            "se.max_steps=-5",
        ],
        1,
        "recipe key 'se.max_steps' must be positive, got -5",
        real_zoo=True,
        untouched=lambda env: [env.zoo],
        absent=lambda env: [env.tmp / "w"],
    ),
    Case(
        "finetune-epochs-and-max-steps",
        lambda env: _finetune(env, "--output", str(env.tmp / "ft"), "--set", "mono.max_steps=1"),
        1,
        "'mono.epochs' (4.0) and 'mono.max_steps' (1) are both set",
        absent=lambda env: [env.tmp / "ft"],
    ),
    Case(
        "eval-a-mistyped-local-path",
        lambda env: ["eval", str(env.tmp / "typo_zoo"), "--sts", str(_sts_file(env))],
        1,
        "typo_zoo: no such folder",
    ),
    Case(
        "eval-a-hub-name-offline",
        lambda env: ["eval", "nobody-here/no-such-model", "--sts", str(_sts_file(env))],
        1,
        "not in the Hugging Face cache (HF_HUB_OFFLINE is set)",
        environ={"HF_HUB_OFFLINE": "1"},
    ),
    Case(
        "eval-a-folder-that-is-no-model",
        lambda env: ["eval", str(_user_folder(env)), "--sts", str(_sts_file(env))],
        1,
        "is not a model folder",
        untouched=lambda env: [env.tmp / "mine"],
    ),
    Case(
        "eval-a-bitext-spec-with-a-yaml-error",
        lambda env: ["eval", str(env.backbone), "--bitext", "{hf: wmt19, config: de-en"],
        2,
        "is not a valid YAML mapping",
    ),
    Case(
        "mine-threshold-nan",
        lambda env: [
            "mine",
            str(env.write("s.txt", "Hi\n")),
            str(env.write("t.txt", "Salom\n")),
            "--zoo",
            str(env.zoo),
            "--output",
            str(env.tmp / "p.tsv"),
            "--threshold",
            "nan",
        ],
        2,
        "nan is not a finite number",
        absent=lambda env: [env.tmp / "p.tsv"],
    ),
    Case(
        "encode-input-is-a-folder",
        lambda env: [
            "encode",
            "--zoo",
            str(env.zoo),
            "--lang",
            "uz",
            "--input",
            str(_user_folder(env)),
            "--output",
            str(env.tmp / "o.npy"),
        ],
        1,
        "mine is a folder; give a text file",
        untouched=lambda env: [env.tmp / "mine"],
    ),
    # ---- issue 23, 6. replacing an installed language
    Case(
        "add-language-over-an-installed-language",
        lambda env: ["add-language", "uz", "--zoo", str(env.zoo), "--work-dir", str(env.tmp / "w")],
        1,
        "uz is already installed in",
        real_zoo=True,
        untouched=lambda env: [env.zoo],
        absent=lambda env: [env.tmp / "w"],
    ),
    # ---- issue 36: everything that shapes a vector is verified
    *(
        Case(
            f"encode-with-the-backbone-{field}-edited",
            _encode,
            1,
            "weights, config or tokenizer, pooling or prefix do not match the manifest's fingerprint",
            setup=_edit_json("backbone/modsenc_backbone.json", edit),
            real_zoo=True,
            untouched=lambda env: [env.zoo],
            absent=lambda env: [env.tmp / "out.npy"],
        )
        for field, edit in (("pooling", _mean_pooling), ("prefix", _passage_prefix))
    ),
    Case(
        "auto-routed-encode-with-a-bundle-linked-to-another-language",
        lambda env: ["encode", "--zoo", str(env.zoo), "--output", str(env.tmp / "out.npy")],
        1,
        "is the bundle of 'kk', not of 'uz'",  # the router reads no profile of an unchecked bundle
        setup=_link_uz_to_kk,
        real_zoo=True,
        stdin=("\n".join(HELD_OUT["uz"]) + "\n").encode(),
        absent=lambda env: [env.tmp / "out.npy"],
    ),
    Case(
        "encode-with-a-manifest-hash-for-a-path-outside-the-bundle",
        _encode,
        1,
        "names '../en/langid.json', a path outside the bundle",
        setup=_damage(_hash_a_path_outside),
        real_zoo=True,
        absent=lambda env: [env.tmp / "out.npy"],
    ),
    Case(
        "encode-with-another-backbone-named-in-the-index",
        _encode,
        1,
        "index.json names backbone 000000000000 but",
        setup=_edit_json("index.json", _other_backbone_in_index),
        real_zoo=True,
        untouched=lambda env: [env.zoo],
        absent=lambda env: [env.tmp / "out.npy"],
    ),
    Case(
        "zoo-list-with-an-index-of-a-later-format",
        lambda env: ["zoo", "list", "--zoo", str(env.zoo)],
        1,
        "unknown format 'modsenc-zoo/9'; this modsenc reads modsenc-zoo/1",
        setup=_edit_json("index.json", _future_index_format),
        real_zoo=True,
        untouched=lambda env: [env.zoo],
    ),
    # ---- issue 36: one guard for every output of a command
    Case(
        "mine-output-with-a-trailing-slash",
        lambda env: [
            "mine",
            str(env.write("src.txt", "Hello\n")),
            str(env.write("tgt.txt", "Salom\n")),
            "--zoo",
            str(env.zoo),
            "--output",
            str(env.tmp / "pairs") + "/",
        ],  # fmt: skip
        1,
        "pairs/ names a folder (it ends with /); give a file name",
        real_zoo=True,
        absent=lambda env: [env.tmp / "pairs"],
    ),
    Case(
        "encode-output-inside-an-export",
        lambda env: _encode(env)[:-1] + [str(env.tmp / "st" / "vectors.npy")],
        1,
        "is inside the export",
        setup=lambda env: env.write("st/modsenc_export.json", '{"mode": "mono"}\n') and None,
        real_zoo=True,
        untouched=lambda env: [env.tmp / "st"],
    ),
    Case(
        "mine-with-a-negative-exact-limit",
        lambda env: [
            "mine",
            str(env.write("src.txt", "Hello\n")),
            str(env.write("tgt.txt", "Salom\n")),
            "--zoo",
            str(env.zoo),
            "--output",
            str(env.tmp / "pairs.tsv"),
            "--exact-limit",
            "-1",
        ],  # fmt: skip
        2,
        "Invalid value for '--exact-limit': -1 is not in the range x>=0",
        absent=lambda env: [env.tmp / "pairs.tsv"],
    ),
    Case(
        "eval-json-and-markdown-to-one-file",
        lambda env: [
            "eval",
            str(env.zoo),
            "--sts",
            str(_sts_file(env)),
            "--json",
            str(env.tmp / "r"),
            "--markdown",
            str(env.tmp / "r"),
        ],  # fmt: skip
        1,
        "/r is also --json: each output needs its own path",
        real_zoo=True,
        absent=lambda env: [env.tmp / "r"],
    ),
    Case(
        "eval-json-into-the-evaluated-model-folder",
        lambda env: [
            "eval",
            str(env.tmp / "export"),
            "--sts",
            str(_sts_file(env)),
            "--json",
            str(env.tmp / "export" / "config.json"),
            "--overwrite",
        ],  # fmt: skip
        1,
        "config.json is (or holds) the input",
        setup=_model_folder,
        untouched=lambda env: [env.tmp / "export"],
    ),
    Case(
        "synthesize-output-is-its-source",
        lambda env: [
            "synthesize",
            str(env.write("pairs.tsv", "lang\tanchor\tpositive\nen\tHi\tHello\n")),
            "--lang",
            "uz",
            "--output",
            str(env.tmp / "pairs.tsv"),
            "--overwrite",
            "--model",
            str(env.tmp / "no-such-model"),
        ],  # fmt: skip
        1,
        "pairs.tsv is (or holds) the input",  # before any model loads: the model does not exist
        untouched=lambda env: [env.tmp / "pairs.tsv"],
        absent=lambda env: [env.tmp / "pairs.tsv.cache.jsonl", env.tmp / "pairs.tsv.report.json"],
    ),
    # ---- issue 50, 1. zoo pack goes through the output guard
    *(
        Case(
            f"zoo-pack-onto-{name}",
            lambda env, where=where: _pack(env, where(env)),
            1,
            message,
            real_zoo=True,
            untouched=lambda env: [env.zoo],
        )
        for name, where, message in (
            ("its-source", lambda env: env.zoo, "is (or holds) the input"),
            ("its-source-dot", lambda env: f"{env.zoo}/.", "is (or holds) the input"),
            ("a-bundle-of-its-source", lambda env: env.zoo / "uz", "is (or holds) the input"),
            ("a-folder-in-its-backbone", lambda env: env.zoo / "backbone" / "pk", "is (or holds) the input"),
            ("a-folder-holding-its-source", lambda env: env.tmp, "is (or holds) the input"),
        )
    ),
    Case(
        "zoo-pack-into-a-bundle-of-another-zoo",
        lambda env: _pack(env, env.tmp / "other" / "uz"),
        1,
        "is the bundle",
        setup=lambda env: shutil.copytree(env.zoo, env.tmp / "other") and None,
        real_zoo=True,
        untouched=lambda env: [env.zoo, env.tmp / "other"],
    ),
    Case(
        "zoo-pack-into-a-user-folder",
        lambda env: _pack(env, _user_folder(env)),
        1,
        "non-empty folder that modsenc did not write (no index.json in it)",
        real_zoo=True,
        untouched=lambda env: [env.zoo, env.tmp / "mine"],
        # nothing left behind: no backbone copy, no index, no lock, no scratch folder
        absent=lambda env: [
            *(env.tmp / "mine" / name for name in ("backbone", "index.json", ".lock", "uz")),
            *env.tmp.glob(".mine*"),
        ],
    ),
    Case(
        "zoo-pack-over-an-earlier-pack-without-overwrite",
        lambda env: _pack(env, env.tmp / "packed"),
        1,
        "holds an earlier modsenc output: pass --overwrite",
        setup=_earlier_pack,
        real_zoo=True,
        untouched=lambda env: [env.zoo, env.tmp / "packed"],
    ),
    Case(
        "zoo-pack-over-a-zoo-it-did-not-pack",
        lambda env: _pack(env, env.tmp / "other", "--overwrite"),
        1,
        "its index.json records no earlier output of this command",
        setup=lambda env: shutil.copytree(env.zoo, env.tmp / "other") and None,
        real_zoo=True,
        untouched=lambda env: [env.zoo, env.tmp / "other"],
    ),
    # ---- issue 50, 2. zoo install: the label, the pivot, and the guard
    Case(
        "zoo-install-a-uz-bundle-relabelled-kk",
        lambda env: _install(env, "--replace"),
        1,
        "identity_sha256 differs",
        setup=lambda env: _source_bundle(env, _relabel_kk, identity="keep"),
        real_zoo=True,
        untouched=lambda env: [env.zoo],
    ),
    Case(
        "zoo-install-a-uz-bundle-relabelled-kk-older-format",
        lambda env: _install(env, "--replace"),
        1,
        "langid.json is the router profile of 'uz', not of 'kk'",
        setup=lambda env: _source_bundle(env, _relabel_kk, identity="drop"),
        real_zoo=True,
        untouched=lambda env: [env.zoo],
    ),
    Case(
        "zoo-install-a-second-pivot",
        lambda env: _install(env, "--replace"),
        1,
        "says it is the pivot (is_pivot), but en is",
        setup=lambda env: _source_bundle(env, _claim_pivot),
        real_zoo=True,
        untouched=lambda env: [env.zoo],
    ),
    Case(
        "zoo-install-into-the-source-bundle",
        lambda env: ["zoo", "install", str(env.zoo / "uz"), "--zoo", str(env.zoo), "--replace"],
        1,
        "is (or holds) the input",
        real_zoo=True,
        untouched=lambda env: [env.zoo],
    ),
    # ---- issue 50, 3. every manifest field that shapes a vector or a route is covered by a hash
    Case(
        "auto-routed-encode-with-the-listed-router-profile-deleted",
        _encode_auto,
        1,
        "uz/langid.json is missing from the bundle",
        setup=_damage(lambda bundle: (bundle / "langid.json").unlink()),
        real_zoo=True,
        stdin=_UZ_STDIN,
        absent=lambda env: [env.tmp / "out.npy"],
    ),
    Case(
        "auto-routed-encode-with-kk-profile-in-uz-listed-with-its-hash",
        _encode_auto,
        1,
        "uz/langid.json is the router profile of 'kk', not of 'uz'",
        setup=_damage(_kk_profile_in_uz, rehash=True),
        real_zoo=True,
        stdin=_UZ_STDIN,
        absent=lambda env: [env.tmp / "out.npy"],
    ),
    *(
        Case(
            f"encode-with-the-bundle-{name}-edited",
            _encode,
            1,
            "identity_sha256 differs",
            setup=_edit_json(f"uz/{BUNDLE_MANIFEST}", edit),
            real_zoo=True,
            untouched=lambda env: [env.zoo],
            absent=lambda env: [env.tmp / "out.npy"],
        )
        for name, edit in (("orthography", _no_orthography), ("is-pivot", _uz_is_pivot))
    ),
    # ---- issue 50, 4. the weak items
    Case(
        "encode-output-inside-the-modsenc-cache",
        lambda env: _encode(env)[:-1] + [str(env.tmp / "cache" / "openvino" / "v.npy")],
        1,
        "is inside modsenc's cache",
        setup=lambda env: (env.tmp / "cache" / "openvino").mkdir(parents=True),
        environ={"MODSENC_CACHE": "CACHE"},  # replaced by the case's own folder in test_bad_input
        untouched=lambda env: [env.tmp / "cache"],
    ),
    Case(
        "encode-output-inside-a-scale-encode-job",
        lambda env: _encode(env)[:-1] + [str(env.tmp / "job" / "v.npy")],
        1,
        "is inside the scale encode job",
        setup=_scale_job,
        untouched=lambda env: [env.tmp / "job"],
    ),
    Case(
        "export-inside-a-scale-encode-job",
        lambda env: [
            "export",
            "--zoo",
            str(env.zoo),
            "--lang",
            "uz",
            "--output",
            str(env.tmp / "job" / "st"),
        ],
        1,
        "is inside the scale encode job",
        setup=_scale_job,
        real_zoo=True,
        untouched=lambda env: [env.tmp / "job"],
    ),
    Case(
        "encode-output-with-a-trailing-slash",
        lambda env: _encode(env)[:-1] + [str(env.tmp / "out.npy") + "/"],
        1,
        "out.npy/ names a folder (it ends with /); give a file name",
        absent=lambda env: [env.tmp / "out.npy"],
    ),
    Case(
        "encode-input-dev-zero",
        lambda env: _encode(env)[:6] + ["/dev/zero"] + _encode(env)[7:],
        1,
        "--input /dev/zero is not a regular file",
        absent=lambda env: [env.tmp / "out.npy"],
    ),
    Case(
        "add-language-work-dir-inside-the-zoo",
        lambda env: _add_language(env, "--zoo", str(env.zoo), "--work-dir", str(env.zoo / "wd"), "--replace"),
        1,
        "--work-dir",
        real_zoo=True,
        untouched=lambda env: [env.zoo],
        absent=lambda env: [env.zoo / ".wd.lock", env.zoo / "wd"],
    ),
    Case(
        "add-language-zoo-is-the-backbone",
        lambda env: _add_language(env, "--zoo", str(env.backbone), "--backbone", str(env.backbone)),
        1,
        "is (or holds) the input",
        untouched=lambda env: [env.backbone],
    ),
    *(
        Case(
            f"{name}-with-the-index-deleted",
            args,
            1,
            "index.json is missing, but",
            setup=lambda env: (env.zoo / "index.json").unlink(),
            real_zoo=True,
            untouched=lambda env: [env.zoo],
            not_in_message=["run `modsenc add-language"],
        )
        for name, args in (
            ("zoo-list", lambda env: ["zoo", "list", "--zoo", str(env.zoo)]),
            ("encode", _encode),
        )
    ),
    # ---- issue 36, 4. check before load
    # No zoo at all (no real_zoo, no setup): the device is refused before the zoo is even opened.
    Case(
        "encode-device-tpu",
        lambda env: _encode(env, "--device", "tpu"),
        1,
        "--device tpu: not a device modsenc can run on; use auto, cpu, cuda, cuda:N or mps",
        absent=lambda env: [env.tmp / "out.npy", env.zoo],
    ),
    Case(
        "encode-device-cuda-that-torch-lacks",
        lambda env: _encode(env, "--device", _MISSING_CUDA[0]),
        1,
        _MISSING_CUDA[1],
        absent=lambda env: [env.tmp / "out.npy", env.zoo],
    ),
    Case(
        "serve-device-tpu",
        lambda env: ["serve", "--zoo", str(env.zoo), "--port", "0", "--device", "tpu"],
        1,
        "--device tpu: not a device modsenc can run on",
    ),
    Case(
        "synthesize-device-cuda-that-torch-lacks",
        lambda env: [*_synthesize(env, "facebook/nllb-200-distilled-600M"), "--device", _MISSING_CUDA[0]],
        1,
        _MISSING_CUDA[1],
        absent=lambda env: _synthesize_outputs(env),
    ),
    Case(
        "synthesize-model-a-missing-folder",
        lambda env: _synthesize(env, "/no/such/folder"),
        1,
        "/no/such/folder: no such folder",
        absent=lambda env: _synthesize_outputs(env),
    ),
    Case(
        "synthesize-model-a-mistyped-hub-name-offline",
        lambda env: _synthesize(env, MISTYPED_MODEL),
        1,
        f"{MISTYPED_MODEL}: not a local folder, and not in the Hugging Face cache (HF_HUB_OFFLINE is "
        "set); check the name",
        environ={"HF_HUB_OFFLINE": "1"},
        absent=lambda env: _synthesize_outputs(env),
    ),
]


@pytest.fixture
def env(tmp_path: Path, tiny_backbone_dir: Path) -> Env:
    box = tmp_path / "box"
    box.mkdir()
    return Env(tmp=box, zoo=box / "zoo", backbone=tiny_backbone_dir)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case: Case, env: Env, request: pytest.FixtureRequest) -> None:
    if case.real_zoo:
        shutil.copytree(request.getfixturevalue("zoo_dir"), env.zoo)
    case.setup(env)
    args = case.args(env)
    watched = case.untouched(env)
    before = snapshot(watched)
    environ = {k: str(env.tmp / "cache") if v == "CACHE" else v for k, v in case.environ.items()}
    result = CliRunner().invoke(main, args, input=case.stdin, env=environ)
    output = result.output.strip()
    assert result.exit_code == case.code, output
    # One line says what is wrong (click may put its usage lines before it), no traceback.
    errors = [line for line in output.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1 and case.message in errors[0], output
    assert "Traceback" not in output and output.endswith(errors[0]), output
    for fragment in case.not_in_message:
        assert fragment not in output, output
    assert snapshot(watched) == before
    for path in case.absent(env):
        assert not path.exists(), path


# ----------------------------------------------------------------------------------------- library API
@pytest.fixture(scope="module")
def encoder(zoo_dir: Path) -> ModularEncoder:
    return ModularEncoder.from_pretrained(zoo_dir, device="cpu", runtime="torch")


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda e: e.encode(["Salom"], batch_size=0),
            ValueError,
            "batch_size must be a positive integer, got 0",
        ),
        (lambda e: e.encode(["Salom"], lang=3), TypeError, "lang must be a language code such as 'uz'"),
        (
            lambda e: ModularEncoder.from_pretrained(e.zoo.root, max_languages=0, runtime="torch"),
            ValueError,
            "max_languages must be at least 1",
        ),
        (lambda e: e.encode(["Salom"], lang=["uz", "en"]), ValueError, "lang has 2 codes for 1 sentences"),
    ],
    ids=["batch-size-zero", "lang-is-an-int", "max-languages-zero", "lang-list-too-long"],
)
def test_bad_library_arguments(encoder: ModularEncoder, call, error, message) -> None:
    with pytest.raises(error, match=message.replace("(", r"\(")):
        call(encoder)


def test_every_bundle_file_is_hashed_and_a_bundle_without_hashes_loads_only_unverified(
    zoo_dir: Path, tmp_path
) -> None:
    manifest = json.loads((zoo_dir / "uz" / BUNDLE_MANIFEST).read_text())
    files = {p.relative_to(zoo_dir / "uz").as_posix() for p in (zoo_dir / "uz").rglob("*") if p.is_file()}
    assert set(manifest[HASHES_KEY]) == files - {BUNDLE_MANIFEST}
    assert manifest[HASHES_KEY]["embeddings.safetensors"] == file_sha256(
        zoo_dir / "uz" / "embeddings.safetensors"
    )

    old = tmp_path / "zoo"
    shutil.copytree(zoo_dir, old)
    old_manifest = old / "uz" / BUNDLE_MANIFEST
    stripped = {k: v for k, v in json.loads(old_manifest.read_text()).items() if k != HASHES_KEY}
    old_manifest.write_text(json.dumps(stripped))
    with pytest.raises(BundleIntegrityError, match="lists no file hashes .* or pass --no-verify"):
        ModularEncoder.from_pretrained(old, device="cpu", runtime="torch").encode(HELD_OUT["uz"], lang="uz")
    unverified = ModularEncoder.from_pretrained(old, device="cpu", verify=False, runtime="torch")
    vectors = unverified.encode(HELD_OUT["uz"], lang="uz")
    expected = ModularEncoder.from_pretrained(zoo_dir, device="cpu", runtime="torch").encode(
        HELD_OUT["uz"], lang="uz"
    )
    np.testing.assert_allclose(vectors, expected, atol=1e-6)


# ----------------------------------------------------------------------------------------- concurrency
def test_two_encode_runs_writing_one_output_leave_one_complete_result(zoo_dir: Path, tmp_path: Path) -> None:
    """Each run writes its own temporary; the output is one run's vectors, whole, never a mix; a
    killed run's leftover temporary is cleaned up, a user's file that merely looks like one is not."""
    texts = {
        "a": [HELD_OUT["uz"][0]] * 300,
        "b": [HELD_OUT["uz"][1]] * 500,
    }
    output = tmp_path / "out.npy"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    killed = "import os; from modsenc.utils.io import temporary_file; temporary_file({!r}); os._exit(9)"
    subprocess.run([sys.executable, "-c", killed.format(str(output))], env=env, check=False)
    (leftover,) = [p for p in tmp_path.iterdir() if p.name.startswith(".out.npy.")]  # a killed run's
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lookalike = tmp_path / f".out.npy.{dead.pid}.0123456789abcdef.0123456789abcdef.x1y2.tmp"
    lookalike.write_bytes(b"the user's own file")
    runs = []
    for name, lines in texts.items():
        source = tmp_path / f"{name}.txt"
        source.write_text("\n".join(lines) + "\n", encoding="utf-8")
        command = [
            sys.executable,
            "-m",
            "modsenc.cli",
            "encode",
            "--zoo",
            str(zoo_dir),
            "--lang",
            "uz",
            "--input",
            str(source),
            "--output",
            str(output),
            "--chunk-size",
            "50",
            "--device",
            "cpu",
            "--runtime",
            "torch",  # the vectors are compared with the torch runtime's
            "--overwrite",  # whichever starts second may find the first's output
        ]
        runs.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    for run in runs:
        out, _ = run.communicate(timeout=300)
        assert run.returncode == 0, out.decode()
    result = np.load(output)
    encoder = ModularEncoder.from_pretrained(zoo_dir, device="cpu", runtime="torch")
    expected = {name: encoder.encode(lines[:1], lang="uz")[0] for name, lines in texts.items()}
    winner = "a" if len(result) == 300 else "b"
    assert len(result) == len(texts[winner])
    np.testing.assert_allclose(result, np.tile(expected[winner], (len(result), 1)), atol=1e-5)
    assert not leftover.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [lookalike.name, "a.txt", "b.txt", "out.npy"]
    assert lookalike.read_bytes() == b"the user's own file"


# ----------------------------------------------------------------------------------------- issue 23
def test_export_overwrite_replaces_only_its_own_files(zoo_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "model"
    args = ["export", "--zoo", str(zoo_dir), "--lang", "uz", "--mode", "mono", "--output", str(out)]
    assert CliRunner().invoke(main, args).exit_code == 0
    (out / "my_notes.txt").write_text("added after the export\n")
    before = snapshot([out])
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1 and "holds an earlier modsenc output: pass --overwrite" in result.output
    assert snapshot([out]) == before
    result = CliRunner().invoke(main, [*args, "--overwrite"])
    assert result.exit_code == 0, result.output
    assert (out / "my_notes.txt").read_text() == "added after the export\n"
    (out / "README.md").write_text("edited by the user\n")  # a file modsenc wrote, changed since
    result = CliRunner().invoke(main, [*args, "--overwrite"])
    assert result.exit_code == 1 and "README.md was changed after modsenc wrote it" in result.output
    assert (out / "README.md").read_text() == "edited by the user\n"


def test_zoo_list_reports_a_dangling_entry_and_lists_the_others(zoo_dir: Path, tmp_path: Path) -> None:
    zoo = tmp_path / "zoo"
    shutil.copytree(zoo_dir, zoo)
    shutil.rmtree(zoo / "de")
    result = CliRunner().invoke(main, ["zoo", "list", "--zoo", str(zoo)])
    assert result.exit_code == 1, result.output  # a broken bundle is an error, after the listing
    assert result.output.splitlines()[-1].startswith("Error: 1 broken bundle(s) in ")
    assert result.output.splitlines()[-1].endswith(
        "de; rebuild each with `modsenc add-language LANG`, or remove its folder and index entry"
    )
    rows = {line.split()[0]: line for line in result.output.splitlines()[1:-2]}
    assert set(rows) == {"de", "en", "kk", "uz"}
    assert "BROKEN: no bundle for 'de'" in rows["de"] and "BROKEN" not in rows["uz"]


def test_two_add_language_runs_on_one_work_dir_are_locked_out(tmp_path: Path) -> None:
    from modsenc.utils.outputs import run_lock  # noqa: PLC0415

    work = tmp_path / "w"
    args = [
        "add-language",
        "uz",
        "--zoo",
        str(tmp_path / "zoo"),
        "--work-dir",
        str(work),
        "--stages",
        "vocab",
    ]
    with run_lock(work, "add-language"):
        result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    assert f"is in use by another add-language run (pid {os.getpid()}" in result.output
    assert not work.exists() and not (tmp_path / "zoo").exists()
    # a lock file left by a killed run holds no flock: it is stale and taken over
    killed = subprocess.run(
        [
            sys.executable,
            "-c",
            f"from modsenc.utils.outputs import run_lock\nwith run_lock({str(work)!r}, 'x'): "
            "import os; os._exit(9)",
        ],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    assert killed.returncode == 9 and (tmp_path / ".w.lock").read_text().strip() != str(os.getpid())
    with run_lock(work, "add-language") as lock:
        assert lock.read_text().strip() == str(os.getpid())


def test_cr_only_line_endings_are_lines() -> None:
    from io import BytesIO  # noqa: PLC0415

    from modsenc.data.lines import _raw_lines  # noqa: PLC0415

    data = b"one\rtwo\r\nthree\nfour\r"
    assert list(_raw_lines(BytesIO(data))) == [b"one", b"two", b"three", b"four"]
    # a CRLF split across two reads is one line ending, not two
    assert list(_raw_lines(BytesIO(data), chunk_size=4)) == [b"one", b"two", b"three", b"four"]


def test_languages_as_one_string_and_encode_refuses_bytes_and_mappings(zoo_dir: Path) -> None:
    encoder = ModularEncoder.from_pretrained(zoo_dir, languages="uz", device="cpu", runtime="torch")
    assert encoder.loaded_languages == ["uz"]
    with pytest.raises(TypeError, match="sentences must be a str or a list of str, got bytes; decode bytes"):
        encoder.encode(b"Salom", lang="uz")
    with pytest.raises(TypeError, match="sentences must be a str or a list of str, got dict"):
        encoder.encode({"a": "b"}, lang="uz")


def test_serve_refuses_a_taken_port_before_loading_and_names_a_wrong_content_type(zoo_dir: Path) -> None:
    import socket  # noqa: PLC0415

    from fastapi.testclient import TestClient  # noqa: PLC0415

    from modsenc.serving.app import ServeConfig, create_app  # noqa: PLC0415
    from modsenc.serving.server import bind  # noqa: PLC0415

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{port}: Address already in use"):
            bind("127.0.0.1", port)
    encoder = ModularEncoder.from_pretrained(zoo_dir, device="cpu", runtime="torch")
    with TestClient(create_app(ServeConfig(str(zoo_dir), []), encoder=encoder)) as client:
        response = client.post(
            "/v1/embeddings", content=b"input=Salom", headers={"content-type": "text/plain"}
        )
    assert response.status_code == 415
    assert "Content-Type must be application/json, got 'text/plain'" in response.text


def test_serve_exits_non_zero_when_the_preloaded_bundle_fails(zoo_dir: Path, tmp_path: Path) -> None:
    zoo = tmp_path / "zoo"
    shutil.copytree(zoo_dir, zoo)
    _flip_byte(zoo / "uz")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "modsenc.cli",
            "serve",
            "--zoo",
            str(zoo),
            "--port",
            "0",
            "--languages",
            "uz",
            "--device",
            "cpu",
        ],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 1, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: could not load ") and "embeddings.safetensors is damaged" in last
    # Issue 36, 4: the one clear line, not a 25-line traceback before it (nor the message twice).
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stderr.count("embeddings.safetensors is damaged") == 1, result.stderr


@pytest.mark.parametrize("model", ["/no/such/folder", MISTYPED_MODEL])
def test_synthesize_refuses_a_model_it_cannot_find_within_seconds(tmp_path: Path, model: str) -> None:
    """Issue 36, 4: transformers spent 46-52 s in retries on such a name before a traceback."""
    env = Env(tmp=tmp_path, zoo=tmp_path / "zoo", backbone=tmp_path / "backbone")
    started = time.monotonic()
    result = CliRunner().invoke(main, _synthesize(env, model), env={"HF_HUB_OFFLINE": "1"})
    seconds = time.monotonic() - started
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert result.output.strip().splitlines()[-1].startswith(f"Error: {model}: "), result.output
    assert seconds < 5, f"{seconds:.1f} s"


@pytest.mark.parametrize("flag", ["verify", "verify_backbone"])
def test_verify_takes_booleans_only(zoo_dir: Path, flag: str) -> None:
    """``verify="no"`` is truthy: taken as given it would verify, the opposite of what was asked."""
    with pytest.raises(TypeError, match=f"{flag} must be True or False, got 'no'"):
        ModularEncoder.from_pretrained(zoo_dir, **{flag: "no"}, runtime="torch")
