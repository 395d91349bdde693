"""Attempt bookkeeping in the manifest (CONTRACTS §3-§4), always through :mod:`experiments.manifest`.

An attempt is one submission of one run (variant, repeat). Attempts are numbered per variant, 1, 2, ...; a resume
or requeue makes k+1 and older attempts stay. For each (variant, repeat) the latest attempt counts.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contracts.statuses import FINAL_STATUSES
from experiments import manifest


def now_iso() -> str:
    """Current UTC time, ISO 8601 with a trailing Z, to the second."""
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class RunRef:
    """One run to submit: variant name, repeat index and the attempt number it gets."""

    variant: str
    repeat: int
    attempt: int

    @property
    def task(self) -> str:
        """NeMo-Run task / Slurm job name: ``<variant>.r<repeat>.a<attempt>`` (safe characters only)."""
        return f"{self.variant}.r{self.repeat}.a{self.attempt}"

    def attempt_dir(self, sweep_dir: Path) -> Path:
        return Path(sweep_dir) / "variants" / self.variant / f"attempt-{self.attempt}"


def latest_attempts(m: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    """(variant, repeat) -> its latest attempt record."""
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for v in m["variants"]:
        for a in v.get("attempts", []):
            key = (v["name"], a["repeat"])
            if key not in out or a["attempt"] > out[key]["attempt"]:
                out[key] = a
    return out


def new_attempts(sweep_dir: Path, runs: list[tuple[str, int]]) -> list[RunRef]:
    """Create a ``planned`` attempt record (k = previous max + 1) for each (variant, repeat); return the refs."""
    refs: list[RunRef] = []

    def change(m: dict[str, Any]) -> None:
        refs.clear()
        for name, repeat in runs:
            v = manifest.find_variant(m, name)
            k = max((a["attempt"] for a in v.get("attempts", [])), default=0) + 1
            ref = RunRef(name, repeat, k)
            v.setdefault("attempts", []).append({
                "attempt": k, "repeat": repeat, "status": "planned", "job_id": None, "submitted": None,
                "finished": None, "exit_code": None, "log_dir": f"variants/{name}/attempt-{k}/logs",
                "task": ref.task, "experiment_id": None, "flags": [],
            })
            refs.append(ref)

    manifest.update(sweep_dir, change)
    for r in refs:
        r.attempt_dir(sweep_dir).mkdir(parents=True, exist_ok=True)
    return refs


def set_attempt(sweep_dir: Path, ref: RunRef, **fields: Any) -> None:
    """Update fields of one attempt record (status, job_id, exit_code, ...). Final statuses stick unless forced."""

    def change(m: dict[str, Any]) -> None:
        v = manifest.find_variant(m, ref.variant)
        for a in v["attempts"]:
            if a["attempt"] == ref.attempt:
                if a["status"] in FINAL_STATUSES and fields.get("status") not in (None, a["status"]) \
                        and not fields.pop("force", False):
                    fields.pop("status", None)
                fields.pop("force", None)
                flags = fields.pop("add_flags", [])
                a.update(fields)
                a["flags"] = sorted(set(a.get("flags", [])) | set(flags))
                if a["status"] in FINAL_STATUSES and not a.get("finished"):
                    a["finished"] = now_iso()
                return
        raise KeyError(f"attempt {ref.attempt} of {ref.variant} is not in the manifest")

    manifest.update(sweep_dir, change)


def set_variant_status(sweep_dir: Path, names: list[str], status: str, reason: str | None = None) -> None:
    """Set the plan status of variants (e.g. gated -> planned when a gate opens, or -> skipped/pruned)."""

    def change(m: dict[str, Any]) -> None:
        for n in names:
            v = manifest.find_variant(m, n)
            v["status"] = status
            if reason:
                v.setdefault("reasons", []).append(reason)

    manifest.update(sweep_dir, change)
