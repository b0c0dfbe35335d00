"""Importing the library loads no optional backend: torchao, ONNX Runtime, OpenVINO and optimum are
imported only on the paths that use them (``--quantize int8``, the benchmarks)."""

from __future__ import annotations

import json
import subprocess
import sys

OPTIONAL = ("torchao", "onnxruntime", "openvino", "optimum")

# Records, for each optional package imported, the file whose code imported it first (the innermost
# frame outside importlib; probes such as importlib.util.find_spec, which import nothing, are not
# counted), then which of them ended up in sys.modules.
SPY = """
import json, sys, traceback
OPTIONAL = {optional!r}
first = {{}}
class Spy:
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in OPTIONAL and top not in first:
            stack = traceback.extract_stack()[:-1]
            if stack[-2].name == "_find_and_load_unlocked":  # an import, not a probe
                files = [f.filename for f in stack]
                first[top] = [f for f in files if not f.startswith("<frozen") and "importlib" not in f][-1]
        return None
sys.meta_path.insert(0, Spy())
if sys.argv[2] == "hide-from-transformers":
    import transformers.utils.import_utils as hf
    hf._torchao_available = False  # transformers' own import of torchao is skipped
from modsenc import ModularEncoder
loaded = sorted(p for p in OPTIONAL if p in sys.modules)
with open(sys.argv[1], "w") as f:
    json.dump({{"loaded": loaded, "first": first}}, f)
"""


def _import(tmp_path, how: str) -> dict:
    report = tmp_path / f"{how}.json"
    done = subprocess.run(
        [sys.executable, "-c", SPY.format(optional=OPTIONAL), str(report), how],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")  # and it printed nothing
    return json.loads(report.read_text(encoding="utf-8"))


def test_importing_modular_encoder_imports_no_optional_backend(tmp_path) -> None:
    found = _import(tmp_path, "plain")
    assert not {"onnxruntime", "openvino", "optimum"} & set(found["loaded"])
    # transformers 4.57 imports torchao itself whenever it is installed (modeling_utils ->
    # quantizers.auto -> quantizer_torchao, about 4 s of import time): that import is not modsenc's.
    # No module of modsenc may be the one that pulls it in.
    assert set(found["loaded"]) <= {"torchao"}
    for package, importer in found["first"].items():
        assert "/modsenc/" not in importer, f"{package} imported at start-up by {importer}"
        if package == "torchao":
            assert "/transformers/" in importer, importer
    # With transformers' own torchao import switched off, nothing optional is left in sys.modules:
    # neither modsenc nor peft, adapters or sentence-transformers import one at start-up.
    assert _import(tmp_path, "hide-from-transformers") == {"loaded": [], "first": {}}


# `modsenc --help`, `zoo list` and `zoo info` read JSON only: torch and transformers (seconds of import
# time) must stay out of them. Run in a fresh interpreter, since this one has imported torch already.
TORCH_FREE = """
import json, sys
from click.testing import CliRunner
import modsenc.cli
heavy = ("torch", "transformers", "safetensors", "ray", "faiss")
loaded = {{"import": sorted(m for m in heavy if m in sys.modules)}}
for args in ({commands!r}):
    result = CliRunner().invoke(modsenc.cli.main, args)
    assert result.exit_code == 0, (args, result.output)
    loaded[" ".join(args)] = sorted(m for m in heavy if m in sys.modules)
print(json.dumps(loaded))
"""


def test_cli_start_up_and_zoo_list_import_no_torch(tmp_path) -> None:
    from modsenc.modules.defaults import shipped_zoo  # noqa: PLC0415

    zoo = str(shipped_zoo())
    commands = (["--help"], ["zoo", "list", "--zoo", zoo], ["zoo", "info", "uz", "--zoo", zoo])
    done = subprocess.run(
        [sys.executable, "-c", TORCH_FREE.format(commands=commands)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,  # no adapters_zoo/ here: the shipped zoo, named explicitly anyway
    )
    assert done.returncode == 0, done.stderr
    expected = {"import": []} | {" ".join(args): [] for args in commands}
    assert json.loads(done.stdout) == expected
