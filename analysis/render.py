"""report.md and a self-contained report.html from one document model (headings, text, tables, code, images)."""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from dataclasses import dataclass

from analysis.measure import Comparison, Estimate, RunResult, Summary
from contracts.exits import meaning


@dataclass(frozen=True)
class Block:
    """One block of the report: kind is h1, h2, h3, p, table, pre or img."""

    kind: str
    text: str = ""
    headers: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()


def _f(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def _est(e: Estimate | None, digits: int = 1) -> str:
    return "-" if e is None else f"{_f(e.median, digits)} [{_f(e.ci_low, digits)}, {_f(e.ci_high, digits)}]"


def _speedup(c: Comparison) -> str:
    s = c.speedup
    return "-" if s.value is None else f"{s.value:.3f} [{s.ci_low:.3f}, {s.ci_high:.3f}]"


def _parity(c: Comparison) -> str:
    p = c.loss_parity
    if p.ok is None:
        return "unknown"
    return f"{'ok' if p.ok else 'DIVERGED'} ({p.max_rel_diff:.2%})"


def _group(d: dict) -> str:
    return ", ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in sorted(d.items())) or "-"


def document(summary: Summary, images: dict[str, bytes]) -> list[Block]:
    """The report as blocks, in reading order."""
    sw = summary.sweep or {}
    title = f"MoE EP-overlap report: {sw.get('name') or 'loose logs'}" + (f" {sw['sweep_id']}" if sw.get("sweep_id")
                                                                            else "")
    code = summary.exit_code
    blocks = [Block("h1", title)]
    if sw:
        blocks.append(Block("p", f"mode={sw.get('mode') or 'train'}, model {sw.get('model')}, cluster "
                                 f"{sw.get('cluster')}, git {sw.get('git_sha')} (the plan's), created "
                                 f"{sw.get('created')}"))
        other = [c for c in sw.get("attempt_commits") or [] if c.get("git_sha") != sw.get("git_sha")]
        if other:
            blocks.append(Block("p", "Attempts that ran another commit: " + "; ".join(
                f"git {c['git_sha']}: " + ", ".join(c["attempts"][:8]) + (" ..." if len(c["attempts"]) > 8 else "")
                for c in other)))
    said = meaning(code) if summary.ran else "no kept run ran (none was submitted, or every one was cancelled), so " \
        "there is nothing to judge"
    if summary.after and code != summary.analysis_exit_code:
        # a later step decided the code: its meaning is that step's ("nothing was written" is not true here)
        step = next((a for a in summary.after if a.exit_code == code), None)
        if step is not None and summary.ran:
            said = f"{meaning(code).split(';')[0]}, from the {step.step} step after the analysis, which wrote this report"
        said += f" (the analysis alone: exit code {summary.analysis_exit_code})"
    blocks.append(Block("p", f"Exit code {code}: {said}."))
    blocks.extend(Block("p", f"After the analysis, the {a.step} step (exit code {a.exit_code}): {a.text}")
                  for a in summary.after)
    blocks.extend(plan_blocks(sw))
    blocks.extend(reference_blocks(summary))
    blocks.extend(block_design_blocks(summary))
    if summary.comparisons:
        blocks.append(Block("h2", "Speedup over the baseline (baseline median step / variant median step)"))
        if HEADLINE in images:  # the headline: each arm's interval against the threshold band and its ceiling
            blocks.append(Block("img", HEADLINE))
        rows = []
        for c in summary.comparisons:
            ceiling = c.overlap_ceiling
            extra = "" if ceiling is None else (f"ceiling {ceiling.ceiling:.2f}x, achieved "
                                                f"{_f(None if ceiling.fraction_achieved is None else 100 * ceiling.fraction_achieved)}%")
            ob = summary.bound.for_variant(c.variant) if summary.bound else None
            if ob is not None:
                extra = "; ".join(x for x in (ob.text(), extra) if x)
            verdict = c.verdict + (" (control)" if c.control else "") + (" DOUBTFUL" if c.doubtful else "")
            rows.append((_group(c.group), c.variant, c.baseline, _speedup(c), verdict, _parity(c),
                         "; ".join([*c.notes, extra] if extra else c.notes) or "-"))
        blocks.append(Block("table", headers=("group", "variant", "baseline", "speedup [95% CI]", "verdict",
                                              "loss parity", "notes"), rows=tuple(rows)))
    blocks.extend(bound_blocks(summary))
    blocks.append(Block("h2", "Runs"))
    rows = []
    for r in summary.runs:
        st = r.step_time
        rows.append((r.name, r.status, r.reason or "-",
                     "-" if st is None else f"{_f(st.median)} [{_f(st.ci_low)}, {_f(st.ci_high)}]",
                     "-" if st is None else _f(st.p90), _est(r.tflops), _est(r.tokens, 0), _f(r.peak_mem_gb, 2),
                     f"{r.iterations_steady}/{r.iterations_total}"))
    blocks.append(Block("table", headers=("run", "status", "reason", "step ms [95% CI]", "p90 ms", "TFLOP/s/GPU",
                                          "tokens/s/GPU", "peak GB", "steady/total"), rows=tuple(rows)))
    blocks.extend(gpu_time_blocks(summary))
    blocks.extend(gpu_hours_blocks(summary.runs))
    blocks.extend(breakdown_blocks(summary.runs))
    if summary.backends:
        blocks.append(Block("h2", "Failure rate per dispatcher"))
        blocks.append(Block("table", headers=("dispatcher", "runs", "good", "bad", "failure rate", "reasons"), rows=tuple(
            (b.dispatcher, str(b.runs), str(b.good), str(b.bad),
             "-" if b.failure_rate is None else f"{b.failure_rate:.0%}",
             ", ".join(f"{k} x{v}" for k, v in sorted(b.reasons.items())) or "-") for b in summary.backends)))
    kept = [r for r in summary.runs if r.status not in ("pruned", "skipped")]
    common = set.intersection(*(set(r.notes) for r in kept)) if len(kept) > 1 else set()
    flagged = [r for r in summary.runs if r.status not in ("ok", "validated", "skipped") or set(r.notes) - common]
    if flagged or common:
        blocks.append(Block("h2", "Failures, warnings and notes"))
        if common:  # the same note on every run (validate mode's "not run" checks) is shown once
            blocks.append(Block("p", "On every run: " + "; ".join(n for n in kept[0].notes if n in common)))
        for r in flagged:
            blocks.extend(_run_blocks(r, common))
    for name in images:
        if name != HEADLINE:
            blocks.append(Block("img", name))
    if summary.notes:
        blocks.append(Block("h2", "Notes"))
        blocks.extend(Block("p", n) for n in summary.notes)
    return blocks


_COST_PARTS = ("launch", "startup", "checks", "init", "warmup", "steps", "in_training", "teardown")


def gpu_time_blocks(summary: Summary) -> list[Block]:
    """Where the runs' GPU time went (:mod:`analysis.measure.fixed_cost`): the share that measured steady steps, then each
    run's held time split into launch, start-up, checks, init, warm-up, steps, the rest of training and teardown
    (s); nothing when no run was timed by the conductor."""
    runs = [(r, r.fixed_cost) for r in summary.runs if (r.fixed_cost or {}).get("held_s") is not None]
    if not runs:
        return []
    g = summary.gpu_time or {}
    share = g.get("steps_share")
    title = "GPU time" + ("" if share is None else f": {100 * share:.0f}% measured steps")
    blocks = [Block("h2", title)]
    if share is not None:
        blocks.append(Block("p", f"GPU time measuring steps: {100 * share:.1f}% ({_f(g.get('steps_s'))} s of steady "
                                 f"steps in {_f(g.get('held_s'))} s that {g.get('runs')} run(s) held their GPUs; "
                                 "the rest is each run's fixed cost, paid again by every run)."))
    cost = g.get("verdicts")
    if cost:
        per = cost.get("gpu_s_per_decided")
        blocks.append(Block("p", f"GPU-seconds per decided verdict: {'-' if per is None else _f(per)} "
                                 f"({_f(cost.get('gpu_s'))} GPU-s held by every run, fixed cost included, for "
                                 f"{cost.get('decided')} decided of {cost.get('verdicts')} verdict(s))."))
    rows = []
    for r, fc in runs:
        pct = fc.get("steps_share")
        rows.append((r.name, _f(fc.get("held_s")), *(_f(fc.get(f"{p}_s")) for p in _COST_PARTS),
                     "-" if pct is None else f"{100 * pct:.0f}%"))
    blocks.append(Block("table", headers=("run", "held s", "launch", "start-up", "checks", "init", "warm-up", "steps",
                                          "in training", "teardown", "steps %"), rows=tuple(rows)))
    return blocks


HEADLINE = "speedup.png"  # analysis/plots.py speedup_png: shown under the speedup heading, not with the plots


def reference_blocks(summary: Summary) -> list[Block]:
    """NVIDIA's published baseline first: the matched row against this sweep's baseline (a WARNING when more than
    5% below), or why no row matched."""
    b = summary.bound
    if b is None:
        return []
    out = [Block("h2", "Published baseline (NVIDIA Megatron-Bridge performance summary)")]
    row = b.sweep.reference
    if row:
        out.append(Block("p", f"matched row ({b.sweep.precision or row.get('precision')}): "
                              f"{row.get('published_model', row.get('model'))} on {row.get('gpus')} x "
                              f"{row.get('gpu')}, {row.get('precision')}, {row.get('container')}: "
                              f"{row.get('tflops_per_gpu')} TFLOP/s/GPU ({row.get('source')})"))
    out.extend(Block("p", c.text()) for c in b.reference)
    out.extend(Block("p", line) for line in (b.sweep.core_recipes or []))
    if not b.reference:
        out.append(Block("p", "no timed baseline to compare with " + (
            f"the published {row.get('tflops_per_gpu')} TFLOP/s/GPU ({row.get('source')})" if row else
            "a published row")))
    out.extend(Block("p", n) for n in b.notes)
    return out


def bound_blocks(summary: Summary) -> list[Block]:
    """Each run against the bound: MFU against the dense bf16 peak and the measured matmul ceiling, all-to-all
    bandwidth against the link bound (analysis/measure/bound.py); nothing when the sweep recorded no bound."""
    b = summary.bound
    if b is None or not b.runs:
        return []
    sb = b.sweep
    said = [f"dense bf16 peak {_f(sb.peak_tflops, 0)} TFLOP/s/GPU ({sb.gpu_type}; {sb.peak_source or 'unknown'})"]
    said.append(f"measured matmul ceiling {_f(sb.matmul_ceiling_tflops, 0)} TFLOP/s ({sb.matmul_source})"
                if sb.matmul_ceiling_tflops else "no matmul ceiling measured (cluster.matmul_ceiling)")
    said.append(f"all-to-all link bound {_f(sb.link_gbps, 0)} GB/s per GPU ({sb.link_note})" if sb.link_gbps
                else f"no all-to-all link bound ({sb.link_note or 'cluster.nvlink_gbps / nic_gbps not set'})")

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}%"

    return [Block("h2", "Against the bound"), Block("p", "; ".join(said) + "."),
            Block("table", headers=("run", "TFLOP/s/GPU", "MFU (peak)", "of matmul ceiling", "all-to-all GB/s",
                                    "of link bound"), rows=tuple(
                (r.run, _f(r.tflops), pct(r.mfu_peak), pct(r.mfu_ceiling), _f(r.a2a_gbps), pct(r.a2a_of_link))
                for r in b.runs))]


