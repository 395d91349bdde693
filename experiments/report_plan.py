"""The readable plan table printed by ``action=plan`` (rich): variant, axes, stage, status, reason.

Up to ``ROWS_LIMIT`` variants, one row each; a larger plan gets one row per knob cell, stage, status and reason, with
its count of variants and their axis values (rich takes about 1-2 ms per table row: a 1,000-row table took 1-2 s
of a 1,000-variant ``action=plan``; every variant is in manifest.json and ``action=status``).
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
    from analysis.console import make_console, table

    console = make_console()
    exp = plan.expansion
    title = f"sweep {plan.sweep_id}  preset={exp.preset.name}  mode={plan.mode}  preflight={plan.settings.preflight}"
    if len(exp.variants) <= ROWS_LIMIT:
        headers, rows = _rows(exp.variants)
    else:
        headers, rows = _grouped(exp.variants)
        title += f"  ({len(exp.variants)} variants in {len(rows)} rows; each variant: manifest.json)"
    console.print(table(headers, rows, width=console.width, title=title))
    for w in (*exp.warnings, *plan.notes):  # the notes: a dirty tree, a secret_env name not set here
        console.print(f"[yellow]warning:[/] {w}", highlight=False)
    if plan.mode_note:
        console.print(f"[cyan]note:[/] {plan.mode_note}")
    _print_reference(console, plan.bound)
    if plan.conformance:
        c = plan.conformance
        console.print(f"[cyan]conformance:[/] {', '.join(s['file'] for s in c['suites'])} from {c['dir']} run in the "
                      "run's container before the arms; a failed suite prunes the arms it covers", highlight=False)
    kept = sum(v.status != "pruned" for v in exp.variants)
    console.print(f"{kept} of {len(exp.variants)} variants kept, {len(plan.runs)} runs "
                  f"(repeats={plan.settings.repeats}); GPU-hour estimate {plan.gpu_hours:.2f} "
                  f"(limit max_gpu_hours={plan.settings.max_gpu_hours})")
    d = plan.design or {}
    if plan.blocks:
        more = " (then one block at a time for undecided arms, up to max_blocks=" + str(d.get("max_blocks")) + ")" \
            if d.get("repeats") == "auto" else ""
        gated = sum(v.status == "gated" for v in exp.variants)
        later = f"; the {gated} gated arm(s) get blocks of their own when their gate opens" if gated else ""
        console.print(f"{len(plan.blocks)} block(s){more}, seed {d.get('seed')} ({d.get('seed_source')}), "
                      f"control={d.get('control')}; block 0: {' -> '.join(plan.blocks[0]['order'])}{later}")
    if out_dir is not None:
        console.print(f"plan written to {out_dir}")


def _print_reference(console, bound: dict) -> None:
    """The published NVIDIA row the sweep's model, GPU, GPU count and precision matched, or why none did."""
    from experiments.reference import describe_row

    row, note = bound.get("reference"), bound.get("reference_note")
    if row:
        console.print(f"[cyan]published row:[/] {describe_row(row)}", highlight=False)
    elif note:
        console.print(f"[cyan]published row:[/] none ({note})", highlight=False)
    if row and note:
        console.print(f"[cyan]note:[/] {note}", highlight=False)
    for line in bound.get("core_recipes") or []:
        console.print(f"[cyan]second source:[/] {line}", highlight=False)


def _cells(v) -> tuple[str, ...]:
    stage = f"{v.stage} {v.stage_name}" + (f" (gate: {v.gate})" if v.gate and v.status == "gated" else "")
    reason = "; ".join(_short(r) for r in (v.reasons or v.warnings))
    return (v.role, v.dispatcher, "on" if v.overlap else "off", "on" if v.delay_wgrad else "off", stage,
            f"[{_STYLE.get(v.status, 'white')}]{v.status}[/]", reason or "")


HEADERS = ("variant", "role", "dispatcher", "overlap", "delay_wgrad", "axes", "stage", "status", "reason")


def _rows(variants) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """One row per variant."""
    rows = []
    for v in variants:
        role, disp, ovl, dw, stage, status, reason = _cells(v)
        axes = ", ".join(f"{k}={val}" for k, val in v.axes.items()) or "-"
        rows.append((v.name, str(role), disp, ovl, dw, axes, stage, status, reason))
    return HEADERS, rows


def _grouped(variants) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """One row per (role, knob cell, stage, status, reason): the count of its variants and their axis values."""
    groups: dict[tuple[str, ...], list] = {}
    for v in variants:
        groups.setdefault(_cells(v), []).append(v)
    rows = []
    for (role, disp, ovl, dw, stage, status, reason), members in groups.items():
        values: dict[str, list[str]] = {}
        for v in members:
            for k, val in v.axes.items():
                seen = values.setdefault(k, [])
                if str(val) not in seen:
                    seen.append(str(val))
        axes = "; ".join(f"{k}={_few(vals)}" for k, vals in values.items()) or "-"
        rows.append((str(len(members)), str(role), disp, ovl, dw, axes, stage, status, reason))
    return ("variants", *HEADERS[1:]), rows


def _few(values: list[str], limit: int = 4) -> str:
    """``a,b,c`` or ``a,b,...,z (N values)``."""
    if len(values) <= limit:
        return ",".join(values)
    return f"{','.join(values[:2])},...,{values[-1]} ({len(values)} values)"
