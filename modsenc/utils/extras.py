"""The optional parts of modsenc, each an extra of the package (pyproject.toml): a path that needs
one checks for it first, so a missing extra is one line that names it, not a traceback."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence

from modsenc.utils.errors import MissingDependencyError


def install_hint(extra: str) -> str:
    """How to add ``extra``: from the wheel (or an index), or in a clone."""
    return f"pip install 'modsenc[{extra}]' (in a clone: pip install -e '.[{extra}]')"


def _installed(name: str) -> bool:
    if name in sys.modules:  # imported already (None: marked as absent)
        return sys.modules[name] is not None
    return importlib.util.find_spec(name) is not None


def require_extra(modules: Sequence[str], extra: str, purpose: str) -> None:
    """Raise :class:`MissingDependencyError` naming ``extra`` when any of ``modules`` (top-level
    import names) is not installed. Only looks (``find_spec``): imports nothing."""
    missing = [name for name in modules if not _installed(name)]
    if missing:
        raise MissingDependencyError(f"{purpose} needs {', '.join(missing)}: {install_hint(extra)}")