def gpu_hours_blocks(runs: Sequence[RunResult]) -> list[Block]:
    """The GPU-hours of each run: the plan's estimate (nodes x GPUs per node x time limit) beside what Slurm
    accounted (``sacct``: elapsed x allocated GPUs), and their totals; nothing when no run has either."""
    rows, est_total, acc_total, any_acc = [], 0.0, 0.0, False
    for r in runs:
        g = r.gpu_hours or {}
        if not g:
            continue
        est, acc = g.get("estimate"), g.get("accounted")
        est_total += est or 0.0
        acc_total += acc or 0.0
        any_acc = any_acc or acc is not None
        rows.append((r.name, _f(est, 3), "-" if acc is None else _f(acc, 4), g.get("note") or "-"))
    if not rows:
        return []
    rows.append(("total", _f(est_total, 3), _f(acc_total, 4) if any_acc else "-", ""))
    return [Block("h2", "GPU-hours (plan estimate, Slurm accounting)"),
            Block("table", headers=("run", "estimate", "accounted (sacct)", "accounting"), rows=tuple(rows))]


def block_design_blocks(summary: Summary) -> list[Block]:
    """Blocks, control and drift (CONTRACTS §7): the doubtful banner, the noise floor and the baseline per block."""
    out: list[Block] = []
    doubtful = sorted({c.doubtful_reason for c in summary.comparisons if c.doubtful and c.doubtful_reason})
    for why in doubtful:
        out.append(Block("p", f"WARNING: every verdict of this group is DOUBTFUL: {why}. The machine's noise is "
                              "larger than what the verdicts claim; run more blocks (repeats=auto) or calm the "
                              "machine."))
    d = summary.design or {}
    if d:
        out.append(Block("h2", "Blocks"))
        blocks = d.get("blocks") or []
        gated = {g["variant"] for g in (summary.sweep or {}).get("gates") or ()}
        opened = sum(1 for b in blocks if gated & set(b.get("order") or ()))
        count = (f"{len(blocks)} block(s): {len(blocks) - opened} for the stages open at plan time, {opened} for the "
                 "arms of a gate that opened" if opened else f"{len(blocks)} block(s)")
        out.append(Block("p", f"{count}, repeats={d.get('repeats')}, seed {d.get('seed')}"
                              f" ({d.get('seed_source')}), control={d.get('control')}, practical threshold "
                              f"±{100 * float(d.get('practical_threshold') or 0):.1f}%, method {d.get('method')}. "
                              "Each block runs every arm once in a recorded random order; speedups are ratios "
                              "within a block."))
        if d.get("blocks"):
            out.append(Block("table", headers=("block", "order"), rows=tuple(
                (str(b["index"]), " -> ".join(b["order"])) for b in d["blocks"])))
    for n in summary.noise_floor:
        hw = n["half_width"]
        out.append(Block("p", f"Noise floor ({_group(n['group'])}): the control arm {n['control']} (the baseline "
                              f"again) measured {n['verdict']}, speedup "
                              + ("-" if n["speedup"] is None else f"{n['speedup']:.3f} [{n['ci_low']:.3f}, "
                                                                   f"{n['ci_high']:.3f}], ±{100 * hw:.1f}%")
                              + ": differences smaller than this are not resolved by this sweep."))
    for dr in summary.drift:
        out.append(Block("h3", f"Drift of the baseline {dr['baseline']} ({_group(dr['group'])}): spread "
                               f"{dr['spread']:.1%} over {len(dr['blocks'])} blocks"))
        first = dr["blocks"][0]["median_ms"]
        out.append(Block("table", headers=("block", "baseline median ms", "vs block 0"), rows=tuple(
            (str(b["index"]), _f(b["median_ms"]), f"{b['median_ms'] / first - 1:+.1%}") for b in dr["blocks"])))
    return out


