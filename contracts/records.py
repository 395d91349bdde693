"""Typed, immutable records passed between stages (planner -> launcher -> payload -> analysis).

Dicts exist only at the JSON boundary: every record has ``to_json()`` and ``from_json()``.
The JSON field names are binding (CONTRACTS.md §3, §4, §6).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from typing import Any

from contracts.statuses import ManifestStatus, Role, values

SCHEMA_VERSION = 1

DISPATCHERS = ("alltoall", "allgather", "deepep", "hybridep", "ncclep")
FLEX_BACKENDS = ("deepep", "hybridep", "ncclep")


# Fields the payload may change without the run becoming invalid_variant (CONTRACTS §6)
DEFAULT_ALLOW_ADJUST = ("moe_shared_expert_overlap",)

_NAME_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")
DISPATCHER_SHORT = {"alltoall": "a2a", "allgather": "ag", "deepep": "deepep", "hybridep": "hybridep", "ncclep": "ncclep"}


def group_key(group: Any) -> str:
    """The one string key of a group (CONTRACTS §2): its ``key=value`` pairs sorted by key and comma-joined, e.g.
    ``model.expert_model_parallel_size=8``; ``""`` for a sweep without extra axes (or a group that is not a mapping).
    The manifest, the comparisons and the history database all key groups by it."""
    if not isinstance(group, dict):
        return ""
    return ",".join(f"{k}={group[k]}" for k in sorted(group))


def safe_name(text: str, limit: int = 64) -> str:
    """Return ``text`` made safe as a Slurm job name and folder name: ``[A-Za-z0-9_.-]``, at most ``limit`` chars.

    Runs of other characters (``=``, ``,``, spaces, slashes) become a single ``-`` (CASES C11).
    Names longer than ``limit`` keep their head and get a short stable hash so that they stay unique.
    """
    out = _NAME_SAFE.sub("-", str(text)).strip("-") or "x"
    if len(out) > limit:
        import hashlib

        digest = hashlib.sha1(out.encode()).hexdigest()[:8]
        out = out[: limit - 9].rstrip("-.") + "-" + digest
    return out


def variant_name(dispatcher: str, overlap: bool, delay_wgrad: bool, axes: dict[str, Any]) -> str:
    """Deterministic, readable variant name, e.g. ``a2a.ovl1.dw0.ep16`` (CONTRACTS §2).

    Extra axes add ``.<short key><value>`` in key order; ``expert_model_parallel_size`` shortens to ``ep``,
    other keys to their last dotted component.
    """
    parts = [DISPATCHER_SHORT.get(dispatcher, dispatcher), f"ovl{int(overlap)}", f"dw{int(delay_wgrad)}"]
    for key in sorted(axes):
        parts.append(f"{short_axis_key(key)}{_fmt_axis_value(axes[key])}")
    return safe_name(".".join(parts))


_AXIS_SHORT = {
    "expert_model_parallel_size": "ep",
    "tensor_model_parallel_size": "tp",
    "pipeline_model_parallel_size": "pp",
    "virtual_pipeline_model_parallel_size": "vpp",
    "context_parallel_size": "cp",
    "expert_tensor_parallel_size": "etp",
    "global_batch_size": "gbs",
    "micro_batch_size": "mbs",
    "seq_length": "seq",
    "num_layers": "layers",
    "nodes": "nodes",
}


def short_axis_key(key: str) -> str:
    """Short label of an extra axis key (``model.expert_model_parallel_size`` -> ``ep``)."""
    last = key.split(".")[-1]
    if key.startswith("cluster.env_vars."):
        return safe_name(last.lower())
    return _AXIS_SHORT.get(last, last)


def _fmt_axis_value(value: Any) -> str:
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, list | tuple):
        return "-".join(str(v) for v in value)
    return str(value)


@dataclass(frozen=True, kw_only=True)
class Variant:
    """One point of the swept product: dispatcher x overlap x delay_wgrad x extra axes (CONTRACTS §2).

    ``settings`` holds every resolved field the job gets, under Megatron-Core/Bridge names (CONTRACTS §9),
    including ``moe_token_dispatcher_type``, ``moe_flex_dispatcher_backend``,
    ``overlap_moe_expert_parallel_comm`` and ``delay_wgrad_compute`` (always explicit true/false).
    ``group`` is the variant's values on the extra axes; comparisons happen only inside a group.
    """

    name: str
    dispatcher: str
    overlap: bool
    delay_wgrad: bool
    axes: dict[str, Any] = field(default_factory=dict)
    group: dict[str, Any] = field(default_factory=dict)
    role: Role = Role.VARIANT
    stage: int = 1
    stage_name: str = ""
    gate: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    status: ManifestStatus = ManifestStatus.PLANNED
    reasons: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    allow_adjust: tuple[str, ...] = DEFAULT_ALLOW_ADJUST
    adjustments: tuple[dict[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if self.dispatcher not in DISPATCHERS:
            raise ValueError(f"dispatcher {self.dispatcher!r} is not one of {', '.join(DISPATCHERS)}")
        if not isinstance(self.overlap, bool) or not isinstance(self.delay_wgrad, bool):
            raise ValueError(f"variant {self.name}: overlap and delay_wgrad must be explicit booleans")
        if self.status not in values(ManifestStatus):
            raise ValueError(f"status {self.status!r} is not one of {', '.join(values(ManifestStatus))}")
        if self.role not in values(Role):
            raise ValueError(f"role {self.role!r} is not one of {', '.join(values(Role))}")
        object.__setattr__(self, "status", ManifestStatus(self.status))
        object.__setattr__(self, "role", Role(self.role))

    @property
    def group_key(self) -> str:
        """Stable string key of the group (``""`` when the sweep has no extra axes); see :func:`group_key`."""
        return group_key(self.group)

    @property
    def is_baseline_arm(self) -> bool:
        """True for alltoall with overlap off and delay_wgrad off, the baseline of its group."""
        return self.dispatcher == "alltoall" and not self.overlap and not self.delay_wgrad

    def to_json(self) -> dict[str, Any]:
        """The JSON form: every field, nested values copied (``dataclasses.asdict``'s result, about 4x faster:
        a 1,000-variant manifest serialises each variant twice at plan time)."""
        d = {f.name: _copy(getattr(self, f.name)) for f in fields(self)}
        d["reasons"] = list(self.reasons)
        d["warnings"] = list(self.warnings)
        d["allow_adjust"] = list(self.allow_adjust)
        d["adjustments"] = [dict(a) for a in self.adjustments]
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Variant:
        known = {f for f in cls.__dataclass_fields__}
        kw = {k: v for k, v in d.items() if k in known}
        for k in ("reasons", "warnings", "allow_adjust", "adjustments"):
            if k in kw and kw[k] is not None:
                kw[k] = tuple(kw[k])
        return cls(**kw)


def _copy(value: Any) -> Any:
    """A deep copy of plain JSON-like data (dicts, lists, tuples, scalars), as ``dataclasses.asdict`` copies it."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_copy(v) for v in value)
    return value


