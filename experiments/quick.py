"""The top-level settings of ``action=status`` and ``action=cancel`` without Hydra's compose (issue 17).

Both actions read only top-level keys (``sweep_id``, ``output_dir``, ``results_root``, ...) and, for
``sweep_id=latest``, the preset's name: Hydra's import and compose took about 0.3 s of a 0.5 s status. A command
line of plain ``key=value`` words is read here from ``conf/config.yaml`` and the ``sweep=`` preset's YAML; anything
else (a ``+``/``~`` override, a dotted key, a group other than ``sweep``, a comma list, a value outside
``[A-Za-z0-9_./-]`` or one that reads as a number other than a plain integer or decimal) returns None, and the
caller composes as before (:func:`experiments.compose.compose_overrides`).

The errors are the full compose's, in its order (CONTRACTS §1, exit 2): an unknown ``sweep=`` option, then an
unknown key (named, the valid keys listed, the closest suggested: :func:`experiments.compose._check_key` on the
composed top level), then :class:`experiments.settings.SweepSettings`' checks. tests/experiments/test_quick.py
checks that both paths give the same settings and the same error text.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from experiments.compose import CONF_DIR, GROUPS, _check_key, _check_option
from experiments.settings import SweepSettings

_WORD = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=([A-Za-z0-9_./-]*)")
_INT = re.compile(r"[+-]?(0|[1-9][0-9]*)")
_FLOAT = re.compile(r"[+-]?[0-9]+\.[0-9]+")
_NUMBERISH = re.compile(r"[+-]?[0-9._]*([eE][+-]?[0-9_]*)?")  # Hydra may read these as numbers: leave to Hydra
_SPECIAL = ("inf", "+inf", "-inf", "nan", "+nan", "-nan")
_INTERP = re.compile(r"\$\{sweep\.([a-z_]+)\}")
_UNSET = object()


def _value(text: str) -> Any:
    """The value Hydra's grammar gives ``text`` (a word of ``[A-Za-z0-9_./-]``), or ``_UNSET`` when unsure."""
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "null":
        return None
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    if low in _SPECIAL or _NUMBERISH.fullmatch(text):
        return _UNSET
    return text


@cache
def _yaml(path: str) -> dict[str, Any]:
    import yaml

    with open(path) as f:
        return yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}


def _top_level() -> tuple[dict[str, Any], str]:
    """conf/config.yaml's top-level values (groups excluded) and its default preset."""
    data = dict(_yaml(str(CONF_DIR / "config.yaml")))
    defaults = data.pop("defaults", [])
    preset = next(d["sweep"] for d in defaults if isinstance(d, dict) and "sweep" in d)
    return data, preset


def composed_keys() -> list[str]:
    """The top-level keys of the composed config: conf/config.yaml's keys plus each group of its defaults list
    that names an option (``container: null`` adds none)."""
    data, _ = _top_level()
    defaults = _yaml(str(CONF_DIR / "config.yaml")).get("defaults", [])
    groups = [k for d in defaults if isinstance(d, dict) for k, v in d.items() if v is not None]
    return sorted({*data, *groups})


def quick_settings(argv: list[str]) -> tuple[SweepSettings, str] | None:
    """(settings, preset name) of a plain command line, or None when it needs the full compose.

    Raises:
        ConfigError: an unknown ``sweep=`` option, an unknown key, or a bad value (the full compose's message).
    """
    words = [_WORD.fullmatch(a) for a in argv]
    if not all(words):
        return None
    given = [(m.group(1), m.group(2)) for m in words if m is not None]
    if any(k in GROUPS and k != "sweep" for k, _ in given):
        return None
    data, preset = _top_level()
    for key, text in given:  # group options first, as compose_overrides checks them
        if key == "sweep":
            preset = _check_option("sweep", text)
    keys = {k: None for k in composed_keys()}
    values = dict(data)
    for key, text in given:
        if key == "sweep":
            continue
        if key not in data:
            _check_key(keys, key, adding=False)  # an unknown key: raises
        if isinstance(data.get(key), dict):
            return None  # a whole group (payload=...): Hydra's own words
        value = _value(text)
        if value is _UNSET:
            return None
        values[key] = value
    sweep = _yaml(str(CONF_DIR / "sweep" / f"{preset}.yaml"))
    for key, value in values.items():
        if isinstance(value, str) and "${" in value:
            m = _INTERP.fullmatch(value)
            if m is None or m.group(1) not in sweep:
                return None
            values[key] = sweep[m.group(1)]
    return SweepSettings.from_cfg(values), str(sweep.get("name") or preset)
