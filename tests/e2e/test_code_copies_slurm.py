"""The code a Slurm job gets, through the real CLI on the local Slurm: only what a run needs (no tests/ and their
fixtures, no docs/), kept per sweep, and removed for finished jobs by ``python -m launchers.retention``, which
leaves the logs, the outputs and the report alone."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.e2e.cli import REPO, run_sweep, tail

pytestmark = [pytest.mark.slurm, pytest.mark.megatron, pytest.mark.slow, pytest.mark.usefixtures("slurm_cluster")]


def _digest(paths: list[Path]) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


def test_a_job_ships_only_what_a_run_needs_and_the_copies_are_removed_by_command(tmp_path):
    out = tmp_path / "s"
    res = run_sweep(["cluster=local_slurm", "allow_dirty=true", "poll_s=1", f"output_dir={out}", "sweep=full",
                     "dispatcher=alltoall", "overlap=off", "delay_wgrad=off"])
    assert res.returncode == 0, tail(res)
    (archive,) = out.glob("nemo_run/experiments/*/*/*/*.tar.gz")
    with tarfile.open(archive) as tar:
        top = {n.split("/", 1)[0] for n in tar.getnames()}
    assert {"experiments", "contracts", "launchers", "analysis", "conf"} <= top
    assert not top & {"tests", "docs"}, top
    assert (archive.parent / "code").is_dir()
    kept = [p for p in out.rglob("*") if p.is_file() and "code" not in p.relative_to(out).parts
            and not p.name.endswith(".tar.gz")]
    before = _digest(kept)
    res = subprocess.run([sys.executable, "-m", "launchers.retention", str(out)], cwd=REPO, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0 and "removed 2 code copies" in res.stdout, res.stdout + res.stderr
    assert not archive.exists() and not (archive.parent / "code").exists()
    assert _digest(kept) == before  # logs, outputs, manifest and report untouched
    res = subprocess.run([sys.executable, "-m", "launchers.retention", str(tmp_path)], cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and "error:" in res.stderr, res.stderr
