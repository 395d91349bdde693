"""The shape of ``manifest.json`` checked once, when it is loaded (docs/CONTRACTS.md §12): a hand-edited or damaged
manifest fails with exit code 2 naming the bad value, before any stage trusts it.

Besides the types, names and paths are confined to the sweep folder: a variant name is a plain folder name
(``[A-Za-z0-9_][A-Za-z0-9_.-]*``, what :func:`contracts.records.safe_name` makes), so ``variants/<name>`` can never
climb out of the sweep (``../../escape``), and an attempt's ``log_dir`` is a relative path under its own variant's
folder, never absolute.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any

from contracts.cluster import ClusterConfig
from contracts.errors import ConfigError, ManifestError
from contracts.records import Variant
from contracts.statuses import ManifestStatus, values
from contracts.typed import wrong_type

NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
_TOP = {"sweep_id": str, "name": str, "created": str, "mode": str, "model": str, "cluster": str, "preflight": str,
        "config": dict, "container": dict, "warnings": list, "overrides": list, "stages": list, "runs": list,
        "variants": list, "design": dict, "blocks": list}
_KIND = {str: "a string", dict: "an object", list: "a list", int: "an integer"}
# the design fields a reader computes with (experiments/plan.py design_doc; analysis/measure/paired.py reads them)
_DESIGN: dict[str, type | tuple[type, ...]] = {"repeats": (int, str), "seed": int, "max_blocks": int, "practical_threshold": (int, float),
           "alpha": (int, float), "control": bool, "run_gpu_hours": dict}
# what every planner-written manifest has: without them a sweep is not one (a manifest without ``variants`` would
# show an empty table and claim a good sweep)
REQUIRED = ("sweep_id", "name", "variants")


def _bad(where: str, key: str, value: Any, want: str) -> ManifestError:
    shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
    return ManifestError(f"{where}: {key}={shown} must be {want}; restore the manifest from a backup, or plan a new "
                         "sweep")


def _typed(where: str, key: str, value: Any, tp: type) -> None:
    ok = isinstance(value, tp) and not (tp is int and isinstance(value, bool))
    if not ok:
        raise _bad(where, key, value, _KIND[tp])


def check_name(where: str, key: str, name: Any) -> None:
    """A variant name must be a plain folder name. Raises ManifestError naming it."""
    if not isinstance(name, str) or not NAME.match(name):
        raise _bad(where, key, name, "a plain folder name ([A-Za-z0-9_][A-Za-z0-9_.-]*): it names a folder "
                                     "inside the sweep")


def check_log_dir(where: str, key: str, variant: str, log_dir: str) -> None:
    """``log_dir`` must be ``""`` or a relative path under ``variants/<variant>/`` without ``..``."""
    if not log_dir:
        return
    path = PurePosixPath(log_dir)
    if path.is_absolute() or ".." in path.parts or path.parts[:2] != ("variants", variant):
        raise _bad(where, key, log_dir, f"a relative path under variants/{variant}/ (the sweep folder's own)")


def check_shape(data: dict[str, Any], where: str) -> None:
    """Check the types of the manifest's fields, its variant names and its attempts' paths.

    Raises:
        ManifestError: names the key path (``variants[2].attempts[0].log_dir``) and the bad value, or the missing
            required key (:data:`REQUIRED`).
    """
    missing = [k for k in REQUIRED if data.get(k) is None]
    if missing:
        raise ManifestError(f"{where}: has no {', '.join(missing)} (every manifest the planner writes has "
                            f"{', '.join(REQUIRED)}); restore the manifest from a backup, or plan a new sweep")
    for key, tp in _TOP.items():  # the planner writes none of them as null
        if key in data:
            _typed(where, key, data[key], tp)
    for i, s in enumerate(data.get("stages") or []):
        _typed(where, f"stages[{i}]", s, dict)
    for i, r in enumerate(data.get("runs") or []):
        _typed(where, f"runs[{i}]", r, dict)
        check_name(where, f"runs[{i}].variant", r.get("variant"))
        _typed(where, f"runs[{i}].repeat", r.get("repeat"), int)
    _check_config(data.get("config") or {}, where)
    for key, kind in _DESIGN.items():
        value = (data.get("design") or {}).get(key)
        if value is not None and not (isinstance(value, kind) and not (kind is not bool and isinstance(value, bool))):
            names = " or ".join(t.__name__ for t in kind) if isinstance(kind, tuple) else kind.__name__
            raise _bad(where, f"design.{key}", value, "of type " + names)
    for i, b in enumerate(data.get("blocks") or []):
        _typed(where, f"blocks[{i}]", b, dict)
        _typed(where, f"blocks[{i}].index", b.get("index"), int)
        _typed(where, f"blocks[{i}].order", b.get("order"), list)
    for i, v in enumerate(data.get("variants") or []):
        _typed(where, f"variants[{i}]", v, dict)
        check_name(where, f"variants[{i}].name", v.get("name"))
        for key, value in v.items():  # every field of the typed Variant record it becomes
            want = wrong_type(Variant, key, value)
            if want:
                raise _bad(where, f"variants[{i}].{key}", value, f"of type {want}")
        attempts = v.get("attempts") or []
        _typed(where, f"variants[{i}].attempts", attempts, list)
        for j, a in enumerate(attempts):
            at = f"variants[{i}].attempts[{j}]"
            _typed(where, at, a, dict)
            for k in ("attempt", "repeat"):
                _typed(where, f"{at}.{k}", a.get(k), int)
            if a.get("status") not in values(ManifestStatus):
                raise _bad(where, f"{at}.status", a.get("status"), "one of " + ", ".join(values(ManifestStatus)))
            _typed(where, f"{at}.log_dir", a.get("log_dir", ""), str)
            check_log_dir(where, f"{at}.log_dir", v["name"], a.get("log_dir", ""))


def _check_config(config: dict[str, Any], where: str) -> None:
    """``config``'s groups are objects, and ``config.cluster`` builds the typed cluster profile every action reads
    (:meth:`contracts.cluster.ClusterConfig.from_mapping`). Raises ManifestError naming the key."""
    for group in ("cluster", "history", "analysis", "payload", "model", "sweep"):
        if config.get(group) is not None:
            _typed(where, f"config.{group}", config[group], dict)
    if config.get("cluster"):
        try:
            ClusterConfig.from_mapping(config["cluster"], where="config.cluster")
        except ConfigError as e:
            raise ManifestError(f"{where}: {e}; restore the manifest from a backup, or plan a new sweep") from None
