"""The trend page: one self-contained HTML file (plots embedded as base64 PNG, no external resources).

One section per series (``<section id="series-<slug>">``, a list of them at the top with each one's verdict count);
within a section, per group of variants: throughput over the nights (tokens/s/GPU when every night reports it, else iterations/s =
1000 / median step time in ms) and speedup over the baseline (1.0 = the baseline), with the nights judged
``regression`` marked by a red cross and ``improvement`` by a green triangle. Then a table of the last night
against its rolling baseline, with the GPU-hours (the plan's estimate and what Slurm accounted) and, for a profiled
night, the step-time parts that moved. A small inline script sets ``data-images-loaded="k/n"`` on ``<body>`` once the
browser has decoded the plots, which the headless-Chromium test reads.
"""

from __future__ import annotations

import base64
import html
import io
from datetime import UTC, date, datetime
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from analysis.history.judge import SeriesHistory, VariantNight  # noqa: E402
from analysis.history.records import (  # noqa: E402
    IMPROVEMENT,
    REGRESSION,
    SPEEDUP,
    STEP_TIME,
    MetricJudgement,
    NightReport,
    VariantJudgement,
)
from contracts.atomic import write_text

_CSS = """
body{font-family:DejaVu Sans,Arial,sans-serif;margin:24px;color:#222;max-width:1300px}
h1{font-size:22px}h2{font-size:18px;margin-top:28px}
table{border-collapse:collapse;font-size:13px;margin:8px 0}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:right;white-space:nowrap}th{background:#f0f0f0}
td.l{text-align:left}td.note{text-align:left;font-size:11px;color:#555;white-space:normal;min-width:300px}
.regression{background:#f8d0d0;font-weight:bold}.improvement{background:#d3f0d3}
.new_variant{background:#e0e8f8}.missing_tonight{background:#f3e6c8}.within_noise{background:#fff}
.warn{color:#8a5a00}img{max-width:100%;border:1px solid #ddd;margin:6px 0}
section{border-top:3px solid #888;margin-top:30px}td.parts{text-align:left;font-size:11px;white-space:normal}
"""

_SCRIPT = """
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var ok = imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length;
  document.body.setAttribute('data-images-loaded', ok + '/' + imgs.length);
});
"""


def _png(fig: plt.Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=96, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _marks(reports: list[NightReport], metric: str) -> dict[str, dict[date, str]]:
    out: dict[str, dict[date, str]] = {}
    for rep in reports:
        for v in rep.variants:
            for j in v.judgements:
                if j.metric == metric and j.verdict in (REGRESSION, IMPROVEMENT):
                    out.setdefault(v.variant, {})[rep.night] = j.verdict
    return out


def _throughput(entries: list[VariantNight]) -> tuple[str, dict[int, float | None]]:
    stepped = [e for e in entries if e.step]
    if stepped and all(e.tokens_per_s_per_gpu for e in stepped):
        return "tokens/s/GPU", {id(e): e.tokens_per_s_per_gpu for e in stepped}
    return "iterations/s (1000 / median step time in ms)", {id(e): 1000.0 / e.step.value for e in stepped}


def _group_figure(group: str, variants: dict[str, list[VariantNight]], reports: list[NightReport]) -> str:
    fig, (ax_t, ax_s) = plt.subplots(2, 1, figsize=(12, 7.5), sharex=True)
    label, values = _throughput([e for es in variants.values() for e in es])
    marks_t, marks_s = _marks(reports, STEP_TIME), _marks(reports, SPEEDUP)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (name, es) in enumerate(sorted(variants.items())):
        color = colors[i % len(colors)]
        pts = [(e.night, values[id(e)]) for e in es if id(e) in values]
        if pts:
            ax_t.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=color, label=name, ms=4)
        sp = [(e.night, e.speedup.value) for e in es if e.speedup]
        if sp:
            ax_s.plot([p[0] for p in sp], [p[1] for p in sp], "o-", color=color, label=name, ms=4)
        for ax, pts_, marks in ((ax_t, pts, marks_t), (ax_s, sp, marks_s)):
            lookup = dict(pts_)
            for verdict, style in ((REGRESSION, dict(marker="x", color="red", s=140, linewidths=3, zorder=5)),
                                   (IMPROVEMENT, dict(marker="^", color="green", s=110, zorder=5))):
                hit = [n for n, v in marks.get(name, {}).items() if v == verdict and n in lookup]
                if hit:
                    ax.scatter(hit, [lookup[n] for n in hit], **style)
    ax_t.set_ylabel(label)
    ax_t.set_title(f"group {group or '(no extra axes)'}: throughput (red x = regression, green ^ = improvement)")
    ax_s.axhline(1.0, color="#888", lw=1, ls="--")
    ax_s.set_ylabel("speedup over baseline (x)")
    ax_s.set_title("speedup over the group's baseline (baseline / variant median step time)")
    last = reports[-1].night
    for ax in (ax_t, ax_s):
        ax.grid(alpha=0.3)
        ax.axvline(last, color="#bbb", lw=6, alpha=0.4, zorder=0)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.autofmt_xdate()
    return _png(fig)


def _fmt(value: float | None, spec: str) -> str:
    return "" if value is None else format(value, spec)


def _hours(v: VariantJudgement, j: MetricJudgement) -> list[str]:
    if j.metric != STEP_TIME:
        return ["<td></td>", "<td></td>", '<td class="parts"></td>']
    moved = "; ".join(p.describe() for p in v.parts_moved) or v.parts_note
    return [f"<td>{_fmt(v.gpu_hours_estimate, '.2f')}</td>", f"<td>{_fmt(v.gpu_hours_accounted, '.2f')}</td>",
            f'<td class="parts" title="{html.escape(v.parts_note)}">{html.escape(moved)}</td>']


