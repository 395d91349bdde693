"""Compose the Hydra config (conf/) from command-line overrides, and split out the swept axes.

Overrides use the standard Hydra grammar. Comma lists are sweeps, but they expand *in our code* into the variants of
one sweep (not into Hydra multirun processes):

- ``dispatcher=``, ``overlap=``, ``delay_wgrad=`` restrict the three knob axes of the preset's stages;
- any other swept key (``model.expert_model_parallel_size=8,16``) becomes an *extra axis* that defines groups;
- except under ``cluster.env_vars.``: an environment value is one string, so ``NCCL_IB_HCA=mlx5_0,mlx5_1`` is kept
  whole.

Hydra's compose API is used for composition (struct mode: an unknown key fails); our own checks run first so that
errors name the bad key or option, list the valid ones and suggest the closest spelling (CASES C12).
"""

from __future__ import annotations

import functools
import itertools
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.config import ConfigError, suggest

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"
KNOB_GROUPS = ("dispatcher", "overlap", "delay_wgrad")
GROUPS = ("model", "cluster", "container", "sweep", "precision") + KNOB_GROUPS
ENV_PREFIX = "cluster.env_vars."  # a comma in these values is part of the value (:func:`_env_value_whole`)
_BOOL_WORDS = {"on": True, "off": False, "true": True, "false": False, True: True, False: False}


@dataclass(frozen=True)
class Axis:
    """An extra swept axis: a dotted config key (or a config group name) and its values, in command-line order."""

    key: str
    values: tuple[Any, ...]


@dataclass(frozen=True)
class Composed:
    """The composed config for each combination of swept config-group choices, plus the axes.

    ``configs`` maps a tuple of ``(group, option)`` pairs for swept groups (empty when none) to a plain dict.
    ``knobs`` holds the command-line restriction of each knob axis (``None`` when not given). ``keys``: the key
    or group of each override, as Hydra's override parser reads it (``+history.db_url=x`` sets
    ``history.db_url``; quotes are Hydra's, so ``"action='status'"`` sets ``action``).
    """

    configs: dict[tuple[tuple[str, str], ...], dict[str, Any]]
    knobs: dict[str, tuple[Any, ...] | None]
    extra_axes: tuple[Axis, ...]
    overrides: tuple[str, ...]
    keys: tuple[str, ...] = ()

    @property
    def base(self) -> dict[str, Any]:
        """The config of the first group combination (what top-level keys are read from)."""
        return next(iter(self.configs.values()))

    def given(self, group: str) -> set[str]:
        """The keys below ``group`` (``history``, ``analysis``) that the command line sets, adds or deletes:
        ``analysis.bootstrap=500`` gives ``{"bootstrap"}``."""
        return {k.split(".", 1)[1] for k in self.keys if k.startswith(group + ".")}


def group_options(group: str) -> list[str]:
    """The selectable options of a config group: its YAML files, without the private ``_*.yaml`` ones."""
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml") if not p.stem.startswith("_"))


def _check_option(group: str, option: Any) -> str:
    opts = group_options(group)
    if group in ("overlap", "delay_wgrad"):
        key = option.lower() if isinstance(option, str) else option
        if key not in _BOOL_WORDS:
            raise ConfigError(f"{group}={option!r} is not a valid option.{suggest(str(option), opts)} "
                              f"Valid options: {', '.join(opts)}")
        return "on" if _BOOL_WORDS[key] else "off"
    if str(option) not in opts:
        raise ConfigError(f"{group}={option!r} is not a valid option.{suggest(str(option), opts)} "
                          f"Valid options: {', '.join(opts)}")
    return str(option)


def _parse(overrides: list[str]):
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        return OverridesParser.create().parse_overrides(overrides)
    except Exception as e:  # hydra.errors.OverrideParseException
        raise ConfigError(f"cannot parse the command line: {e}. Quote a value that contains a comma, "
                          "e.g. 'model.tag=\"a,b\"'") from None


