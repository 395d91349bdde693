"""Nightly history: a database of every run, regression detection against a rolling baseline, a trend page.

Public API (names are stable; ``experiments.sweep action=collect`` calls them in this order)::

    from analysis.history import record_summary, judge_sweep, write_trend_page
    result = record_summary(url, sweep_dir)            # -> RecordResult (idempotent per sweep id)
    report = judge_sweep(url, result.sweep_id)         # -> NightReport; report.exit_code is 0 or 4
    write_trend_page(url, sweep_dir / "report" / "history.html")

``judge_night(url, night, preset=, model=, cluster=)`` judges any recorded night. See README "Nightly runs".
"""

from analysis.history.api import (
    DEFAULT_URL,
    check_settings,
    judge_night,
    judge_sweep,
    load_history,
    record_summary,
    write_trend_page,
)
from analysis.history.errors import (
    HistoryCorruptError,
    HistoryError,
    HistoryInputError,
    HistoryLockedError,
    HistorySchemaError,
    HistoryStoreError,
    exit_code_for,
)
from analysis.history.ingest import load_summary
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
from analysis.history.store import HistoryStore

__all__ = [
    "DEFAULT_URL", "IMPROVEMENT", "MISSING_TONIGHT", "NEW_VARIANT", "REGRESSION", "VERDICTS", "WITHIN_NOISE",
    "HistoryConfig", "HistoryCorruptError", "HistoryError", "HistoryInputError", "HistoryLockedError",
    "HistorySchemaError", "HistoryStore", "HistoryStoreError", "MetricJudgement", "NightInput", "NightReport",
    "RecordResult", "RunRecord", "Series", "SpeedupRecord", "SweepInfo", "VariantJudgement", "check_settings",
    "exit_code_for",
    "judge_night", "judge_sweep", "load_history", "load_summary", "record_summary", "write_trend_page",
]
