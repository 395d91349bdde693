"""From a finalised (or rejected) config to the ``effective_config.json`` document, in both modes."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from experiments.payload import runtime_info
from experiments.payload.effective import build_document, compare, mismatch_line, write_atomic
from experiments.payload.spec import VariantSpec

EFFECTIVE_FILE = "effective_config.json"


@dataclass
class Outcome:
    """What one config build produced.

    ``failures``: the library's messages when a check rejected the config; ``library_messages``: what the library
    logged while the payload applied the variant (e.g. Bridge's "Falling back to alltoall." warning);
    ``extra_mismatches``: differences found outside the §6 keys (e.g. the token dispatcher class actually built).
    """

    effective: dict[str, Any]
    adjustments: list[dict[str, Any]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    not_run: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    library_messages: list[str] = field(default_factory=list)
    extra_mismatches: list[dict[str, Any]] = field(default_factory=list)
    runtime: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Verdict:
    """The assembled document, its mismatches and env problems, and the verdict (``"pass"``/``"fail"``)."""

    doc: dict[str, Any]
    mismatches: list[dict[str, Any]]
    env_problems: list[str]
    verdict: str


def assemble(spec: VariantSpec, out: Outcome, *, hostnames: list[str] | None, target: bool,
             written_at: str) -> Verdict:
    """Compare, check the environment and build the CONTRACTS §6 document (nothing is written here).

    ``target=True`` records the target cluster's sizes (validate mode), else the launcher's (train mode).
    Environment problems fail the verdict only in train mode (a validate job runs in its own environment).
    """
    adjustments, mismatches = compare(spec, out.effective, out.adjustments)
    mismatches += out.extra_mismatches
    env, env_problems, env_warnings = runtime_info.env_report(spec)
    messages = list(out.failures)
    if mismatches:
        messages += [m for m in out.library_messages if m not in messages]
        messages += [f"payload: {m['field']} requested {m['requested']!r} but effective {m['effective']!r} "
                     f"({m['why']})" for m in mismatches]
    if env_problems and not target:
        messages += [f"payload: {p}" for p in env_problems]
    warnings = out.warnings + env_warnings + ([f"environment: {p}" for p in env_problems] if target else [])
    warnings += [m for m in out.library_messages if m not in messages]
    verdict = "fail" if messages else "pass"
    doc = build_document(
        spec, effective=out.effective, adjustments=adjustments, mismatches=mismatches, env=env,
        versions=runtime_info.versions(), hardware=runtime_info.hardware(spec, hostnames, target=target),
        verdict=verdict, messages=messages, not_run=out.not_run, warnings=warnings, written_at=written_at,
        extra={"notes": out.notes, "runtime": out.runtime, "sweep_id": spec.sweep_id},
    )
    return Verdict(doc, mismatches, env_problems if not target else [], verdict)


WRITTEN: set[Path] = set()  # documents this process wrote (an error later amends them instead of replacing)


def write_effective(out_dir: str | Path, doc: dict[str, Any]) -> Path:
    """Write ``OUT_DIR/effective_config.json`` atomically."""
    path = write_atomic(Path(out_dir) / EFFECTIVE_FILE, doc)
    WRITTEN.add(path.resolve())
    return path


def amend_with_error(out_dir: str | Path, line: str) -> bool:
    """Add a later error to the document this process already wrote (keeping its effective values): the verdict
    becomes ``fail``. Returns False when this process wrote no document there."""
    path = (Path(out_dir) / EFFECTIVE_FILE).resolve()
    if path not in WRITTEN:
        return False
    doc = json.loads(path.read_text())
    doc["checks"]["verdict"] = "fail"
    doc["checks"]["messages"] = [*doc["checks"]["messages"], line]
    doc["written_at"] = f"{doc.get('written_at')}+error"
    write_effective(out_dir, doc)
    return True


def loud(spec: VariantSpec, v: Verdict) -> list[str]:
    """The log lines for a failed verdict: one loud MISMATCH line, then each message."""
    lines = [mismatch_line(spec, v.mismatches)] if v.mismatches else []
    lines += [f"[payload]   {m}" for m in v.doc["checks"]["messages"]]
    return lines
