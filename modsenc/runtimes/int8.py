"""A language's OpenVINO graph in int8: NNCF's static post-training quantisation.

``runtime="openvino", quantize="int8"``: each (language, modules) graph that ``runtimes/openvino.py``
builds is quantised once, calibrated on sentences of its own language (``runtimes/calibration.py``),
and cached on disk beside the float graph (its key adds the NNCF release and the calibration
sentences' sha256). The matrix products then run on int8 kernels (VNNI where the CPU has it);
what stays float runs at the compile's precision hint (bf16 where native, else fp32).

NNCF's ``ModelType.TRANSFORMER`` settings (SmoothQuant on the MatMuls, fast bias correction, the
performance preset, attention's softmax and LayerNorms kept float) are OpenVINO's recommendation
for transformers. On multilingual-e5-small's uz graph they gave a mean cosine of 0.9943 to fp32 on
held-out NTREX; SmoothQuant at alpha 0.5 gave 0.9919 (docs/benchmarks.md).

Three schemes (``INT8_SCHEMES``; docs/results/int8.md measures each per language):

- ``int8``: every MatMul's weights and activations in int8, as above;
- ``int8-mixed``: the same, but each layer's FFN output projection (its input is the GELU's, whose
  outliers int8 rounds worst) kept in float: NNCF's ignored scope;
- ``int8-weights``: weight-only int8 (NNCF ``compress_weights``, per output channel, asymmetric);
  activations stay float, so nothing is calibrated. It halves the graph, not the arithmetic.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import warnings
from collections.abc import Sequence
from typing import Any

from modsenc.backbone.quantization import QUANTIZATIONS
from modsenc.utils.errors import MissingDependencyError


def require_nncf() -> Any:
    """The ``nncf`` module, or an error that says how to install it."""
    try:
        import nncf  # noqa: PLC0415 - optional, heavy
    except ImportError as err:
        raise MissingDependencyError(
            "quantize='int8' on runtime='openvino' needs NNCF: pip install -e '.[openvino]' "
            "(or pip install nncf)"
        ) from err
    return nncf


# Calibration sentences per forward pass: encode's default batch, so the rows look like encode's.
CALIBRATION_BATCH = 32
INT8_SCHEMES = tuple(q for q in QUANTIZATIONS if q != "none")  # the names live with --quantize's
# The schemes that quantise activations, and so read calibration sentences.
CALIBRATED_SCHEMES = ("int8", "int8-mixed")
# The FFN output projection of every layer, by the name the converted graph gives its MatMul
# (``...layer.3.output.dense``, or ``...layer.3.output.output.dense`` with the CLA beside it).
FFN_OUTPUT_MATMULS = r".*layer\.\d+\.output\.(output\.)?dense.*"


def quantize_graph(graph: Any, calibration_inputs: Sequence[dict[str, Any]], scheme: str = "int8") -> Any:
    """``graph`` (an ``openvino.Model``) in ``scheme`` (``INT8_SCHEMES``), calibrated on
    ``calibration_inputs`` (the graph's own input dicts, one per batch, as the runtime feeds it;
    unread by ``int8-weights``)."""
    if scheme not in INT8_SCHEMES:
        raise ValueError(f"int8 scheme must be one of {', '.join(INT8_SCHEMES)}, got {scheme!r}")
    nncf = require_nncf()
    nncf_log = logging.getLogger("nncf")
    level = nncf_log.level
    nncf_log.setLevel(logging.ERROR)  # its info lines go to stdout; they are not the user's
    try:
        # NNCF draws its progress bars on stdout: they go to stderr, where modsenc's own go, so
        # stdout keeps only what a command prints as its result
        with contextlib.redirect_stdout(sys.stderr), warnings.catch_warnings():
            warnings.simplefilter("ignore", (DeprecationWarning, FutureWarning))
            if scheme == "int8-weights":
                return nncf.compress_weights(graph, mode=nncf.CompressWeightsMode.INT8_ASYM)
            kept_float = nncf.IgnoredScope(patterns=[FFN_OUTPUT_MATMULS], validate=True)
            return nncf.quantize(
                graph,
                nncf.Dataset(list(calibration_inputs)),
                model_type=nncf.ModelType.TRANSFORMER,
                subset_size=max(len(calibration_inputs), 1),
                ignored_scope=kept_float if scheme == "int8-mixed" else None,
            )
    finally:
        nncf_log.setLevel(level)