def canonical_field(key: str, value: Any) -> Any:
    """The library's meaning of a config value, so that requested and effective values compare equal when the
    library filled in its own default (used by the payload's mismatch check and the analysis' label check).

    Sources: Megatron-Core ``TransformerConfig.__post_init__`` turns ``recompute_modules=None`` into
    ``["core_attn"]``; a single-string ``cuda_graph_scope`` is a one-element scope (CASES C04); ``mtp_num_layers``
    0 and None both mean no MTP.
    """
    if key == "recompute_modules":
        return sorted(value) if isinstance(value, list | tuple) else (["core_attn"] if value is None else value)
    if key == "cuda_graph_scope":
        if value is None:
            return []
        return sorted([value] if isinstance(value, str) else value)
    if key == "mtp_num_layers":
        return value or None
    return value


@dataclass(frozen=True, order=True)
class RunRef:
    """One attempt of one run: variant name, repeat index (0-based) and attempt number (1-based, per run: a repeat
    is a repeat, an attempt is a retry of that repeat, so nightly repeats r0-r2 are each attempt 1).

    This is the one name of a run everywhere: its NeMo-Run task and Slurm job name is :attr:`task`
    (``<variant>.r<repeat>.a<attempt>``), its folder ``variants/<variant>/<folder>/`` (SweepDir, :attr:`folder`).
    """

    variant: str
    repeat: int
    attempt: int

    @property
    def task(self) -> str:
        """NeMo-Run task / Slurm job name: ``<variant>.r<repeat>.a<attempt>`` (safe characters only)."""
        return f"{self.variant}.r{self.repeat}.a{self.attempt}"

    @property
    def folder(self) -> str:
        """The attempt folder's name: ``attempt-<k>`` for repeat 0, ``r<repeat>-attempt-<k>`` for the others."""
        return f"attempt-{self.attempt}" if self.repeat == 0 else f"r{self.repeat}-attempt-{self.attempt}"

    @property
    def run_key(self) -> tuple[str, int]:
        """(variant, repeat): the run this attempt belongs to; the latest attempt of a run counts."""
        return (self.variant, self.repeat)
