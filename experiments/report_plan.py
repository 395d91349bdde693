"""The readable plan table printed by ``action=plan`` (rich): variant, axes, stage, status, reason."""

from __future__ import annotations

from pathlib import Path

from experiments.plan import Plan

_STYLE = {"planned": "green", "gated": "yellow", "pruned": "red"}


def _short(text: str, limit: int = 160) -> str:
    """A reason without its source note, cut to ``limit`` characters (the manifest keeps the full text)."""
    text = text.split(" (mirrors ")[0]
    return text if len(text) <= limit else text[: limit - 1] + "…"


def print_plan(plan: Plan, out_dir: Path | None = None) -> None:
    """Print the plan table, warnings and the GPU-hour estimate to stdout."""
    from analysis.console import make_console, table

    console = make_console()
    exp = plan.expansion
    rows = []
    for v in exp.variants:
        axes = ", ".join(f"{k}={val}" for k, val in v.axes.items()) or "-"
        stage = f"{v.stage} {v.stage_name}" + (f" (gate: {v.gate})" if v.gate and v.status == "gated" else "")
        reason = "; ".join(_short(r) for r in (v.reasons or v.warnings))
        rows.append((v.name, str(v.role), v.dispatcher, "on" if v.overlap else "off",
                     "on" if v.delay_wgrad else "off", axes, stage, f"[{_STYLE.get(v.status, 'white')}]{v.status}[/]",
                     reason or ""))
    console.print(table(("variant", "role", "dispatcher", "overlap", "delay_wgrad", "axes", "stage", "status",
                         "reason"), rows, width=console.width,
                        title=f"sweep {plan.sweep_id}  preset={exp.preset.name}  mode={plan.mode}  "
                              f"preflight={plan.settings.preflight}"))
    for w in exp.warnings:
        console.print(f"[yellow]warning:[/] {w}")
    if plan.mode_note:
        console.print(f"[cyan]note:[/] {plan.mode_note}")
    kept = sum(v.status != "pruned" for v in exp.variants)
    console.print(f"{kept} of {len(exp.variants)} variants kept, {len(plan.runs)} runs "
                  f"(repeats={plan.settings.repeats}); GPU-hour estimate {plan.gpu_hours:.2f} "
                  f"(limit max_gpu_hours={plan.settings.max_gpu_hours})")
    d = plan.design or {}
    if plan.blocks:
        more = " (then one block at a time for undecided arms, up to max_blocks=" + str(d.get("max_blocks")) + ")" \
            if d.get("repeats") == "auto" else ""
        console.print(f"{len(plan.blocks)} block(s){more}, seed {d.get('seed')} ({d.get('seed_source')}), "
                      f"control={d.get('control')}; block 0: {' -> '.join(plan.blocks[0]['order'])}")
    if out_dir is not None:
        console.print(f"plan written to {out_dir}")
