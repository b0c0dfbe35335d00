"""bench/encode.py's side-by-side arms on the ``modsenc export`` of a language: sentence-transformers'
torch, ONNX and OpenVINO backends (``python -m bench.encode --sections side``), and the package
versions its table names."""

from __future__ import annotations

import argparse
import contextlib
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import torch


@dataclass
class Arm:
    name: str
    encode: Callable[[list[str]], object]
    note: str = ""
    vectors: bool = True  # False: the arm gives no vectors (its cosine column is empty)


def st_arms(export_dir: Path, args: argparse.Namespace, max_length: int, wanted: list[str]) -> list[Arm]:
    from sentence_transformers import SentenceTransformer  # noqa: PLC0415

    st = SentenceTransformer(str(export_dir), device="cpu")
    st.max_seq_length = max_length
    arms = []
    if "st-fp32" in wanted:
        arms.append(Arm("st-fp32", lambda t: st.encode(t, batch_size=args.batch_size), "torch backend"))
    if "st-bf16" in wanted:

        def bf16(texts: list[str]) -> np.ndarray:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return np.asarray(st.encode(texts, batch_size=args.batch_size), dtype=np.float32)

        arms.append(Arm("st-bf16", bf16, "torch backend under torch.autocast(bf16)"))
    return arms


def onnx_arms(export_dir: Path, work: Path, args: argparse.Namespace, max_length: int, wanted: list[str]):
    """sentence-transformers' ONNX backend on a copy of the export: fp32, then its dynamic int8."""
    if not {"onnx-fp32", "onnx-int8"} & set(wanted):
        return [], ""
    try:
        import onnxruntime as ort  # noqa: PLC0415
        from sentence_transformers import SentenceTransformer, export_dynamic_quantized_onnx_model  # noqa: PLC0415
    except ImportError as err:
        return [], f"onnx-* ({err}: pip install -e '.[onnx]')"

    def options():  # ONNX Runtime ignores torch.set_num_threads: its own pool, pinned here
        so = ort.SessionOptions()
        so.intra_op_num_threads = args.threads
        so.inter_op_num_threads = 1
        return {"provider": "CPUExecutionProvider", "session_options": so}

    folder = work / "onnx"
    shutil.copytree(export_dir, folder)
    fp32 = SentenceTransformer(str(folder), device="cpu", backend="onnx", model_kwargs=options())
    fp32.save_pretrained(str(folder))  # onnx/model.onnx, which the quantiser reads
    arms = []
    threads = f"intra_op_num_threads={args.threads}"
    if "onnx-fp32" in wanted:
        fp32.max_seq_length = max_length
        arms.append(Arm("onnx-fp32", lambda t: fp32.encode(t, batch_size=args.batch_size), threads))
    if "onnx-int8" in wanted:
        export_dynamic_quantized_onnx_model(fp32, args.onnx_quant, str(folder))
        # ST names the file by the type it quantised to: qint8, or quint8 for avx2
        written = sorted((folder / "onnx").glob(f"model_q*int8_{args.onnx_quant}.onnx"))
        name = f"onnx/{written[0].name}"
        int8 = SentenceTransformer(
            str(folder), device="cpu", backend="onnx", model_kwargs={**options(), "file_name": name}
        )
        int8.max_seq_length = max_length
        note = f"export_dynamic_quantized_onnx_model({args.onnx_quant!r}); {threads}"
        arms.append(Arm("onnx-int8", lambda t: int8.encode(t, batch_size=args.batch_size), note))
    return arms, ""


