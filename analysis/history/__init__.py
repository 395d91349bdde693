"""Nightly history: a database of every run, regression detection against a rolling baseline, a trend page.

Public API (names are stable; ``experiments.sweep action=collect`` calls them in this order)::

    from analysis.history import record_summary, judge_sweep, write_trend_page
    result = record_summary(url, sweep_dir)            # -> RecordResult (idempotent per sweep id)
    report = judge_sweep(url, result.sweep_id)         # -> NightReport; report.exit_code is 0 or 4
    write_trend_page(url, sweep_dir / "report" / "history.html")

``judge_night(url, night, preset=, model=, cluster=)`` judges any recorded night. See README "Nightly runs".

Importing the package is light (records, errors and the plan-time check :func:`check_settings`): the database layer
(SQLAlchemy), the judge (SciPy) and the ingest load on the first use of one of their names, so the planner's
``history.*`` check imports neither (together about 1-1.5 s of a plan).
"""

from __future__ import annotations

import importlib
from typing import Any

from analysis.history.errors import (
    HistoryCorruptError,
    HistoryError,
    HistoryInputError,
    HistoryLockedError,
    HistorySchemaError,
    HistoryStoreError,
    exit_code_for,
)
from analysis.history.records import (
    IMPROVEMENT,
    MISSING_TONIGHT,
    NEW_VARIANT,
    REGRESSION,
    VERDICTS,
    WITHIN_NOISE,
    HistoryConfig,
    MetricJudgement,
    NightInput,
    NightReport,
    RecordResult,
    RunRecord,
    Series,
    SpeedupRecord,
    SweepInfo,
    VariantJudgement,
)
from analysis.history.settings import DEFAULT_URL, check_settings, password_from_env
from contracts.secrets import hide_password

_LAZY = {  # name -> the module that defines it, imported on first use (PEP 562)
    "judge_night": "analysis.history.api", "judge_sweep": "analysis.history.api",
    "load_history": "analysis.history.api", "record_summary": "analysis.history.api",
    "write_trend_page": "analysis.history.api", "load_summary": "analysis.history.ingest",
    "nightly_prior": "analysis.history.api", "series_prior": "analysis.history.api",
    "HistoryStore": "analysis.history.store", "alert_not_recorded": "analysis.history.nightly",
    "Outlets": "analysis.history.outlets",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_URL", "IMPROVEMENT", "MISSING_TONIGHT", "NEW_VARIANT", "REGRESSION", "VERDICTS", "WITHIN_NOISE",
    "HistoryConfig", "HistoryCorruptError", "HistoryError", "HistoryInputError", "HistoryLockedError",
    "HistorySchemaError", "HistoryStore", "HistoryStoreError", "MetricJudgement", "NightInput", "NightReport",
    "RecordResult", "RunRecord", "Series", "SpeedupRecord", "SweepInfo", "VariantJudgement", "check_settings",
    "exit_code_for", "hide_password", "password_from_env", "alert_not_recorded", "Outlets",
    "judge_night", "judge_sweep", "load_history", "load_summary", "record_summary", "write_trend_page",
]
