"""The analysis stage and the nightly history, called through their Python APIs with the sweep's own options."""

from __future__ import annotations

import sys
from typing import Any

from analysis.api import Options, Summary, print_summary, report_sweep
from contracts.atomic import write_json
from contracts.exits import ExitCode
from contracts.manifest import Manifest
from contracts.sweepdir import SweepDir


def analyse(sd: SweepDir, options: Options, quiet: bool = False) -> Summary:
    """Analyse the sweep folder and write its report (``report/``, each attempt's ``run.json``)."""
    summary = report_sweep(sd.root, options)
    if not quiet:
        show(summary, sd)
    return summary


def show(summary: Summary, sd: SweepDir) -> None:
    """Print the analysed sweep's table and where its report is (the sweep prints its final exit code once)."""
    print_summary(summary, sd.report, show_exit_code=False)


def record_history(sd: SweepDir, m: Manifest, hist: dict[str, Any]) -> int:
    """Record the analysed sweep in the history database, judge tonight against the rolling baseline and write
    ``report/history.json`` + ``report/history.html``. Returns 0, 4 (regression) or 2/5 (database problem)."""
    from analysis.history import (
        HistoryConfig,
        HistoryError,
        exit_code_for,
        hide_password,
        judge_sweep,
        password_from_env,
        record_summary,
        write_trend_page,
    )

    shown = hide_password(hist.get("url"))  # the console (a cron line appends it to a log) never shows a password
    try:
        url = password_from_env(hist.get("url"))
        res = record_summary(url, sd.root)
        for w in res.warnings:
            print(f"history: {w}", file=sys.stderr)
        report = judge_sweep(url, res.sweep_id, config=HistoryConfig.from_mapping(hist))
        write_json(sd.history_json, report.to_json())
        write_trend_page(url, sd.history_html)
        print(f"history: recorded in {shown}; verdicts in {sd.history_json}")
        return int(report.exit_code)
    except HistoryError as e:
        print(f"history: {e}", file=sys.stderr)
        return int(exit_code_for(e))


__all__ = ["ExitCode", "analyse", "record_history"]
