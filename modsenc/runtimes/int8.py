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
"""

from __future__ import annotations

import contextlib
import logging
import sys
import warnings
from collections.abc import Sequence
from typing import Any

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


def quantize_graph(graph: Any, calibration_inputs: Sequence[dict[str, Any]]) -> Any:
    """``graph`` (an ``openvino.Model``) with int8 MatMuls, calibrated on ``calibration_inputs``:
    the graph's own input dicts, one per batch, as the runtime feeds it."""
    nncf = require_nncf()
    nncf_log = logging.getLogger("nncf")
    level = nncf_log.level
    nncf_log.setLevel(logging.ERROR)  # its info lines go to stdout; they are not the user's
    try:
        # NNCF draws its progress bars on stdout: they go to stderr, where modsenc's own go, so
        # stdout keeps only what a command prints as its result
        with contextlib.redirect_stdout(sys.stderr), warnings.catch_warnings():
            warnings.simplefilter("ignore", (DeprecationWarning, FutureWarning))
            return nncf.quantize(
                graph,
                nncf.Dataset(list(calibration_inputs)),
                model_type=nncf.ModelType.TRANSFORMER,
                subset_size=max(len(calibration_inputs), 1),
            )
    finally:
        nncf_log.setLevel(level)
