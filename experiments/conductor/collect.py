"""Collect an attempt: its log files and effective_config.json into ``variants/<v>/attempt-<k>/`` (CONTRACTS §3).

Nothing already collected is overwritten, every secret value is masked in the copies (CONTRACTS §10), and the
payload's adjustments are returned for the round's manifest write.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from contracts.atomic import write_bytes, write_stream, write_text
from contracts.cluster import ClusterConfig
from contracts.manifest import Manifest
from contracts.records import RunRef
from contracts.secrets import mask_stream
from contracts.sweepdir import SweepDir
from launchers.backend import Backend
from launchers.envvars import cluster_env


def secret_values(m: Manifest, cluster: dict[str, Any] | None = None) -> list[str]:
    """The secret values this process passes to jobs, to mask in every log this tool copies: the ``cluster``
    config of this process's plan when given (``+cluster.env_vars.HF_TOKEN=...`` on the command line), else the
    manifest's with each value it records as ``***`` taken from this shell (a resume), and the
    ``cluster.secret_env`` names set here. Over SSH with ``allow_ssh_secrets=true`` they are written into the job
    script, whose trace is in the sbatch log."""
    from contracts.secrets import MASK
    from experiments.conductor.backends import job_cluster

    profile = ClusterConfig.from_json(job_cluster(cluster or m.cluster_config, strict=False))
    return [v for v in cluster_env(profile).secret_values() if v != MASK]


def log_name(src: Path, ref: RunRef) -> str:
    """The collected name of a log file: NeMo-Run/torchx's generic names get the task and folder prefixed."""
    if src.name in ("combined.log", "stdout.log", "stderr.log"):
        return f"{ref.task}_{src.parent.name}_{src.name}"
    return src.name


def collect(sd: SweepDir, backend: Backend, ref: RunRef, secrets: list[str]) -> list[dict[str, Any]]:
    """Copy the attempt's logs and effective config (masked, never overwriting). Returns the payload's
    adjustments (docs/CONTRACTS.md §6) when this call collected its effective_config.json, else []."""
    logs = sd.logs(ref)
    logs.mkdir(parents=True, exist_ok=True)
    for src in backend.log_files(ref):
        dst = logs / log_name(src, ref)
        if src.exists() and not dst.exists():
            copy_masked(src, dst, secrets)
    eff = backend.payload_out(ref) / "effective_config.json"
    dst = sd.effective_config(ref)
    collect_profile(eff.parent, dst.parent)
    if not eff.exists() or dst.exists():
        return []
    text = eff.read_text()
    write_text(dst, text)
    try:
        return list(json.loads(text).get("adjustments") or [])
    except (ValueError, AttributeError):
        return []


def copy_masked(src: Path, dst: Path, secrets: list[str]) -> None:
    """Copy ``src`` to ``dst`` with every secret value masked, streamed a chunk at a time (a 2 GB log costs a few
    MB of memory, not 2 GB), atomically (``contracts.atomic.write_stream``): a copy cut short by a full disk
    leaves no partial ``dst``, so the next collect copies it again.

    Raises:
        OSError: ``src`` cannot be read or ``dst`` cannot be written (no temporary file is left).
    """
    with open(src, "rb") as fin:
        write_stream(dst, lambda fout: mask_stream(fin, fout, secrets))


def collect_profile(out: Path, attempt_dir: Path) -> int:
    """Copy the payload's ``profile/`` (``profile=true``: request.json, the rank-0 torch.profiler trace and a
    step_breakdown.json if any; not the TensorBoard events) into the attempt folder, never overwriting, so that
    the analysis finds it there (analysis/measure/profile_breakdown.py). Returns the number of files copied. Over SSH
    the payload's out/ is not fetched beyond effective_config.json, so nothing is copied there."""
    src = out / "profile"
    if not src.is_dir():
        return 0
    n = 0
    for f in sorted(src.rglob("*")):
        rel = f.relative_to(src)
        if not f.is_file() or rel.parts[0] == "tb":
            continue
        dst = attempt_dir / "profile" / rel
        if not dst.exists():
            write_bytes(dst, f.read_bytes())
            n += 1
    return n


def write_script(sd: SweepDir, ref: RunRef, text: str | None) -> None:
    """``job.sh`` as submitted: in the attempt folder, and as the variant's latest (CONTRACTS §3)."""
    if text:
        write_text(sd.attempt_job_sh(ref), text)
        write_text(sd.job_sh(ref.variant), text)
