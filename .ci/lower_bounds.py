"""Each core dependency of pyproject.toml at its lower bound, one ``NAME==VERSION`` line each: the
constraints .ci/lowest_bounds.sh installs modsenc with (issue 51). Read from [project].dependencies,
not copied, so a bound moved there is the one tested; a core dependency without a ``>=`` bound is an
error (there is nothing to test it at).

    python .ci/lower_bounds.py [--except NAME ...] [--extra EXTRA ...] > lower.txt

``--extra focus`` adds that extra's requirements ([project.optional-dependencies]) at their bounds.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
# NAME[extras] then its specifiers, up to an environment marker
REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*([^;]*)")


def lower_bounds(pyproject: Path = PYPROJECT, extras: tuple[str, ...] = ()) -> dict[str, str]:
    """{name: lower bound} for every core dependency (and each of ``extras``' requirements), in
    pyproject.toml's order."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    for extra in extras:
        requirements += project["optional-dependencies"][extra]
    bounds: dict[str, str] = {}
    for requirement in requirements:
        name, specifiers = REQUIREMENT.match(requirement).groups()
        lower = [s.strip()[2:].strip() for s in specifiers.split(",") if s.strip().startswith(">=")]
        if len(lower) != 1:
            raise ValueError(f"{pyproject}: {requirement!r} has no single >= bound to install")
        bounds[name] = lower[0]
    return bounds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--except", dest="skip", nargs="*", default=[], metavar="NAME")
    parser.add_argument("--extra", dest="extras", nargs="*", default=[], metavar="EXTRA")
    args = parser.parse_args(argv)
    bounds = lower_bounds(extras=tuple(args.extras))
    unknown = set(args.skip) - set(bounds)
    if unknown:
        parser.error(f"not a core dependency: {', '.join(sorted(unknown))}")
    sys.stdout.write("".join(f"{n}=={v}\n" for n, v in bounds.items() if n not in args.skip))
    return 0


if __name__ == "__main__":
    sys.exit(main())