def breakdown_blocks(runs: tuple[RunResult, ...]) -> list[Block]:
    """The "where the step time goes" table of the profiled runs (summary.json ``step_breakdown_ms``)."""
    from analysis.measure import PARTS

    rows = []
    for r in runs:
        b = r.step_breakdown or {}
        if not b.get("parts_ms"):
            continue
        hidden = b.get("hidden_comm_fraction")
        comm = (b.get("comm_ms") or {}).get("total")
        rows.append((r.name, _f(b.get("step_ms")), *(_f(b["parts_ms"].get(p)) for p in PARTS), _f(comm),
                     "-" if hidden is None else f"{hidden:.1%}", str(b.get("steps"))))
    if not rows:
        return []
    return [Block("h2", "Where the step time goes (ms per profiled step, GPU timeline)"),
            Block("p", "From the torch.profiler trace of each variant's first run (profile=true). Each instant of "
                       "a step counts once: expert GEMM, then dense GEMM, attention, other compute, then "
                       "communication no compute hides, then idle. Hidden = communication time overlapped by "
                       "compute / all communication time."),
            Block("table", headers=("run", "step", "expert GEMM", "dense GEMM", "attention", "other compute",
                                    "exposed comm", "idle", "comm total", "comm hidden", "steps"),
                  rows=tuple(rows))]


