"""Does a run's label match what really ran? (CASES C03, C05; CONTRACTS §6 ``allow_adjust``.)

Three witnesses are compared with the requested label (dispatcher, overlap, delay_wgrad, extra axes) and the
variant's resolved settings:
1. effective_config.json ``effective`` (the payload's record of the built config) and its ``adjustments``;
2. the Bridge config dump in the log (fields the parser picked out, e.g. ``moe_token_dispatcher_type``);
3. Bridge 0.6's warning ``... Falling back to alltoall.`` (``apply_flex_dispatcher_backend`` on an unsupported GPU).
A flex backend requested but alltoall run is ``dispatcher_fallback``; any other difference outside
``allow_adjust`` is ``label_mismatch``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from contracts.records import DISPATCHER_SHORT, DISPATCHERS, FLEX_BACKENDS, canonical_field

if TYPE_CHECKING:
    from analysis.judge.expectation import Expectation
    from analysis.logs import ParsedLog

# requested dispatcher -> (moe_token_dispatcher_type, moe_flex_dispatcher_backend) (FACTS §1)
DISPATCH_FIELDS: dict[str, tuple[str, str | None]] = {
    "alltoall": ("alltoall", None),
    "allgather": ("allgather", None),
    **{b: ("flex", b) for b in FLEX_BACKENDS},
}
_LABEL_FIELDS = (("overlap", "overlap_moe_expert_parallel_comm"), ("delay_wgrad", "delay_wgrad_compute"))
_SHORT_TO_DISPATCHER = {v: k for k, v in DISPATCHER_SHORT.items()}
_NAME_RE = re.compile(r"^(?P<d>[A-Za-z0-9]+)\.ovl(?P<o>[01])\.dw(?P<w>[01])(?:\.|$)")


def label_from_name(name: str) -> dict[str, Any] | None:
    """The requested label encoded in a variant-style name (``deepep.ovl1.dw0.ep16``), or None.

    Loose log files named after their variant still get the C05 fallback check this way.
    """
    m = _NAME_RE.match(name.removeprefix("log-"))
    if not m:
        return None
    dispatcher = _SHORT_TO_DISPATCHER.get(m.group("d"), m.group("d"))
    if dispatcher not in DISPATCHERS:
        return None
    return {"dispatcher": dispatcher, "overlap": m.group("o") == "1", "delay_wgrad": m.group("w") == "1"}


def _norm(value: Any) -> Any:
    """Comparable form: lists/tuples as lists, "True"/"False" strings as bools, numeric strings as numbers,
    "none"/"null"/"" as None, empty lists as None."""
    if isinstance(value, list | tuple):
        return [_norm(v) for v in value] or None
    if isinstance(value, str):
        low = value.strip().lower()
        if low in ("true", "false"):
            return low == "true"
        if low in ("none", "null", ""):
            return None
        try:
            return float(low) if "." in low or "e" in low else int(low)
        except ValueError:
            return value.strip()
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return float(value) if isinstance(value, float) and not value.is_integer() else int(value)
    return value


def _expected_fields(requested: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    dispatcher = requested.get("dispatcher")
    if dispatcher in DISPATCH_FIELDS:
        out["moe_token_dispatcher_type"], backend = DISPATCH_FIELDS[dispatcher]
        if backend is not None:
            out["moe_flex_dispatcher_backend"] = backend
    for label, fld in _LABEL_FIELDS:
        if isinstance(requested.get(label), bool):
            out[fld] = requested[label]
    for key, value in requested.items():
        if "." in key:  # extra axes such as model.expert_model_parallel_size
            out[key.rsplit(".", 1)[1]] = value
    return out


def label_issues(
    expect: Expectation, effective: dict[str, Any] | None, log: ParsedLog | None
) -> tuple[list[tuple[str, str]], list[str]]:
    """([(reason, evidence text)], [allowed adjusted fields]) for a run; reasons are dispatcher_fallback or
    label_mismatch, most important first."""
    requested = dict(expect.requested or {})
    if effective and isinstance(effective.get("requested"), dict):
        requested = {**effective["requested"], **requested}
    want = _expected_fields(requested)
    for key, value in (expect.settings or {}).items():
        want.setdefault(key, value)
    allow = set(expect.allow_adjust)
    issues: list[tuple[str, str]] = []
    adjusted: list[str] = []
    flex = requested.get("dispatcher") in FLEX_BACKENDS

    def check(source: str, got: dict[str, Any]) -> None:
        for key, wanted in want.items():
            if key not in got or key in allow:
                continue
            if key == "moe_flex_dispatcher_backend" and want.get("moe_token_dispatcher_type") != "flex":
                continue  # the backend field only matters with the flex dispatcher (core default "deepep")
            if _norm(canonical_field(key, got[key])) == _norm(canonical_field(key, wanted)):
                continue
            if (got[key] is None or _norm(got[key]) is None) and source == "log config dump":
                continue
            if flex and key == "moe_token_dispatcher_type" and _norm(got[key]) == "alltoall":
                issues.insert(0, ("dispatcher_fallback",
                                  f"requested {requested['dispatcher']} but {source} has "
                                  f"moe_token_dispatcher_type={got[key]!r}"))
            else:
                issues.append(("label_mismatch", f"requested {key}={wanted!r} but {source} has {key}={got[key]!r}"))

    if effective and isinstance(effective.get("effective"), dict):
        check("effective_config.json", effective["effective"])
        for adj in effective.get("adjustments") or ():
            fld = adj.get("field")
            if fld in allow:
                adjusted.append(str(fld))
            elif fld:
                issues.append(("label_mismatch", f"payload changed {fld} from {adj.get('from')!r} to {adj.get('to')!r}"
                               f" ({adj.get('why')}), which allow_adjust does not permit"))
    if log is not None:
        check("log config dump", log.config)
        for m in log.markers_of("dispatcher_fallback"):
            if flex:
                issues.insert(0, ("dispatcher_fallback", m.text))
                break
    seen: set[str] = set()
    unique = [(r, t) for r, t in issues if not (t in seen or seen.add(t))]
    unique.sort(key=lambda i: i[0] != "dispatcher_fallback")
    return unique, adjusted
