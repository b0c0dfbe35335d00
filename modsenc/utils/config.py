"""Typed recipe sections: dataclasses whose field defaults are the recipe's defaults.

A recipe is a YAML mapping of sections (``la: {r: 8, lr: 1.0e-3}``). A command that declares its
sections as ``Section`` dataclasses gets, from ``Section.from_dict``:

* every default in one place, the field's default (a key the recipe leaves out takes it);
* an error for every key the section does not declare, in one line that lists the keys it does
  (``unknown recipe key 'se.lrr'; se takes: r, alpha, ...``), so a typo never trains silently
  with the default;
* values converted to the field's type (``lr: 1e-3``, a string in YAML 1.1, becomes a float), or
  an error naming the key.

``set_dotted`` applies a command-line ``--set a.b.c=value`` along the same declarations, so a key
the YAML file leaves out can still be set, and a free-form mapping (``cla.adapter``, handed as is to
a library's config class) can be set one key at a time (``--set cla.adapter.non_linearity=gelu``).

``load_recipe`` (``modsenc.training.recipe``) returns the validated top-level section, and that one
object goes to the stages (``Section.of`` passes it through unchecked; it validates only a mapping
from the Python API). ``given`` records which keys the recipe wrote, so ``per_language`` settings
merge over them and the merged section is validated again as a whole.

Why not pydantic (installed, through fastapi) or OmegaConf: both would still need ``set_dotted``
(neither sets ``--set a.b.c`` along declarations into free-form mappings) and a translation of
their errors into the one-line messages the commands print and the tests assert (the key's
dotted path, the section's keys in declaration order, the budget checks, ``1e-3`` read as a
string by YAML 1.1, a YAML ``no`` in a string field, the objective section whose flat keys belong
to several objectives); that translation would be about as long as ``from_dict`` and ``coerce``
together, so the schema stays these few functions.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar, Union

from modsenc.utils.errors import InputError

S = TypeVar("S", bound="Section")


class RecipeError(InputError):
    """A recipe key that does not exist, or a value of the wrong type (one line, for the user)."""


class Section:
    """Base of a dataclass recipe section (subclasses are ``@dataclass``es, every field with a default)."""

    # Counts (``*_every``) for which 0 is meaningful ("never"), exempt from the positivity check.
    zero_allowed: ClassVar[tuple[str, ...]] = ()
    # Set by ``from_dict`` (plain attributes, not recipe keys: Section itself is no dataclass):
    # the keys the mapping gave (what a ``per_language`` section merges over), and for a whole
    # recipe the file it was read from (its ``_recipe_path``; relative data paths start there).
    given: frozenset[str] = frozenset()
    recipe_path: str | None = None

    @classmethod
    def of(cls: type[S], recipe: S | Mapping[str, Any]) -> S:
        """``recipe`` as this section: a typed one as it is (validated when it was made), a
        mapping (the Python API's, or a script's derived recipe) validated here, once."""
        return recipe if isinstance(recipe, cls) else cls.from_dict(recipe)

    @classmethod
    def keys(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]

    @classmethod
    def field_types(cls) -> dict[str, Any]:
        """The declared type of each key (ClassVars such as ``zero_allowed`` are not keys)."""
        hints = _hints(cls)
        return {f.name: hints[f.name] for f in dataclasses.fields(cls)}  # type: ignore[arg-type]

    @classmethod
    def from_dict(cls: type[S], mapping: Mapping[str, Any] | None, where: str = "") -> S:
        """The section from a recipe mapping (``None``: all defaults). ``where`` is its dotted path
        in the recipe (``""`` for the whole recipe, whose ``_private`` keys are skipped)."""
        if mapping is None:
            mapping = {}
        if not isinstance(mapping, Mapping):
            raise RecipeError(
                f"recipe section '{where}' must be a mapping of keys, got {mapping!r}; "
                f"{where} takes: {', '.join(cls.keys())}"
            )
        hints = cls.field_types()
        values = {}
        for key, value in mapping.items():
            if not where and isinstance(key, str) and key.startswith("_"):
                continue  # set by the program (``_recipe_path``), not by the recipe
            if key not in hints:
                raise unknown_key(cls, _join(where, str(key)), where)
            values[key] = coerce(value, hints[key], _join(where, key))
        for key, tp in hints.items():  # a section the recipe leaves out is checked too, as defaults
            if key not in values and isinstance(tp, type) and issubclass(tp, Section):
                values[key] = tp.from_dict(None, _join(where, key))
        check_budgets(values, where, cls.zero_allowed)
        try:
            section = cls(**_one_budget(cls, values, where))
        except RecipeError:
            raise
        except ValueError as err:  # a section's own __post_init__ check (the objectives' configs)
            raise RecipeError(str(err)) from err
        section.validate(where)
        section.given = frozenset(k for k in mapping if k in hints)
        if not where:
            section.recipe_path = mapping.get("_recipe_path")
        return section

    def validate(self, where: str) -> None:
        """Checks across keys (subclasses override); raise RecipeError."""

    def to_dict(self) -> dict[str, Any]:
        """Every key with its value, defaults filled in (what cache keys and manifests record)."""
        return dataclasses.asdict(self)  # type: ignore[call-overload]

    def as_written(self) -> dict[str, Any]:
        """Only the keys the recipe gave (``given``), nested sections likewise: what a recipe
        mapping of this section said, to merge another over and validate again."""
        values = {k: getattr(self, k) for k in self.keys() if k in self.given}
        return {k: v.as_written() if isinstance(v, Section) else v for k, v in values.items()}

    def replace(self: S, **changes: Any) -> S:
        """A copy with ``changes`` (typed sections or values already checked), keeping ``given``
        and ``recipe_path``."""
        copy = dataclasses.replace(self, **changes)  # type: ignore[type-var]
        copy.given, copy.recipe_path = self.given | changes.keys(), self.recipe_path
        return copy


# Counts that must be positive wherever a section declares them (a negative max_steps once trained
# nothing and installed the untrained modules); ``*steps`` counts (warm-up) may be zero.
_POSITIVE = ("max_steps", "epochs")
_POSITIVE_SUFFIXES = ("batch_size", "_every")


def check_budgets(values: Mapping[str, Any], where: str, zero_allowed: tuple[str, ...] = ()) -> None:
    """Refuse non-positive step counts, epochs and batch sizes among a section's given ``values``
    (those named in ``zero_allowed`` may be 0)."""
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        positive = name in _POSITIVE or name.endswith(_POSITIVE_SUFFIXES)
        if positive and name not in zero_allowed:
            if not value > 0:  # NaN fails too
                raise RecipeError(f"recipe key '{_join(where, name)}' must be positive, got {value!r}")
        elif (positive or name.endswith("steps")) and not value >= 0:
            raise RecipeError(f"recipe key '{_join(where, name)}' must be zero or more, got {value!r}")


def _one_budget(cls: type[Section], values: dict[str, Any], where: str) -> dict[str, Any]:
    """``epochs`` and ``max_steps`` are one budget: the one the recipe sets replaces the other's
    default; both set (not null) is refused, naming the one to drop."""
    if not {"epochs", "max_steps"} <= set(cls.keys()):
        return values
    given = [k for k in ("epochs", "max_steps") if values.get(k) is not None]
    if len(given) == 2:
        raise RecipeError(
            f"recipe keys '{_join(where, 'epochs')}' ({values['epochs']}) and '{_join(where, 'max_steps')}' "
            f"({values['max_steps']}) are both set; a stage has one budget: drop one, e.g. "
            f"--set {_join(where, 'epochs')}=null"
        )
    if len(given) == 1:
        other = "max_steps" if given[0] == "epochs" else "epochs"
        values = {**values, other: None}
    return values


def unknown_key(cls: type[Section], dotted: str, where: str) -> RecipeError:
    return RecipeError(
        f"unknown recipe key '{dotted}'; {where or 'the recipe'} takes: {', '.join(cls.keys())}"
    )


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (Union, types.UnionType)


def section_class(tp: Any) -> type[Section] | None:
    """The Section class a field holds (``LAConfig`` or ``LAConfig | None``), else None."""
    if isinstance(tp, type) and issubclass(tp, Section):
        return tp
    if _is_union(tp):
        found = [a for a in typing.get_args(tp) if isinstance(a, type) and issubclass(a, Section)]
        return found[0] if len(found) == 1 else None
    return None


def _describe(tp: Any) -> str:
    if _is_union(tp):
        return " or ".join(_describe(a) for a in typing.get_args(tp))
    origin = typing.get_origin(tp) or tp
    names = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}
    names |= {list: "a list", dict: "a mapping", type(None): "null"}
    return names.get(origin, getattr(origin, "__name__", str(origin)))


def coerce(value: Any, tp: Any, where: str) -> Any:
    """``value`` as the declared type ``tp`` (or a RecipeError naming the key ``where``)."""
    if tp is Any:
        return value
    if _is_union(tp):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        alternatives = [a for a in args if a is not type(None)]
        if len(alternatives) == 1:  # ``X | None``: X's own error (an unknown key inside it, say)
            return coerce(value, alternatives[0], where)
        sections = [a for a in alternatives if section_class(a) is not None]
        if isinstance(value, Mapping) and len(sections) == 1:  # a mapping can only be the section
            return coerce(value, sections[0], where)
        for arg in alternatives:
            try:
                return coerce(value, arg, where)
            except RecipeError:
                continue
        raise RecipeError(f"recipe key '{where}' must be {_describe(tp)}, got {value!r}")
    nested = section_class(tp)
    if nested is not None:
        return nested.from_dict(value, where)
    origin = typing.get_origin(tp) or tp
    ok: Any = _MISSING
    if origin is bool:
        ok = value if isinstance(value, bool) else _MISSING
    elif origin is int:
        if isinstance(value, int) and not isinstance(value, bool):
            ok = value
        elif isinstance(value, float) and value.is_integer():
            ok = int(value)
    elif origin is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            ok = float(value)
        elif isinstance(value, str):  # YAML 1.1 reads ``1e-3`` (no dot) as a string
            try:
                ok = float(value)
            except ValueError:
                ok = _MISSING
    elif origin is str:
        if isinstance(value, (str, int, float)):  # a bool too: ``precision: no`` would read as False
            ok = str(value)
    elif origin in (list, dict) and value is None:
        ok = origin()  # an empty YAML value (``mono:``) is an empty list or mapping
    elif origin is list:
        if isinstance(value, (list, tuple)):
            (item,) = typing.get_args(tp) or (Any,)
            ok = [coerce(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
    elif origin is dict:
        if isinstance(value, Mapping):
            _, item = typing.get_args(tp) or (str, Any)
            ok = {k: coerce(v, item, _join(where, str(k))) for k, v in value.items()}
    else:
        ok = value
    if ok is _MISSING:
        raise RecipeError(f"recipe key '{where}' must be {_describe(tp)}, got {value!r}")
    return ok


_MISSING = object()


def set_dotted(recipe: dict[str, Any], schema: type[Section], dotted: str, value: Any) -> None:
    """Set ``dotted`` (``la.lr``, ``cla.adapter.non_linearity``) in the recipe mapping, along the
    sections ``schema`` declares: an unknown key is a RecipeError listing the section's keys; a key
    the mapping lacks is created; inside a free-form mapping any key can be set."""
    keys = dotted.split(".")
    node: dict[str, Any] = recipe
    node_tp: Any = schema
    for depth, key in enumerate(keys):
        where, here = ".".join(keys[:depth]), ".".join(keys[: depth + 1])
        section = section_class(node_tp)
        if section is not None:
            if key not in section.field_types():
                raise unknown_key(section, here, where)
            tp = section.field_types()[key]
        else:
            tp = _mapping_value_type(node_tp)
        if depth == len(keys) - 1:
            node[key] = value
            return
        child = node.get(key)
        if child is None and (section_class(tp) is not None or _mapping_value_type(tp) is not None):
            child = node[key] = {}
        if not isinstance(child, dict):
            raise RecipeError(
                f"recipe key '{here}' is not a mapping ({child!r}): set it whole (--set {here}=...)"
            )
        node, node_tp = child, tp


def _mapping_value_type(tp: Any) -> Any:
    """What a free-form mapping of type ``tp`` holds (Any for Any), or None if ``tp`` is no mapping."""
    if tp is Any:
        return Any
    if _is_union(tp):
        found = [v for v in map(_mapping_value_type, typing.get_args(tp)) if v is not None]
        return found[0] if found else None
    if (typing.get_origin(tp) or tp) in (dict, Mapping):
        args = typing.get_args(tp)
        return args[1] if args else Any
    return None