def openvino_arms(
    export_dir: Path,
    work: Path,
    args: argparse.Namespace,
    max_length: int,
    wanted: list[str],
    calib: list[str],
):
    """sentence-transformers' OpenVINO backend: fp32 and bf16 (OpenVINO's inference precision hint;
    its default on a CPU with AMX/AVX512_BF16 is bf16) and static int8 calibrated on ``calib``."""
    if not {"openvino-fp32", "openvino-bf16", "openvino-int8"} & set(wanted):
        return [], ""
    try:
        from datasets import Dataset  # noqa: F401, PLC0415 - the int8 arm's; refused here if missing
        from optimum.intel import OVQuantizationConfig, OVQuantizer  # noqa: F401, PLC0415
        from sentence_transformers import (  # noqa: PLC0415
            SentenceTransformer,
            export_static_quantized_openvino_model,  # noqa: F401
        )
    except ImportError as err:
        return [], f"openvino-* ({err}: pip install -e '.[openvino]')"

    def config(hint: str | None) -> dict:
        threads = {
            "INFERENCE_NUM_THREADS": str(args.threads),
            "NUM_STREAMS": "1",
            "PERFORMANCE_HINT": "LATENCY",
        }
        return {"ov_config": threads | ({"INFERENCE_PRECISION_HINT": hint} if hint else {})}

    folder = work / "openvino"
    shutil.copytree(export_dir, folder)
    base = SentenceTransformer(str(folder), device="cpu", backend="openvino", model_kwargs=config("f32"))
    base.save_pretrained(str(folder))  # openvino/openvino_model.xml
    arms = []
    for name, hint in (("openvino-fp32", "f32"), ("openvino-bf16", "bf16")):
        if name in wanted:
            model = (
                base
                if hint == "f32"
                else SentenceTransformer(
                    str(folder), device="cpu", backend="openvino", model_kwargs=config(hint)
                )
            )
            model.max_seq_length = max_length
            note = f"INFERENCE_PRECISION_HINT={hint}, INFERENCE_NUM_THREADS={args.threads}"
            arms.append(Arm(name, lambda t, m=model: m.encode(t, batch_size=args.batch_size), note))
    if "openvino-int8" in wanted:
        arms.append(_openvino_int8_arm(folder, base, args, max_length, calib, config))
    return arms, ""


def _openvino_int8_arm(
    folder: Path,
    base: Any,
    args: argparse.Namespace,
    max_length: int,
    calib: list[str],
    config: Callable[[str | None], dict],
) -> Arm:
    """The openvino-int8 arm: ``base``'s export quantised by NNCF, calibrated on ``calib``."""
    from datasets import Dataset  # noqa: PLC0415
    from optimum.intel import OVQuantizationConfig, OVQuantizer  # noqa: PLC0415
    from sentence_transformers import (  # noqa: PLC0415
        SentenceTransformer,
        export_static_quantized_openvino_model,
    )

    prompt = base.prompts.get(base.default_prompt_name or "", "")

    def local_calibration(self, dataset_name, num_samples=100, *a, preprocess_function=None, **kw):
        # In place of the hub's glue/sst2: local sentences of the language, padded as the
        # helper pads (to a fixed length; here the model's maximum, not 384)
        rows = Dataset.from_dict({"sentence": [prompt + t for t in calib[:num_samples]]})
        return rows.map(
            lambda b: base.tokenizer(
                b["sentence"], padding="max_length", max_length=max_length, truncation=True
            ),
            batched=True,
            remove_columns=["sentence"],
        )

    # Quantised from a copy of its own: the helper quantises the model it is given in place,
    # which made the fp32 arm above run the int8 graph (its cosine equalled int8's).
    source = SentenceTransformer(str(folder), device="cpu", backend="openvino", model_kwargs=config("f32"))
    with mock.patch.object(OVQuantizer, "get_calibration_dataset", local_calibration):
        export_static_quantized_openvino_model(
            source, OVQuantizationConfig(num_samples=len(calib)), str(folder)
        )
    del source
    int8 = SentenceTransformer(
        str(folder),
        device="cpu",
        backend="openvino",
        model_kwargs={"file_name": "openvino/openvino_model_qint8_quantized.xml", **config(None)},
    )
    int8.max_seq_length = max_length
    note = (
        f"export_static_quantized_openvino_model, {len(calib)} local calibration sentences; "
        f"default precision hint; INFERENCE_NUM_THREADS={args.threads}"
    )
    return Arm("openvino-int8", lambda t: int8.encode(t, batch_size=args.batch_size), note)


def versions() -> str:
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

    found = []
    for package in (
        "torch",
        "transformers",
        "sentence-transformers",
        "torchao",
        "onnxruntime",
        "optimum-onnx",
        "openvino",
        "optimum-intel",
    ):
        with contextlib.suppress(PackageNotFoundError):
            found.append(f"{package} {version(package)}")
    return ", ".join(found)
