"""PNG plots of a summary (matplotlib, Agg, no pyplot global state): throughput per run with 95% error bars, step
time over iterations per run, and lm-loss curves overlaid. Failed runs stay visible in the throughput plot."""

from __future__ import annotations

import io
from collections.abc import Iterable

import matplotlib
import numpy as np

matplotlib.use("Agg")
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from analysis.measure import RunResult, Summary  # noqa: E402

_COLORS = {"alltoall": "#4C72B0", "allgather": "#8172B2", "deepep": "#55A868", "hybridep": "#DD8452",
           "ncclep": "#937860"}


def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return buf.getvalue()


def _throughput_metric(runs: list[RunResult]) -> tuple[str, str]:
    if any(r.tflops for r in runs):
        return "tflops", "TFLOP/s/GPU (median, 95% CI)"
    if any(r.tokens for r in runs):
        return "tokens", "tokens/s/GPU (median, 95% CI)"
    return "step", "step time ms (median, 95% CI)"


def throughput_png(summary: Summary) -> bytes | None:
    """Bar chart of each kept run's throughput with its interval; runs without a number get a red cross and
    their status (CASES C07: failing cells are shown, not dropped). None when no run ran."""
    runs = [r for r in summary.runs if r.status not in ("pruned", "skipped")]
    if not runs or not any(r.tflops or r.tokens or r.step_time for r in runs):
        return None  # no run has a timing (validate mode, or nothing trained): no timing plot at all
    metric, label = _throughput_metric(runs)
    fig = Figure(figsize=(max(6.0, 0.7 * len(runs) + 2), 4.2))
    ax = fig.add_subplot()
    for i, r in enumerate(runs):
        est = {"tflops": r.tflops, "tokens": r.tokens}.get(metric) if metric != "step" else r.step_time
        color = _COLORS.get(r.dispatcher or "", "#777777")
        if est is None or not r.good:
            ax.bar(i, 0, color=color)
            ax.plot(i, 0, marker="x", color="#C44E52", markersize=12, mew=3)
            ax.annotate(f"{r.status}\n{r.reason or ''}".strip(), (i, 0), textcoords="offset points", xytext=(0, 10),
                        ha="center", fontsize=7, color="#C44E52", rotation=90)
            continue
        ax.bar(i, est.median, color=color, alpha=0.85)
        ax.errorbar(i, est.median, yerr=[[est.median - est.ci_low], [est.ci_high - est.median]], color="black",
                    capsize=4)
    ax.set_xticks(range(len(runs)), [r.name for r in runs], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(label)
    ax.set_title("Throughput per run")
    ax.grid(axis="y", alpha=0.3)
    return _png(fig)


def decimate(x: np.ndarray, y: np.ndarray, buckets: int = 1000) -> tuple[np.ndarray, np.ndarray]:
    """At most about ``2 * buckets`` points of a curve that look like all of them in a plot some 900 pixels wide:
    the first and last point and, per bucket of consecutive points, its lowest and its highest (spikes stay).
    Drawing 86,000 points per line took about 1.2 s of a 100 MB log's report."""
    n = x.size
    if n <= 2 * buckets:
        return x, y
    k = -(-n // buckets)
    m = n // k * k
    base = np.arange(0, m, k)
    block = y[:m].reshape(-1, k)
    picks = [base + block.argmin(axis=1), base + block.argmax(axis=1), np.array([0, n - 1])]
    if m < n:
        rest = y[m:]
        picks.append(np.array([m + int(rest.argmin()), m + int(rest.argmax())]))
    idx = np.unique(np.concatenate(picks))
    return x[idx], y[idx]


def _curves(summary: Summary, column: str, ylabel: str, title: str) -> bytes | None:
    runs = [r for r in summary.runs if r.series is not None and len(r.series)]
    if not runs:
        return None
    fig = Figure(figsize=(8, 4.2))
    ax = fig.add_subplot()
    drew = False
    steady_max = 0.0
    for r in runs:
        if r.steady_mask is not None:
            ys = getattr(r.series, column)[r.steady_mask]
            ys = ys[ys == ys]
            steady_max = max(steady_max, float(ys.max()) if ys.size else 0.0)
    for r in runs:
        y = getattr(r.series, column)
        ok = y == y
        if not ok.any():
            continue
        ax.plot(*decimate(r.series.iteration[ok], y[ok]), label=f"{r.name} ({r.status})", linewidth=1.2)
        drew = True
    if not drew:
        return None
    warm = max((r.warmup or 0) for r in runs)
    if warm:
        ax.axvspan(0, warm + 0.5, color="#cccccc", alpha=0.4, label=f"warm-up (<= {warm})")
    top = ax.get_ylim()[1]
    if steady_max > 0 and top > 3 * steady_max:  # a slow first iteration would flatten every steady curve
        ax.set_ylim(top=1.3 * steady_max)
        title += " (warm-up outliers clipped)"
    ax.set_xlabel("iteration")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    return _png(fig)


def step_time_png(summary: Summary) -> bytes | None:
    """Step time (ms) over iterations, one line per run; the warm-up is shaded."""
    return _curves(summary, "step_ms", "step time (ms)", "Step time per iteration")


def loss_png(summary: Summary) -> bytes | None:
    """lm loss over iterations, runs overlaid (loss parity at a glance)."""
    return _curves(summary, "lm_loss", "lm loss", "Loss curves")


_PART_COLORS = {"expert_gemm": "#4C72B0", "dense_gemm": "#64B5CD", "attention": "#55A868",
                "other_compute": "#CCB974", "comm_exposed": "#C44E52", "idle": "#BBBBBB"}


def breakdown_png(summary: Summary) -> bytes | None:
    """One horizontal stacked bar per profiled run: where a step's time goes (ms), with the fraction of its
    communication hidden by compute where there is communication (analysis/measure/profile_breakdown.py)."""
    from analysis.measure import PARTS

    runs = [r for r in summary.runs if r.step_breakdown and r.step_breakdown.get("parts_ms")]
    if not runs:
        return None
    fig = Figure(figsize=(9, 0.7 * len(runs) + 1.6))
    ax = fig.add_subplot()
    for y, r in enumerate(runs):
        left = 0.0
        for part in PARTS:
            ms = float(r.step_breakdown["parts_ms"].get(part) or 0)
            ax.barh(y, ms, left=left, color=_PART_COLORS[part], label=part if y == 0 else None)
            left += ms
        hidden = r.step_breakdown.get("hidden_comm_fraction")
        text = f"{left:,.0f} ms" + ("" if hidden is None else f", comm hidden {hidden:.0%}")
        ax.text(left, y, " " + text, va="center", fontsize=8)
    ax.set_yticks(range(len(runs)), [r.name for r in runs])
    ax.invert_yaxis()
    ax.set_xlabel("ms per profiled step")
    ax.set_title("Where the step time goes (torch.profiler, GPU timeline)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=6, fontsize=8, frameon=False)
    ax.margins(x=0.25)
    return _png(fig)


def drift_png(summary: Summary) -> bytes | None:
    """The baseline's median step time (ms) in each block, per group: the machine's drift over the sweep, which
    the paired block ratios cancel. None without a baseline measured in 2 or more blocks."""
    if not summary.drift:
        return None
    fig = Figure(figsize=(6.5, 3.6))
    ax = fig.add_subplot()
    for d in summary.drift:
        xs = [b["index"] for b in d["blocks"]]
        label = ", ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in sorted(d["group"].items())) or d["baseline"]
        ax.plot(xs, [b["median_ms"] for b in d["blocks"]], "o-", label=f"{label} (spread {d['spread']:.1%})")
    ax.set_xlabel("block")
    ax.set_ylabel("baseline median step time, ms")
    ax.set_title("Drift: the baseline in each block")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _png(fig)


def speedup_png(summary: Summary) -> bytes | None:
    """The report's headline: each arm's speedup (baseline step / arm step) with its 95% interval against the
    +-practical_threshold band around 1 and, for an overlap arm with a profiled baseline, its overlap ceiling
    1 / (1 - exposed comm / step) (analysis/measure/bound.py) as a marker. Control arms are drawn grey. None when no arm
    has a speedup."""
    arms = [c for c in summary.comparisons if c.speedup.value is not None]
    if not arms:
        return None
    threshold = float((summary.design or {}).get("practical_threshold") or 0.02)
    fig = Figure(figsize=(8, 0.55 * len(arms) + 1.8))
    ax = fig.add_subplot()
    ax.axvspan(1 - threshold, 1 + threshold, color="#dddddd", alpha=0.7,
               label=f"±{100 * threshold:.1f}% (practical threshold)")
    ax.axvline(1.0, color="#777777", lw=1)
    drew_ceiling = False
    for y, c in enumerate(arms):
        s = c.speedup
        lo = s.ci_low if s.ci_low is not None else s.value
        hi = s.ci_high if s.ci_high is not None else s.value
        color = "#999999" if c.control else {"faster": "#55A868", "slower": "#C44E52"}.get(c.verdict, "#4C72B0")
        ax.errorbar(s.value, y, xerr=[[s.value - lo], [hi - s.value]], fmt="o", color=color, capsize=4)
        ax.annotate(c.verdict + (" (doubtful)" if c.doubtful else ""), (hi, y), textcoords="offset points",
                    xytext=(6, -3), fontsize=8)
        ob = summary.bound.for_variant(c.variant) if summary.bound else None
        if ob is not None and ob.max_saving < 1:
            ax.plot(1 / (1 - ob.max_saving), y, marker="|", color="#DD8452", markersize=16, mew=3,
                    label=None if drew_ceiling else "overlap ceiling (baseline's exposed comm)")
            drew_ceiling = True
    ax.set_yticks(range(len(arms)), [f"{c.variant}{' (ctl)' if c.control else ''}" for c in arms], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("speedup over the baseline (95% interval)")
    ax.set_title("Speedup per arm against the threshold band and the overlap ceiling")
    ax.grid(axis="x", alpha=0.3)
    ax.margins(x=0.15)
    ax.legend(fontsize=8, loc="lower right")
    return _png(fig)


PLOTS = {"speedup.png": speedup_png, "throughput.png": throughput_png, "step_time.png": step_time_png, "loss.png": loss_png,
         "step_breakdown.png": breakdown_png, "drift.png": drift_png}  # file name -> plot, in the report's order


def all_plots(summary: Summary, names: Iterable[str] | None = None) -> dict[str, bytes]:
    """{file name: PNG bytes} of every plot (or of those ``names``, keys of PLOTS) that has data, in PLOTS order.
    Raises KeyError for a name not in PLOTS."""
    wanted = set(PLOTS) if names is None else set(names)
    unknown = wanted - set(PLOTS)
    if unknown:
        raise KeyError(f"unknown plot(s) {sorted(unknown)}; the plots are {list(PLOTS)}")
    plots = {name: PLOTS[name](summary) for name in PLOTS if name in wanted}
    return {name: png for name, png in plots.items() if png}
