"""The analysis stage and the nightly history, called through their Python APIs with the sweep's own options."""

from __future__ import annotations

import sys
from typing import Any

from analysis.api import Options, Summary, print_summary, report_sweep
from analysis.measure import LaterStep
from contracts.exits import ExitCode
from contracts.manifest import Manifest
from contracts.statuses import ManifestStatus
from contracts.sweepdir import SweepDir


def analyse(sd: SweepDir, options: Options, quiet: bool = False) -> Summary:
    """Analyse the sweep folder and write its report (``report/``, each attempt's ``run.json``). The runs' launch
    and end times so far go to ``conductor.json`` first (the report splits each run's GPU time with them)."""
    from experiments import timeline

    timeline.checkpoint(sd.root)
    summary = report_sweep(sd.root, options)
    if not quiet:
        show(summary, sd)
    return summary


def show(summary: Summary, sd: SweepDir) -> None:
    """Print the analysed sweep's table and where its report is (the sweep prints its final exit code once)."""
    print_summary(summary, sd.report, show_exit_code=False)


CANCEL_FLAGS = ("cancelled_by_user", "interrupted")  # action=cancel, Ctrl-C / SIGTERM (experiments/conductor/)


def cancelled_runs(m: Manifest) -> list[str]:
    """The runs (``variant repeat r``) whose latest attempt this tool's user stopped (``action=cancel``, Ctrl-C):
    a night with any is a cancelled night, neither good nor bad. A job cancelled behind the tool's back (an
    administrator's ``scancel``) is a failed run instead (CASES C08)."""
    return [f"{name} repeat {repeat}" for (name, repeat), a in sorted(m.latest_attempts().items())
            if a.status == ManifestStatus.CANCELLED and any(f in a.flags for f in CANCEL_FLAGS)]


def history_step(sd: SweepDir, m: Manifest, summary: Summary, hist: dict[str, Any]) -> LaterStep:
    """The nightly history step of an analysed sweep: a night where no kept run ran, or that was cancelled, is
    never recorded (the step says what it skipped and why, exit code 0: the analysis' own code stands); any other
    is recorded and judged (:func:`record_history`)."""
    if not summary.ran:
        text = ("not recorded: no kept run ran (none was submitted, or every one was cancelled); an empty night is "
                "never a good night")
        print(f"history: {text}", file=sys.stderr)
        return LaterStep("history", ExitCode.OK, text)
    cancelled = cancelled_runs(m)
    if cancelled:
        shown = ", ".join(cancelled[:5]) + (f" and {len(cancelled) - 5} more" if len(cancelled) > 5 else "")
        text = (f"not recorded: the night was cancelled ({len(cancelled)} run(s) stopped by action=cancel or an "
                f"interrupt: {shown}); a cancelled night is neither a good nor a bad night")
        print(f"history: {text}", file=sys.stderr)
        return LaterStep("history", ExitCode.OK, text)
    code, text = record_history(sd, m, hist)
    return LaterStep("history", code, text)


def rewrite_report(sd: SweepDir, summary: Summary, step: LaterStep) -> Summary:
    """Write the sweep's report again with ``step`` after its analysis (its plots reused, not drawn again), so that
    ``report.md``, ``report.html`` and ``summary.json`` carry the exit code the sweep ends with. Returns the new
    summary. Raises OSError (ReportWriteError) when the folder cannot be written; the old report is then whole."""
    from dataclasses import replace

    from analysis.api import write_report

    new = replace(summary, after=(*summary.after, step))
    pngs = {p.name: p.read_bytes() for p in sorted(sd.report.glob("*.png"))} if sd.report.is_dir() else {}
    write_report(new, sd.report, images=lambda _s: pngs)
    return new


def record_history(sd: SweepDir, m: Manifest | None, hist: dict[str, Any]) -> tuple[int, str]:
    """Record the analysed sweep in the history database, judge tonight within its series, write
    ``report/history.json`` + ``report/history.html``, alert (``history.notify``) and export (``history.mlflow``)
    through :func:`analysis.history.nightly.nightly_step`. On Slurm each run's GPU-hours are first asked of
    ``sacct`` (:func:`experiments.conductor.accounting.accounted_gpu_hours`) and stored beside the estimate. A
    password the manifest holds as ``***`` comes from ``PGPASSWORD`` or ``~/.pgpass``
    (:func:`analysis.history.password_from_env`); no console line shows one.
    Returns the step's exit code, 0, 4 (regression), 2 (bad input, nothing recorded) or 5 (database problem), and
    what it did in one sentence."""
    from analysis.history import HistoryError, exit_code_for, password_from_env
    from analysis.history.nightly import nightly_step

    try:
        url = password_from_env(hist.get("url"))
    except HistoryError as e:
        print(f"history: {e}", file=sys.stderr)
        return int(exit_code_for(e)), f"not recorded: {e}"
    accounted: dict[tuple[str, int], tuple[float | None, str]] = {}
    if m is not None:
        from experiments.conductor.accounting import accounted_gpu_hours

        accounted, warning = accounted_gpu_hours(m)
        if warning:
            print(f"history: warning: {warning}", file=sys.stderr)
    out = nightly_step(url, sd.root, hist, accounted=accounted)
    for line in out.lines:
        print(f"history: {line}", file=sys.stderr)
    return int(out.exit_code), _history_text(out)


def _history_text(out: Any) -> str:
    """One sentence for the report: what the history step of ``out`` (a NightlyOutcome) did."""
    if out.recorded is None:
        return " ".join(out.lines) or "nothing was recorded"
    said = f"recorded as series {out.recorded.series}"
    if out.exit_code == ExitCode.REGRESSION:
        said += "; a regression was flagged (history.json, history.html)"
    elif out.exit_code != ExitCode.OK:
        failed = [line for line in out.lines if not line.startswith(("warning:", "recorded in"))]
        said += "; " + ("; ".join(failed) or "the history step failed")
    else:
        said += "; no regression"
    return said


__all__ = ["ExitCode", "analyse", "cancelled_runs", "history_step", "record_history", "rewrite_report"]
