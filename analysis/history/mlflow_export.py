"""Export a recorded night to an MLflow tracking server (``history.mlflow=<tracking URI>``), over its REST API.

The export speaks MLflow's REST API 2.0 with ``requests`` (https://mlflow.org/docs/latest/rest-api.html:
``experiments/get-by-name``, ``experiments/create``, ``runs/search``, ``runs/delete``, ``runs/create``,
``runs/log-batch``, ``runs/update``; artifacts through the server's proxy, ``PUT /api/2.0/mlflow-artifacts/
artifacts/<path>``, which ``mlflow server`` serves by default since 2.0), so the project needs no ``mlflow``
package (its server's pins clash with this environment's).

Layout, in the experiment ``history.mlflow_experiment`` (default ``moe-sweep/<preset>``):

* one parent run per sweep, named ``<night> <sweep id>``: params series, sweep id, git sha and the container
  versions; metrics the night's regression count and exit code; artifacts ``report.md`` and ``history.json``;
* one child run per (variant, repeat) (tag ``mlflow.parentRunId``): params the variant's knobs (dispatcher,
  overlap, delay_wgrad, every axis) and versions; metrics ``step_time_ms`` (median, with ``_ci_low``/``_ci_high``),
  ``tflops_per_gpu``, ``tokens_per_s_per_gpu``, ``speedup`` with ``speedup_ci_low``/``speedup_ci_high`` (the
  variant's, on each of its runs), GPU-hours estimate and accounted.

A tracking URI with a user and password (``http://user:pass@host:5000``) is recorded as ``http://user:***@host:5000``;
a later collect then takes them from MLflow's own variables ``MLFLOW_TRACKING_USERNAME`` and
``MLFLOW_TRACKING_PASSWORD`` (HTTP basic auth).

Exporting a sweep again first deletes the runs tagged with its sweep id, so the server holds each sweep once.
Errors raise :class:`MlflowExportError` (the caller turns it into a warning: an export never fails the night).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from analysis.history.outlets import within
from analysis.history.records import NightInput, NightReport
from contracts.secrets import MASK, mask_url

SWEEP_TAG = "moe_sweep.sweep_id"
EXPORT_DEADLINE_S = 120.0  # a whole night's export: about 3 requests per run, each a few ms on a healthy server
_MAX_PARAM = 500  # MLflow's limit on a param value's length (6000 on newer servers; 500 is safe everywhere)


class MlflowExportError(RuntimeError):
    """The tracking server could not be reached or refused a request (the message names the server masked)."""


@dataclass(frozen=True, kw_only=True)
class ExportResult:
    """What was written: the experiment id, the parent run id and how many child runs."""

    experiment_id: str
    parent_run_id: str
    runs: int
    server: str


class _Client:
    def __init__(self, uri: str, timeout_s: float, deadline_s: float):
        import requests

        self.shown = mask_url(uri)
        self.timeout_s = timeout_s
        self.deadline = time.monotonic() + deadline_s
        self.deadline_s = deadline_s
        self.http = requests.Session()
        parts = urlsplit(uri.rstrip("/"))
        if parts.password == MASK:  # stored masked (CONTRACTS §10): MLflow's own variables give the credentials
            user = os.environ.get("MLFLOW_TRACKING_USERNAME") or parts.username or ""
            self.http.auth = (user, os.environ.get("MLFLOW_TRACKING_PASSWORD", ""))
            parts = parts._replace(netloc=parts.netloc.rpartition("@")[2])
        self.base = parts.geturl()

    def call(self, method: str, path: str, body: Mapping[str, Any] | None = None, params: Mapping[str, Any] | None = None,
             ok404: bool = False) -> dict[str, Any]:
        import requests

        try:
            resp = self._within(lambda: self.http.request(method, f"{self.base}/api/2.0/mlflow/{path}", json=body,
                                                          params=params, timeout=self.timeout_s))
        except (requests.RequestException, TimeoutError) as e:
            raise MlflowExportError(f"MLflow server {self.shown} did not answer {path} ({type(e).__name__}; the "
                                    f"export may take {self.deadline_s:g} s in all)") from None
        if ok404 and resp.status_code == 404:
            return {}
        if resp.status_code >= 300:
            raise MlflowExportError(f"MLflow server {self.shown} refused {path}: HTTP {resp.status_code} "
                                    f"{resp.text[:200]}")
        return resp.json() if resp.content else {}

    def _within(self, call: Callable[[], Any]) -> Any:
        """``call()`` within what is left of the export's total deadline (a trickling server cannot hold it)."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"the export's {self.deadline_s:g} s are spent")
        return within(call, left)

    def put_artifact(self, artifact_uri: str, name: str, data: bytes) -> None:
        import requests

        prefix = "mlflow-artifacts:/"
        if not artifact_uri.startswith(prefix):
            raise MlflowExportError(f"MLflow server {self.shown} stores artifacts at {artifact_uri!r}, not through "
                                    f"its proxy (start it with --serve-artifacts, the default)")
        path = artifact_uri[len(prefix):].lstrip("/")
        try:
            resp = self._within(lambda: self.http.put(f"{self.base}/api/2.0/mlflow-artifacts/artifacts/{path}/{name}",
                                                      data=data, timeout=self.timeout_s))
        except (requests.RequestException, TimeoutError) as e:
            raise MlflowExportError(f"MLflow server {self.shown}: uploading {name} failed ({type(e).__name__})") from None
        if resp.status_code >= 300:
            raise MlflowExportError(f"MLflow server {self.shown} refused the artifact {name}: HTTP {resp.status_code}")


