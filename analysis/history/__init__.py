"""Nightly history: a database of every run, regression detection against a rolling baseline, a trend page.

Public API (names are stable; ``experiments.sweep action=collect`` calls them in this order)::

    from analysis.history import record_summary, judge_sweep, write_trend_page
    result = record_summary(url, sweep_dir)            # -> RecordResult (idempotent per sweep id)
    report = judge_sweep(url, result.sweep_id)         # -> NightReport; report.exit_code is 0 or 4
    write_trend_page(url, sweep_dir / "report" / "history.html")

``judge_night(url, night, preset=, model=, cluster=)`` judges any recorded night. See README "Nightly runs".
"""

from importlib import import_module
from typing import Any

# name -> the module that defines it; imported on first use (PEP 562), so that the planner's settings check
# (analysis.history.settings) does not pay for SQLAlchemy's engine and scipy (issue 17)
_WHERE = {
    "DEFAULT_URL": "analysis.history.settings",
    "HistoryConfig": "analysis.history.records",
    "HistoryCorruptError": "analysis.history.errors",
    "HistoryError": "analysis.history.errors",
    "HistoryInputError": "analysis.history.errors",
    "HistoryLockedError": "analysis.history.errors",
    "HistorySchemaError": "analysis.history.errors",
    "HistoryStore": "analysis.history.store",
    "HistoryStoreError": "analysis.history.errors",
    "IMPROVEMENT": "analysis.history.records",
    "MISSING_TONIGHT": "analysis.history.records",
    "MetricJudgement": "analysis.history.records",
    "NEW_VARIANT": "analysis.history.records",
    "NightInput": "analysis.history.records",
    "NightReport": "analysis.history.records",
    "REGRESSION": "analysis.history.records",
    "RecordResult": "analysis.history.records",
    "RunRecord": "analysis.history.records",
    "Series": "analysis.history.records",
    "SpeedupRecord": "analysis.history.records",
    "SweepInfo": "analysis.history.records",
    "VERDICTS": "analysis.history.records",
    "VariantJudgement": "analysis.history.records",
    "WITHIN_NOISE": "analysis.history.records",
    "check_settings": "analysis.history.settings",
    "exit_code_for": "analysis.history.errors",
    "judge_night": "analysis.history.api",
    "judge_sweep": "analysis.history.api",
    "load_history": "analysis.history.api",
    "load_summary": "analysis.history.ingest",
    "record_summary": "analysis.history.api",
    "write_trend_page": "analysis.history.api",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        value = getattr(import_module(_WHERE[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'analysis.history' has no attribute {name!r}")

__all__ = [
    "DEFAULT_URL", "IMPROVEMENT", "MISSING_TONIGHT", "NEW_VARIANT", "REGRESSION", "VERDICTS", "WITHIN_NOISE",
    "HistoryConfig", "HistoryCorruptError", "HistoryError", "HistoryInputError", "HistoryLockedError",
    "HistorySchemaError", "HistoryStore", "HistoryStoreError", "MetricJudgement", "NightInput", "NightReport",
    "RecordResult", "RunRecord", "Series", "SpeedupRecord", "SweepInfo", "VariantJudgement", "check_settings",
    "exit_code_for",
    "judge_night", "judge_sweep", "load_history", "load_summary", "record_summary", "write_trend_page",
]
