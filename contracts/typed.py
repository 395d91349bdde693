"""Typed config building shared by every stage: a misspelt key lists the valid keys, a wrong type names the field
and the type (submitit / torchtitan style). Standard library only."""

from __future__ import annotations

import dataclasses
import difflib
import functools
import types
import typing
from typing import Any

from contracts.errors import ConfigError


def suggest(bad: str, valid: typing.Iterable[str]) -> str:
    """Return ``" Did you mean 'x' or 'y'?"`` for the (up to two) closest valid spellings, or ``""``."""
    close = difflib.get_close_matches(str(bad), [str(v) for v in valid], n=2, cutoff=0.6)
    return f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def _type_ok(value: Any, tp: Any) -> bool:
    origin = typing.get_origin(tp)
    if tp is Any:
        return True
    if origin in (types.UnionType, typing.Union):
        return any(_type_ok(value, a) for a in typing.get_args(tp))
    if tp is type(None):
        return value is None
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if origin in (tuple, list):
        args = typing.get_args(tp)
        return isinstance(value, tuple | list) and all(_type_ok(v, args[0]) for v in value) if args else True
    if origin is dict or tp is dict:
        return isinstance(value, dict)
    if isinstance(tp, type):
        return isinstance(value, tp)
    return True


def _type_name(tp: Any) -> str:
    return str(tp).replace("typing.", "").replace("<class '", "").replace("'>", "")


@functools.cache
def _shape(cls: type) -> tuple[dict[str, Any], dict[str, dataclasses.Field[Any]]]:
    """The resolved type hints and the init fields of dataclass ``cls`` (resolved once per class: about 1 ms each)."""
    return typing.get_type_hints(cls), {f.name: f for f in dataclasses.fields(cls) if f.init}


def build(cls: type, data: dict[str, Any], where: str) -> Any:
    """Build dataclass ``cls`` from a plain mapping, checking keys and types.

    Raises:
        ConfigError: an unknown key (lists the valid keys) or a value of the wrong type (names field and type).
    """
    hints, fields = _shape(cls)
    unknown = [k for k in data if k not in fields]
    if unknown:
        k = unknown[0]
        raise ConfigError(
            f"unknown key {where}.{k}.{suggest(k, fields)} Valid keys of {where}: {', '.join(sorted(fields))}"
        )
    kw: dict[str, Any] = {}
    for name, value in data.items():
        tp = hints[name]
        if isinstance(value, list) and typing.get_origin(tp) in (tuple,) or (
            isinstance(value, list) and any(typing.get_origin(a) is tuple for a in typing.get_args(tp))
        ):
            value = tuple(value)
        wrong = wrong_type(cls, name, value)
        if wrong:
            raise ConfigError(f"{where}.{name}={value!r} has the wrong type: expected {wrong}")
        kw[name] = value
    missing = [n for n, f in fields.items() if n not in kw and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ConfigError(f"{where} is missing required keys: {', '.join(missing)}")
    return cls(**kw)


def wrong_type(cls: type, name: str, value: Any) -> str | None:
    """The type field ``name`` of dataclass ``cls`` needs when ``value`` does not have it (a list stands for a
    tuple, a string for a string enum), else None; an unknown field is None too."""
    tp = _shape(cls)[0].get(name)
    if tp is None:
        return None
    if isinstance(tp, type) and issubclass(tp, str) and isinstance(value, str):  # StrEnum fields hold their text
        return None
    if isinstance(value, list) and (typing.get_origin(tp) is tuple
                                    or any(typing.get_origin(a) is tuple for a in typing.get_args(tp))):
        value = tuple(value)
    return None if _type_ok(value, tp) else _type_name(tp)


def one_of(where: str, value: Any, allowed: typing.Sequence[Any]) -> None:
    if value not in allowed:
        shown = ", ".join("null" if a is None else str(a) for a in allowed)
        raise ConfigError(f"{where}={value!r} is not allowed.{suggest(str(value), [str(a) for a in allowed])} "
                          f"Valid values: {shown}")


def positive(where: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise ConfigError(f"{where}={value} must be >= 1")
