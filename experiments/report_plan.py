"""The readable plan table printed by ``action=plan`` (rich): variant, axes, stage, status, reason.

Up to ``ROWS_LIMIT`` variants, one row each; a larger plan gets one row per knob cell, stage, status and reason, with
its count of variants and their axis values (rich takes about 1-2 ms per table row here: a 1,000-row table took 1-2 s
of a 1,000-variant ``action=plan``, issue 17; every variant is in manifest.json and ``action=status``).
"""

from __future__ import annotations

from pathlib import Path

from experiments.plan import Plan

_STYLE = {"planned": "green", "gated": "yellow", "pruned": "red"}
ROWS_LIMIT = 100


def _short(text: str, limit: int = 160) -> str:
    """A reason without its source note, cut to ``limit`` characters (the manifest keeps the full text)."""
    text = text.split(" (mirrors ")[0]
    return text if len(text) <= limit else text[: limit - 1] + "…"


def print_plan(plan: Plan, out_dir: Path | None = None) -> None:
    """Print the plan table, warnings and the GPU-hour estimate to stdout."""
    from rich.console import Console

    console = Console(width=max(Console().width, 140))
    exp = plan.expansion
    title = f"sweep {plan.sweep_id}  preset={exp.preset.name}  mode={plan.mode}  preflight={plan.settings.preflight}"
    console.print(_table(title, exp.variants) if len(exp.variants) <= ROWS_LIMIT else _grouped(title, exp.variants))
    for w in exp.warnings:
        console.print(f"[yellow]warning:[/] {w}")
    if plan.mode_note:
        console.print(f"[cyan]note:[/] {plan.mode_note}")
    kept = sum(v.status != "pruned" for v in exp.variants)
    console.print(f"{kept} of {len(exp.variants)} variants kept, {len(plan.runs)} runs "
                  f"(repeats={plan.settings.repeats}); GPU-hour estimate {plan.gpu_hours:.2f} "
                  f"(limit max_gpu_hours={plan.settings.max_gpu_hours})")
    if out_dir is not None:
        console.print(f"plan written to {out_dir}")


def _cells(v) -> tuple[str, ...]:
    stage = f"{v.stage} {v.stage_name}" + (f" (gate: {v.gate})" if v.gate and v.status == "gated" else "")
    reason = "; ".join(_short(r) for r in (v.reasons or v.warnings))
    return (v.role, v.dispatcher, "on" if v.overlap else "off", "on" if v.delay_wgrad else "off", stage,
            f"[{_STYLE.get(v.status, 'white')}]{v.status}[/]", reason or "")


def _table(title: str, variants):
    """One row per variant."""
    from rich.table import Table

    t = Table(title=title, show_lines=False)
    for col in ("variant", "role", "dispatcher", "overlap", "delay_wgrad", "axes", "stage", "status", "reason"):
        t.add_column(col, overflow="fold")
    for v in variants:
        role, disp, ovl, dw, stage, status, reason = _cells(v)
        axes = ", ".join(f"{k}={val}" for k, val in v.axes.items()) or "-"
        t.add_row(v.name, role, disp, ovl, dw, axes, stage, status, reason)
    return t


def _grouped(title: str, variants):
    """One row per (role, knob cell, stage, status, reason): the count of its variants and their axis values."""
    from rich.table import Table

    groups: dict[tuple[str, ...], list] = {}
    for v in variants:
        groups.setdefault(_cells(v), []).append(v)
    t = Table(title=f"{title}  ({len(variants)} variants in {len(groups)} rows; each variant: manifest.json)",
              show_lines=False)
    for col in ("variants", "role", "dispatcher", "overlap", "delay_wgrad", "axes", "stage", "status", "reason"):
        t.add_column(col, overflow="fold")
    for (role, disp, ovl, dw, stage, status, reason), members in groups.items():
        values: dict[str, list[str]] = {}
        for v in members:
            for k, val in v.axes.items():
                seen = values.setdefault(k, [])
                if str(val) not in seen:
                    seen.append(str(val))
        axes = "; ".join(f"{k}={_few(vals)}" for k, vals in values.items()) or "-"
        t.add_row(str(len(members)), role, disp, ovl, dw, axes, stage, status, reason)
    return t


def _few(values: list[str], limit: int = 4) -> str:
    """``a,b,c`` or ``a,b,...,z (N values)``."""
    if len(values) <= limit:
        return ",".join(values)
    return f"{','.join(values[:2])},...,{values[-1]} ({len(values)} values)"