@functools.cache
def use_core_plugins() -> None:
    """Make Hydra's plugin registry (``hydra.core.plugins.Plugins.instance()``, one per process) with its core
    plugins only, unless it exists already or ``hydra_plugins`` is imported already (then it is left as it is).

    Hydra 1.3 builds the registry on first use by importing every module under the ``hydra_plugins`` namespace
    package of the environment (``Plugins._initialize``), and it treats an ImportError of ``hydra_plugins`` as "no
    plugin installed". The sweep composes ``conf/`` from its file config source (a core plugin) and expands its
    axes in its own code, so it uses no third-party launcher, sweeper, search-path or config-source plugin; in a
    Megatron-Bridge environment the scan imported multi-storage-client's config-source plugin and with it
    multi-storage-client, jsonschema and opentelemetry, about 0.8 s before composition (``python -X importtime``).
    So ``hydra_plugins`` is unimportable while the registry is made, and importable again right after (a later
    ``import hydra_plugins`` gets the real package); the registry, once made, never scans again. Called once per
    process, before the first compose.
    """
    from hydra.core.plugins import Plugins

    if "hydra_plugins" in sys.modules:
        Plugins.instance()
        return
    sys.modules["hydra_plugins"] = None  # type: ignore[assignment]  # import raises ImportError: "no plugins"
    try:
        Plugins.instance()
    finally:
        if sys.modules.get("hydra_plugins", 0) is None:
            del sys.modules["hydra_plugins"]


def _compose(group_choices: dict[str, str], value_overrides: list[str]) -> dict[str, Any]:
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    ov = [f"{g}={o}" for g, o in group_choices.items()] + value_overrides
    use_core_plugins()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        try:
            cfg = compose(config_name="config", overrides=ov)
        except Exception as e:
            raise ConfigError(_explain_compose_error(e)) from None
    try:
        return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
    except Exception as e:
        raise ConfigError(f"cannot resolve the config: {e}") from None


def _explain_compose_error(e: Exception) -> str:
    text = str(e)
    cause = e.__cause__ or e.__context__
    if cause is not None and "not in struct" in str(cause):
        text = f"{text} ({str(cause).splitlines()[0]})"
    return text.replace("\n", " ")


_OPEN_MAPPINGS = ("cluster.env_vars", "history")  # where '+key=' adds a key (env vars; HistoryConfig's extras)


def _check_key(cfg: dict[str, Any], key: str, adding: bool) -> None:
    """Raise ConfigError unless dotted ``key`` exists in ``cfg`` (or, when ``adding``, its parent is a mapping
    that takes new keys: ``cluster.env_vars``, ``history``; the top level and the typed groups take none)."""
    node: Any = cfg
    parts = key.split(".")
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        parent = ".".join(parts[:i])
        if isinstance(node, dict) and part in node:
            node = node[part]
            continue
        if last and adding and isinstance(node, dict) and i > 0:  # the typed group checks the new key
            return
        where = parent or "the top level"
        valid = sorted(node) if isinstance(node, dict) else []
        hint = suggest(part, valid)
        if parent in _OPEN_MAPPINGS and not adding and not hint:
            hint = f" To add a new key use '+{key}=...'"
        raise ConfigError(f"unknown key {key!r}: {part!r} is not a key of {where}.{hint} "
                          f"Valid keys: {', '.join(valid)}")


def compose_overrides(overrides: list[str]) -> Composed:
    """Parse ``overrides`` and compose the config once per combination of swept group choices.

    Raises:
        ConfigError: an unparsable override, an unknown group option, an unknown key, or a sweep over ``sweep=``.
    """
    parsed = _parse(overrides)
    group_fixed: dict[str, str] = {}
    group_swept: dict[str, tuple[str, ...]] = {}
    knobs: dict[str, tuple[Any, ...] | None] = dict.fromkeys(KNOB_GROUPS)
    value_overrides: list[tuple[str, Any, str, bool]] = []  # key, parsed, text, adding
    for o, text in zip(parsed, overrides, strict=True):
        key = o.key_or_group
        sweep = o.is_sweep_override()
        values = tuple(o.sweep_string_iterator()) if sweep else None
        if key in GROUPS and o.package is None and "." not in key:
            vals = values if sweep else (o.get_value_element_as_str(),)
            if key in KNOB_GROUPS:
                raw = tuple(o.sweep_iterator()) if sweep else (o.value(),)
                knobs[key] = tuple(dict.fromkeys(_check_option(key, v) for v in raw))
                continue
            if sweep and key == "sweep":
                raise ConfigError("sweep= takes one preset, not a list. Valid presets: "
                                  + ", ".join(group_options("sweep")))
            checked = tuple(_check_option(key, v) for v in vals)
            if sweep:
                group_swept[key] = checked
            else:
                group_fixed[key] = checked[0]
            continue
        adding = text.lstrip().startswith("+")
        if sweep and key.startswith(ENV_PREFIX):
            text = _env_value_whole(key, text, adding)
            o = _parse([text])[0]
        value_overrides.append((key, o, text, adding))

    combos = [dict(zip(group_swept, c, strict=True)) for c in itertools.product(*group_swept.values())] or [{}]
    configs: dict[tuple[tuple[str, str], ...], dict[str, Any]] = {}
    extra: dict[str, tuple[Any, ...]] = {k: v for k, v in group_swept.items()}
    for combo in combos:
        choices = {**group_fixed, **combo}
        fixed_ov: list[str] = []
        for key, o, text, adding in value_overrides:
            if o.is_sweep_override():
                from hydra.core.override_parser.types import Transformer

                vals = tuple(o.sweep_iterator(transformer=Transformer.identity))
                extra[key] = tuple(dict.fromkeys(_hashable(v) for v in vals))
                first = list(o.sweep_string_iterator())[0]
                fixed_ov.append(f"{'+' if adding else ''}{key}={first}")
            else:
                fixed_ov.append(text)
        if any(adding for _, _, _, adding in value_overrides):
            # Hydra takes '+key=' anywhere, so a new key is checked before it is composed in (else '+modle=' would be
            # accepted and ignored); only commands that add keys pay for this second composition
            probe = _compose(choices, [])
            for key, _, _, adding in value_overrides:
                if adding:
                    _check_key(probe, key, adding)
        try:
            configs[tuple(sorted(combo.items()))] = cfg = _compose(choices, fixed_ov)
            _check_sections(cfg, choices)
            _check_names(cfg, choices, {o.key_or_group for o in parsed})
        except ConfigError:
            # name the unknown key and the valid ones (a second composition, only on this error path: every
            # successful command composes once per combination)
            probe = _compose(choices, [])
            for key, _, _, adding in value_overrides:
                _check_key(probe, key, adding)
            raise
    axes = tuple(Axis(k, v) for k, v in extra.items())
    return Composed(configs=configs, knobs=knobs, extra_axes=axes, overrides=tuple(overrides),
                    keys=tuple(o.key_or_group for o in parsed))


