"""The analysis stage and the nightly history, called through their Python APIs with the sweep's own options."""

from __future__ import annotations

import sys
from typing import Any

from analysis.api import Options, Summary, print_summary, report_sweep
from contracts.exits import ExitCode
from contracts.manifest import Manifest
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


def record_history(sd: SweepDir, m: Manifest | None, hist: dict[str, Any]) -> int:
    """Record the analysed sweep in the history database, judge tonight within its series, write
    ``report/history.json`` + ``report/history.html``, alert (``history.notify``) and export (``history.mlflow``)
    through :func:`analysis.history.nightly.nightly_step`. On Slurm each run's GPU-hours are first asked of
    ``sacct`` (:func:`experiments.conductor.accounting.accounted_gpu_hours`) and stored beside the estimate. A
    password the manifest holds as ``***`` comes from ``PGPASSWORD`` or ``~/.pgpass``
    (:func:`analysis.history.password_from_env`); no console line shows one.
    Returns 0, 4 (regression), 2 (bad input, nothing recorded) or 5 (database problem)."""
    from analysis.history import HistoryError, exit_code_for, password_from_env
    from analysis.history.nightly import nightly_step

    try:
        url = password_from_env(hist.get("url"))
    except HistoryError as e:
        print(f"history: {e}", file=sys.stderr)
        return int(exit_code_for(e))
    accounted: dict[tuple[str, int], tuple[float | None, str]] = {}
    if m is not None:
        from experiments.conductor.accounting import accounted_gpu_hours

        accounted, warning = accounted_gpu_hours(m)
        if warning:
            print(f"history: warning: {warning}", file=sys.stderr)
    out = nightly_step(url, sd.root, hist, accounted=accounted)
    for line in out.lines:
        print(f"history: {line}", file=sys.stderr)
    return int(out.exit_code)


__all__ = ["ExitCode", "analyse", "record_history"]