def _metric(key: str, value: float | None, ts: int, step: int = 0) -> list[dict[str, Any]]:
    if value is None or not math.isfinite(float(value)):
        return []
    return [{"key": key, "value": float(value), "timestamp": ts, "step": step}]


def _params(pairs: Mapping[str, Any]) -> list[dict[str, str]]:
    return [{"key": str(k)[:250], "value": str(v)[:_MAX_PARAM]} for k, v in pairs.items() if v is not None]


def _knobs(manifest: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    out = {}
    for v in (manifest or {}).get("variants") or []:
        if isinstance(v, dict) and v.get("name"):
            knobs = {k: v.get(k) for k in ("dispatcher", "overlap", "delay_wgrad", "role", "stage")}
            knobs.update({f"axis.{k}": val for k, val in (v.get("axes") or {}).items()})
            knobs.update({f"group.{k}": val for k, val in (v.get("group") or {}).items()})
            out[v["name"]] = knobs
    return out


def export_night(uri: str, night: NightInput, report: NightReport | None, *, manifest: Mapping[str, Any] | None,
                 report_md: Path | None, history_json: Path | None, experiment: str | None = None,
                 timeout_s: float = 10.0, deadline_s: float = EXPORT_DEADLINE_S) -> ExportResult:
    """Log the sweep ``night`` (its runs, speedups and verdicts) to the MLflow server at ``uri``.

    ``timeout_s``: per socket read (s); ``deadline_s``: for the whole export, every request included (s).

    Raises :class:`MlflowExportError` when the server is unreachable, refuses a request, or the export has not
    finished within ``deadline_s``.
    """
    c = _Client(uri, timeout_s, deadline_s)
    s = night.sweep
    name = experiment or f"moe-sweep/{s.series.preset}"
    got = c.call("GET", "experiments/get-by-name", params={"experiment_name": name}, ok404=True)
    exp_id = (got.get("experiment") or {}).get("experiment_id")
    if not exp_id:
        exp_id = c.call("POST", "experiments/create", {"name": name})["experiment_id"]
    old = c.call("POST", "runs/search", {"experiment_ids": [exp_id], "filter": f"tags.`{SWEEP_TAG}` = '{s.sweep_id}'",
                                         "max_results": 1000})
    for r in old.get("runs") or []:
        c.call("POST", "runs/delete", {"run_id": r["info"]["run_id"]})
    ts = int(time.time() * 1000)
    versions = {f"version.{k}": v for k, v in s.container}
    tags = [{"key": SWEEP_TAG, "value": s.sweep_id}, {"key": "moe_sweep.series", "value": str(s.series)},
            {"key": "moe_sweep.night", "value": s.night.isoformat()}]
    parent = c.call("POST", "runs/create", {"experiment_id": exp_id, "run_name": f"{s.night} {s.sweep_id}",
                                            "start_time": ts, "tags": tags})["run"]["info"]
    verdicts = {v.variant: v for v in (report.variants if report else ())}
    c.call("POST", "runs/log-batch", {
        "run_id": parent["run_id"],
        "params": _params({"series": str(s.series), "sweep_id": s.sweep_id, "git_sha": s.git_sha, **versions}),
        "metrics": _metric("regressions", len(report.regressions) if report else None, ts)
        + _metric("exit_code", report.night_exit_code if report else None, ts)})
    for path, label in ((report_md, "report.md"), (history_json, "history.json")):
        if path is not None and Path(path).is_file():
            c.put_artifact(parent["artifact_uri"], label, Path(path).read_bytes())
    knobs = _knobs(manifest)
    speedup = {x.variant: x for x in night.speedups}
    for r in night.runs:
        child = c.call("POST", "runs/create", {
            "experiment_id": exp_id, "run_name": f"{r.variant} r{r.repeat}", "start_time": ts,
            "tags": tags + [{"key": "mlflow.parentRunId", "value": parent["run_id"]},
                            {"key": "moe_sweep.status", "value": r.status},
                            {"key": "moe_sweep.verdict", "value": verdicts[r.variant].step_time.verdict
                             if r.variant in verdicts else "not_judged"}]})["run"]["info"]
        sp = speedup.get(r.variant)
        metrics = (_metric("step_time_ms", r.step_time_ms, ts) + _metric("step_time_ms_ci_low", r.step_time_ci_low_ms, ts)
                   + _metric("step_time_ms_ci_high", r.step_time_ci_high_ms, ts)
                   + _metric("tflops_per_gpu", r.tflops_per_gpu, ts)
                   + _metric("tokens_per_s_per_gpu", r.tokens_per_s_per_gpu, ts)
                   + _metric("gpu_hours_estimate", r.gpu_hours_estimate, ts)
                   + _metric("gpu_hours_accounted", r.gpu_hours_accounted, ts))
        if sp is not None:
            metrics += (_metric("speedup", sp.value, ts) + _metric("speedup_ci_low", sp.ci_low, ts)
                        + _metric("speedup_ci_high", sp.ci_high, ts))
        params = {"variant": r.variant, "repeat": r.repeat, "attempt": r.attempt, **knobs.get(r.variant, {}),
                  "baseline": sp.baseline if sp else None, **versions}
        c.call("POST", "runs/log-batch", {"run_id": child["run_id"], "params": _params(params), "metrics": metrics})
        c.call("POST", "runs/update", {"run_id": child["run_id"], "status": "FINISHED", "end_time": ts})
    c.call("POST", "runs/update", {"run_id": parent["run_id"], "status": "FINISHED", "end_time": ts})
    return ExportResult(experiment_id=str(exp_id), parent_run_id=parent["run_id"], runs=len(night.runs),
                        server=c.shown)