def _row(v: VariantJudgement, j: MetricJudgement) -> str:
    variant, group = v.variant, v.group_key
    unit = "ms" if j.metric == STEP_TIME else "x"
    p = lambda v: "" if v is None else f"{v:.3g}"  # noqa: E731
    cells = [f'<td class="l">{html.escape(variant)}</td>', f'<td class="l">{html.escape(group)}</td>',
             f'<td class="l">{j.metric}</td>', f"<td>{_fmt(j.tonight, '.4g')} {unit if j.tonight else ''}</td>",
             f"<td>{_fmt(j.baseline, '.4g')}</td>", f"<td>{_fmt(j.change, '+.1%')}</td>",
             f"<td>{_fmt(j.spread, '.1%')}</td>", f"<td>{_fmt(j.z, '+.1f')}</td>", f"<td>{p(j.p_runs)}</td>",
             f"<td>{p(j.p_iterations)}</td>", f'<td class="{j.verdict}">{j.verdict}</td>',
             *_hours(v, j), f'<td class="note">{html.escape(j.note)}</td>']
    return "<tr>" + "".join(cells) + "</tr>"


def _section(history: SeriesHistory, reports: list[NightReport]) -> str:
    tonight = reports[-1]
    slug = history.series.slug
    shown = {r.night for r in reports}
    groups: dict[str, dict[str, list[VariantNight]]] = {}
    for e in history.entries:
        if e.night in shown:
            groups.setdefault(e.group_key, {}).setdefault(e.variant, []).append(e)
    cfg = tonight.config
    head = (f"<h2>Series {html.escape(str(history.series))}</h2>"
            f"<p>Night <b>{tonight.night}</b> (sweeps: {html.escape(', '.join(tonight.sweep_ids) or 'none')}); "
            f"{len(reports)} night(s) shown, {reports[0].night} to {tonight.night}. Rolling baseline: the last "
            f"{cfg.window} good nights; threshold ±{cfg.threshold:.0%}, noise {cfg.noise_k:g} x night-to-night "
            f"spread, Mann-Whitney alpha {cfg.alpha:g}.</p>"
            f"<p class='verdict-summary' id='verdict-summary-{slug}'><b>{len(tonight.regressions)}</b> "
            f"regression(s), <b>{len(tonight.improvements)}</b> improvement(s); exit code {tonight.night_exit_code}.</p>")
    warn = "".join(f"<li class='warn'>{html.escape(w)}</li>" for w in tonight.warnings)
    rows = "".join(_row(v, j) for v in tonight.variants for j in v.judgements)
    table = (f"<h3>Night {tonight.night} against the rolling baseline</h3><table class='tonight' "
             f"id='tonight-{slug}'><thead><tr><th>variant</th>"
             "<th>group</th><th>metric</th><th>tonight</th><th>baseline</th><th>change</th><th>spread</th>"
             "<th>z</th><th>p (runs)</th><th>p (iterations)</th><th>verdict</th><th>GPU-h estimate</th>"
             "<th>GPU-h accounted</th><th>parts moved</th><th>why</th></tr></thead>"
             f"<tbody>{rows}</tbody></table>")
    retired = (f"<p>Retired (in the history, absent from tonight and from the last {cfg.window} nights): "
               f"{html.escape(', '.join(tonight.retired))}</p>") if tonight.retired else ""
    timed = {g: vs for g, vs in groups.items()  # a group without one timed night gets no (empty) chart
             if any(e.step is not None or e.speedup is not None for es in vs.values() for e in es)}
    plots = "".join(
        f"<h3>Group {html.escape(g or '(no extra axes)')}</h3>"
        f"<img class='trend' alt='throughput and speedup of group {html.escape(g)} of {html.escape(str(history.series))}' "
        f"src='data:image/png;base64,{_group_figure(g, vs, reports)}'>"
        for g, vs in sorted(timed.items())) or ("<p class='no-charts'>No timed run in the nights shown (validate "
                                               "mode or no successful run): nothing to chart.</p>")
    return (f"<section id='series-{slug}'>{head}{'<ul>' + warn + '</ul>' if warn else ''}{table}{retired}{plots}"
            f"</section>")


def render_trend_page(sections: list[tuple[SeriesHistory, list[NightReport]]], out: Path) -> Path:
    """Render the page: one section per (series history, one report per shown night, oldest first; the last is
    that series' "tonight"), in the order given.

    Writes ``out`` atomically (temp file + ``os.replace``) and returns it. Raises ``ValueError`` when ``sections``
    is empty or a section has no report.
    """
    if not sections or any(not reports for _, reports in sections):
        raise ValueError("render_trend_page needs at least one series with at least one night's report")
    index = "".join(
        f"<li><a href='#series-{h.series.slug}'>{html.escape(str(h.series))}</a>: night {r[-1].night}, "
        f"<b>{len(r[-1].regressions)}</b> regression(s), {len(r[-1].improvements)} improvement(s)</li>"
        for h, r in sections)
    total = sum(len(r[-1].regressions) for _, r in sections)
    head = (f"<h1>Nightly history</h1><p id='verdict-summary'><b>{total}</b> regression(s) over {len(sections)} "
            f"series (each series is preset/model/cluster/container; each variant is its own line within it). "
            f"Generated {datetime.now(UTC):%Y-%m-%d %H:%M} UTC.</p><ul id='series-index'>{index}</ul>")
    title = str(sections[0][0].series) if len(sections) == 1 else f"{len(sections)} series"
    page = (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>Nightly history "
            f"{html.escape(title)} {sections[0][1][-1].night}</title><style>{_CSS}</style>"
            f"<script>{_SCRIPT}</script></head><body>{head}"
            f"{''.join(_section(h, r) for h, r in sections)}</body></html>")
    return write_text(out, page)
