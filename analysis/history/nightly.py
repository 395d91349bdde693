"""The nightly history step of one collected sweep, as ``experiments.sweep action=collect`` runs it.

In order: record the sweep (:func:`record_summary`), judge its night within its own series (:func:`judge_sweep`),
write ``report/history.json``, write the trend page (every series of the database, this sweep's first), post the
alert when the night regressed or a run failed (``history.notify``), export to MLflow (``history.mlflow``).

Exit code (CONTRACTS §5) of the step: what went wrong first decides, and a later step never hides an earlier one.
A bad input before anything is written is 2; the database unusable is 5; once the night is recorded and judged its
verdict (0 or 4) stands: the page, the alert and the export add warnings, and a page that fails on a database
error adds 5 (infrastructure), never 2.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.history.errors import HistoryError, HistoryInputError, HistoryStoreError, exit_code_for
from analysis.history.outlets import Outlets
from analysis.history.records import HistoryConfig, NightInput, NightReport, RecordResult, ran_and_failed
from contracts.atomic import write_json
from contracts.exits import ExitCode, combine
from contracts.sweepdir import SweepDir


@dataclass(frozen=True, kw_only=True)
class NightlyOutcome:
    """What the step did. ``exit_code``: 0, 4 (regression), 2 (bad input, nothing recorded) or 5 (database);
    ``lines``: what to print (stderr), warnings included; ``notified``/``exported``: None when not asked."""

    exit_code: int
    recorded: RecordResult | None = None
    report: NightReport | None = None
    page: Path | None = None
    notified: bool | None = None
    exported: bool | None = None
    lines: tuple[str, ...] = ()


def _failed_runs(night: NightInput) -> tuple[str, ...]:
    return tuple(f"{r.variant} repeat {r.repeat}: {r.status}" + (f" ({r.reason})" if r.reason else "")
                 for r in night.runs if ran_and_failed(r.status))


def nightly_step(url: str, sweep_dir: str | Path, settings: Mapping[str, Any], *,
                 accounted: Mapping[tuple[str, int], tuple[float | None, str]] | None = None,
                 runs_exit_code: int = 0) -> NightlyOutcome:
    """Run the history step for the analysed sweep folder ``sweep_dir`` with the ``history`` group ``settings``.

    ``accounted``: GPU-hours Slurm accounted per (variant, repeat) (see :func:`record_summary`).
    ``runs_exit_code``: the analysis' exit code (3 when a run failed), which decides, with the verdict, whether
    the night is alerted. Never raises for a history, alert or export problem (they are in the outcome).
    """
    from analysis.history.api import judge_sweep, record_summary, write_trend_page
    from analysis.history.ingest import load_summary

    sd = SweepDir(Path(sweep_dir))
    lines: list[str] = []
    try:
        config = HistoryConfig.from_mapping(dict(settings))
        outlets = Outlets.from_mapping(dict(settings))
    except (ValueError, HistoryInputError) as e:
        return NightlyOutcome(exit_code=ExitCode.USAGE, lines=(f"{e}; nothing was recorded",))
    night = None
    try:
        night = load_summary(sd.root, accounted=accounted)
        res = record_summary(url, night)
    except HistoryError as e:
        code = exit_code_for(e)
        said = [f"{e} (nothing was recorded)"]
        if outlets.notify is not None:  # an unattended night that is not recorded is told, or nobody would know
            series = str(night.sweep.series) if night is not None else sd.root.name
            when = str(night.sweep.night) if night is not None else ""
            alert_not_recorded(outlets, series, when, int(combine(runs_exit_code, code)), str(e), said)
        return NightlyOutcome(exit_code=code, lines=tuple(said))
    lines += list(res.warnings)
    try:
        report = judge_sweep(url, res.sweep_id, config=config)
        write_json(sd.history_json, report.to_json())
    except (HistoryError, OSError) as e:
        code = exit_code_for(e) if isinstance(e, HistoryError) else ExitCode.INFRA
        return NightlyOutcome(exit_code=code, recorded=res, lines=(*lines, f"the night is recorded, but judging "
                                                                   f"it failed: {e}"))
    rc: int = report.exit_code
    page = None
    try:
        page = write_trend_page(url, sd.history_html, config=config, first=res.series)
    except HistoryStoreError as e:
        rc = combine(rc, exit_code_for(e))
        lines.append(f"the trend page was not written: {e}")
    except (HistoryError, OSError, ValueError) as e:
        lines.append(f"warning: the trend page was not written: {e}")
    lines.append(f"recorded in {res.url} as series {res.series}; verdicts in {sd.history_json}")
    notified = exported = None
    failed = _failed_runs(night)
    runs_rc = ExitCode.RUN_FAILED if failed else runs_exit_code
    if outlets.notify is not None and (report.exit_code == ExitCode.REGRESSION or runs_rc == ExitCode.RUN_FAILED):
        notified = _notify(outlets, failed, report, res, runs_rc, page, lines)
    if outlets.mlflow is not None:
        exported = _export(outlets, night, report, sd, lines)
    return NightlyOutcome(exit_code=rc, recorded=res, report=report, page=page, notified=notified,
                          exported=exported, lines=tuple(lines))


def _notify(outlets: Outlets, failed: tuple[str, ...], report: NightReport, res: RecordResult, runs_exit_code: int,
            page: Path | None, lines: list[str]) -> bool:
    from analysis.history.notify import message_for, send

    url, shown = outlets.notify_url()
    if url is None:
        lines.append(f"warning: no alert sent: {shown}")
        return False
    link = outlets.page_url or (page.resolve().as_uri() if page else None)
    msg = message_for(report, series=str(res.series), night=str(res.night),
                      exit_code=int(combine(runs_exit_code, report.exit_code)), failed=failed, page=link)
    out = send(msg, url, shown, fmt=outlets.notify_format, timeout_s=outlets.notify_timeout_s)
    lines.append(f"alert sent to {shown}" if out.sent else f"warning: {out.warning}")
    return out.sent


def alert_not_recorded(outlets: Outlets, series: str, night: str, exit_code: int, why: str, lines: list[str]) -> bool:
    """Send the alert that the night of ``series`` could not be recorded (``why``); what happened is appended to
    ``lines``. Returns whether the receiver took it. Never raises (the alert's own failure is a warning line)."""
    from analysis.history.notify import NightMessage, send

    url, shown = outlets.notify_url()
    if url is None:
        lines.append(f"warning: no alert sent: {shown}")
        return False
    msg = NightMessage(series=series, night=night, sweep_ids=(), exit_code=exit_code, page=outlets.page_url,
                       not_recorded=why)
    out = send(msg, url, shown, fmt=outlets.notify_format, timeout_s=outlets.notify_timeout_s)
    lines.append(f"alert sent to {shown}" if out.sent else f"warning: {out.warning}")
    return out.sent


def _export(outlets: Outlets, night: NightInput, report: NightReport, sd: SweepDir, lines: list[str]) -> bool:
    import json

    from analysis.history.mlflow_export import MlflowExportError, export_night
    from contracts.secrets import mask_url

    manifest = None
    try:
        manifest = json.loads(sd.manifest.read_text())
    except (OSError, ValueError):
        pass
    try:
        out = export_night(outlets.mlflow, night, report, manifest=manifest, report_md=sd.report / "report.md",
                           history_json=sd.history_json, experiment=outlets.mlflow_experiment,
                           deadline_s=outlets.mlflow_timeout_s)
    except MlflowExportError as e:
        lines.append(f"warning: not exported to MLflow: {e}; the night is recorded and its exit code stands")
        return False
    except Exception as e:  # noqa: BLE001 - an export is a courtesy: whatever breaks in it never fails the night
        lines.append(f"warning: not exported to MLflow {mask_url(outlets.mlflow)}: {type(e).__name__}: {e}")
        return False
    lines.append(f"exported to MLflow {out.server}: experiment {out.experiment_id}, run {out.parent_run_id} with "
                 f"{out.runs} child run(s)")
    return True