SECTIONS = ("model", "cluster", "sweep", "dispatcher", "overlap", "delay_wgrad", "precision", "fabric", "payload",
            "analysis", "history")  # the top-level keys that hold a mapping of keys (CONTRACTS §1)


def _check_sections(cfg: dict[str, Any], choices: dict[str, str]) -> None:
    """Each of :data:`SECTIONS` is a mapping: ``payload=7`` or ``payload=null`` on the command line replaces the
    whole section, which every later stage reads key by key.

    Raises:
        ConfigError: names the section, the value given and its keys (from a composition without the overrides).
    """
    for key in SECTIONS:
        if key in cfg and not isinstance(cfg[key], dict):
            keys = _compose(choices, []).get(key) or {}
            shown = "null" if cfg[key] is None else repr(cfg[key])
            raise ConfigError(f"{key}={shown}: {key} is a section of keys ({', '.join(keys)}), not a value; "
                              f"set its keys one at a time, e.g. {key}.{next(iter(keys), 'KEY')}=...")


def _check_names(cfg: dict[str, Any], choices: dict[str, str], given: set[str]) -> None:
    """A profile's ``name`` is its file's: ``conf/cluster/my_site.yaml`` copied from ``example_site.yaml`` with
    ``name: example_site`` left in would be recorded as that cluster and history series.

    Raises:
        ConfigError: names the file, the name inside it and the fix (``<group>.name=`` on the command line is
            the user's explicit choice and is kept).
    """
    for group in ("model", "cluster", "container", "sweep"):
        option, profile = choices.get(group), cfg.get(group)
        if option is None or not isinstance(profile, dict) or f"{group}.name" in given:
            continue
        name = profile.get("name")
        if name != option.rsplit("/", 1)[-1]:
            raise ConfigError(f"{group}={option}: conf/{group}/{option}.yaml says name: {name}, but a profile's name "
                              f"is its file's (it keys the manifest and the history series). Write "
                              f"'name: {option}' in that file")


def _env_value_whole(key: str, text: str, adding: bool) -> str:
    """``cluster.env_vars.X=a,b`` as the one string ``"a,b"``: an environment variable holds one value (NCCL's
    ``NCCL_IB_HCA=mlx5_0,mlx5_1``), so a comma in it is never a sweep axis.

    Raises:
        ConfigError: the value also holds a double quote (it cannot be kept whole unambiguously).
    """
    value = text.split("=", 1)[1]
    if '"' in value:
        raise ConfigError(f"{text}: an environment variable is one string, never a sweep; quote the whole value, "
                          f"e.g. '{key}=\"a,b\"'")
    return f'{"+" if adding else ""}{key}="{value}"'


def _hashable(v: Any) -> Any:
    return tuple(v) if isinstance(v, list) else v