def plan_blocks(sw: dict) -> list[Block]:
    """The plan's warnings and the isolation gates' decisions, from the manifest (summary.json ``sweep``)."""
    out: list[Block] = []
    if sw.get("warnings"):
        out.append(Block("h2", "Plan warnings"))
        out.extend(Block("p", w) for w in sw["warnings"])
    if sw.get("gates"):
        out.append(Block("h2", "Isolation gates"))
        stages = ", ".join(f"stage {s.get('index')} {s.get('name')}: {s.get('status')}"
                           + (f" (gate {s['gate']})" if s.get("gate") else "") for s in sw.get("stages") or [])
        if stages:
            out.append(Block("p", stages))
        out.append(Block("table", headers=("variant", "stage", "status", "decision"), rows=tuple(
            (g["variant"], str(g["stage"]), g["status"], g.get("reason") or (
                "pruned at plan time: no gate decides it" if g["status"] == "pruned" else "gate not evaluated yet"))
            for g in sw["gates"])))
    out.extend(conformance_blocks(sw.get("conformance")))
    return out


def conformance_blocks(doc: dict | None) -> list[Block]:
    """The stack's own unit tests (``conformance=true``): each suite's status, what it covers, and every test's
    outcome (manifest ``conformance``, written by experiments/conductor/conformance.py)."""
    if not doc:
        return []
    out = [Block("h2", "Conformance (the stack's own tests)"),
           Block("p", f"folder {doc.get('dir')}; " + ("not run yet" if doc.get("status") == "planned" else
                                                        "run in the run's container before the arms"))]
    rows = []
    for s in doc.get("suites") or []:
        tests = s.get("tests") or {}
        if not tests:
            rows.append((s.get("name", ""), s.get("file", ""), "-", s.get("status", ""), s.get("why") or ""))
        for t, o in sorted(tests.items()):
            rows.append((s.get("name", ""), s.get("file", ""), t, o, ""))
        if tests and s.get("status") == "failed":
            rows.append((s.get("name", ""), s.get("file", ""), "(suite)", "failed",
                         f"gates the {s.get('covers')} arms: {s.get('why') or ''}"))
    out.append(Block("table", headers=("suite", "file", "test", "outcome", "note"), rows=tuple(rows)))
    return out


