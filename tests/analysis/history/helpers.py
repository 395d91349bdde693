"""Test helpers: write a synthetic night as a real sweep folder (CONTRACTS §3 / §7 shapes), locate services."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from analysis.history.records import NightInput

FIXTURES = Path(__file__).parent / "fixtures"
GOLDEN_SWEEP = FIXTURES / "sweep_nightly"
IN_CI = os.environ.get("CI", "").lower() == "true"


def need_service(what: str, why: str) -> None:
    """A missing service fails in CI (CI=true) and skips elsewhere, with the command that starts it."""
    if IN_CI:
        pytest.fail(f"{what} is required in CI: {why}")
    pytest.skip(f"{what} not available: {why}")


def copy_golden(dest: Path) -> Path:
    out = dest / GOLDEN_SWEEP.name
    shutil.copytree(GOLDEN_SWEEP, out)
    return out


def _stat(value: float | None, **extra: Any) -> dict[str, Any] | None:
    return None if value is None else {"median": value, **extra}


def _group(key: str) -> dict[str, Any]:
    """``"model.expert_model_parallel_size=16"`` -> ``{"model.expert_model_parallel_size": 16}``."""
    pairs = (kv.split("=", 1) for kv in key.split(",") if kv)
    return {k: int(v) if v.isdigit() else v for k, v in pairs}


def write_sweep_dir(root: Path, night: NightInput) -> Path:
    """Write ``night`` as ``root/<sweep_id>/`` with manifest.json, report/summary.json and per-attempt run.json
    (step_times_ms there, not in summary.json), exactly the shapes the analysis and planner stages write."""
    s = night.sweep
    out = root / s.sweep_id
    created = s.created.strftime("%Y-%m-%dT%H:%M:%SZ")
    container = dict(s.container)
    if s.series.container:
        container["name"] = s.series.container
    runs = []
    for r in night.runs:
        rec = {"name": f"{r.variant}/attempt-{r.attempt}", "variant": r.variant, "attempt": r.attempt,
               "repeat": r.repeat, "status": r.status, "reason": r.reason, "evidence": [], "flags": [],
               "iterations": {"total": len(r.step_times_ms) + 3, "steady": len(r.step_times_ms), "skipped": 3},
               "train_iters": len(r.step_times_ms) + 3,
               "step_time_ms": _stat(r.step_time_ms, p90=r.step_time_p90_ms, ci_low=r.step_time_ci_low_ms,
                                     ci_high=r.step_time_ci_high_ms, n=r.n_steady),
               "tflops_per_gpu": _stat(r.tflops_per_gpu, ci_low=None, ci_high=None),
               "tokens_per_s_per_gpu": _stat(r.tokens_per_s_per_gpu, ci_low=None, ci_high=None),
               "peak_mem_gb": r.peak_mem_gb, "loss": None, "hosts": ["node001"], "files": [],
               "step_breakdown_ms": dict(r.breakdown_ms) or None}
        runs.append(rec)
        d = out / "variants" / r.variant / f"attempt-{r.attempt}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "run.json").write_text(json.dumps(dict(rec, step_times_ms=list(r.step_times_ms))))
    comparisons = [{"variant": x.variant, "baseline": x.baseline, "group": _group(x.group_key),
                    "speedup": None if x.value is None else {"value": x.value, "ci_low": x.ci_low, "ci_high": x.ci_high},
                    "verdict": x.verdict or "not_comparable", "loss_parity": None, "notes": []} for x in night.speedups]
    summary = {"schema_version": 1,
               "sweep": {"sweep_id": s.sweep_id, "name": s.series.preset, "git_sha": s.git_sha, "created": created,
                         "model": s.series.model, "cluster": s.series.cluster, "container": container},
               "runs": runs, "comparisons": comparisons}
    (out / "report").mkdir(parents=True, exist_ok=True)
    (out / "report" / "summary.json").write_text(json.dumps(summary, indent=1))
    names = sorted({r.variant for r in night.runs})
    manifest = {"schema_version": 1, "sweep_id": s.sweep_id, "name": s.series.preset, "created": created,
                "git_sha": s.git_sha, "dirty": False, "model": s.series.model, "cluster": s.series.cluster,
                "container": container,
                "design": {"run_gpu_hours": {r.variant: r.gpu_hours_estimate for r in night.runs
                                             if r.gpu_hours_estimate is not None}},
                "variants": [{"name": n, "role": r.role, "group": _group(r.group_key)}
                             for n in names for r in [next(r for r in night.runs if r.variant == n)]]}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return out