def _run_blocks(r: RunResult, common: set[str] | frozenset[str] = frozenset()) -> list[Block]:
    out = [Block("h3", f"{r.name}: {r.status}" + (f" ({r.reason})" if r.reason else ""))]
    details = {k: v for k, v in r.details.items() if k not in ("assertion",) and v is not None}
    if r.hint:
        out.append(Block("p", f"Hint: {r.hint}"))
    if details:
        out.append(Block("p", "Details: " + ", ".join(f"{k}={v}" for k, v in details.items())))
    if r.flags:
        out.append(Block("p", "Flags: " + ", ".join(r.flags)))
    if r.evidence:
        out.append(Block("pre", "\n".join(r.evidence)))
    out.extend(chain_blocks(r))
    for n in r.notes:
        if n not in common:
            out.append(Block("p", f"Note: {n}"))
    return out


def chain_blocks(r: RunResult) -> list[Block]:
    """The causal chain of a failed run (summary.json ``runs[].timeline``): the cause, then each consequence, with
    its rank, time and line; the launcher in the heading line. Nothing when the run has no chain."""
    t = r.timeline or {}
    if not t.get("cause"):
        return []
    launcher = (r.launch or {}).get("launcher")
    rows = []
    for role, e in [("cause", t["cause"])] + [("then", e) for e in t.get("consequences") or ()]:
        when = e.get("time") or "-"
        if e.get("time_source") == "inherited":
            when += " (from the line before)"
        rank = "-" if e.get("rank") is None else str(e["rank"])
        rows.append((role, e["reason"], rank, when, e.get("line") or ""))
    head = "Causal chain" + (f" (launcher: {launcher})" if launcher and launcher != "unknown" else "")
    return [Block("p", head + ": the earliest failure first; failures within "
                  f"{_f(t.get('window_s'), 0)} s of it are ranked by class"),
            Block("table", headers=("", "reason", "rank", "time", "line"), rows=tuple(rows))]


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(blocks: list[Block]) -> str:
    """Markdown text; images are referenced by file name (they sit next to report.md)."""
    out: list[str] = []
    for b in blocks:
        if b.kind in ("h1", "h2", "h3"):
            out.append("#" * int(b.kind[1]) + " " + b.text)
        elif b.kind == "p":
            out.append(b.text)
        elif b.kind == "pre":
            out.append("```\n" + b.text.replace("```", "'''") + "\n```")
        elif b.kind == "img":
            out.append(f"![{b.text}]({b.text})")
        elif b.kind == "table":
            lines = ["| " + " | ".join(map(_md_cell, b.headers)) + " |", "|" + "---|" * len(b.headers)]
            lines += ["| " + " | ".join(map(_md_cell, row)) + " |" for row in b.rows]
            out.append("\n".join(lines))
        out.append("")
    return "\n".join(out)


_CSS = ("body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;"
        "margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;font-size:13px;text-align:left}"
        "th{background:#f3f3f3}pre{background:#f7f7f7;padding:8px;overflow-x:auto;font-size:12px}"
        "img{max-width:100%;display:block;margin:1em 0}")


def to_html(blocks: list[Block], images: dict[str, bytes]) -> str:
    """A single HTML file: inline CSS, PNG images embedded as base64 data URIs, every text escaped."""
    e = html.escape
    body: list[str] = []
    for b in blocks:
        if b.kind in ("h1", "h2", "h3", "p"):
            body.append(f"<{b.kind}>{e(b.text)}</{b.kind}>")
        elif b.kind == "pre":
            body.append(f"<pre>{e(b.text)}</pre>")
        elif b.kind == "img" and b.text in images:
            data = base64.b64encode(images[b.text]).decode("ascii")
            body.append(f'<img alt="{e(b.text)}" src="data:image/png;base64,{data}">')
        elif b.kind == "table":
            head = "".join(f"<th>{e(h)}</th>" for h in b.headers)
            rows = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in b.rows)
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
    title = e(blocks[0].text) if blocks else "report"
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
            f"<style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")
