"""The code a Slurm job gets, through the real CLI on the local Slurm: only what a run needs (no tests/ and their
fixtures, no docs/), kept per sweep, and removed for finished jobs by ``python -m launchers.retention``, which
leaves the logs, the outputs and the report alone. With ``pack=true`` the runs of one allocation share one copy:
retention run while the allocation still has a run to go keeps it, and removes it once the sweep has ended."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from contracts.statuses import ManifestStatus
from tests.e2e.cli import REPO, read_only_view, run_sweep, spawn_sweep, tail

pytestmark = [pytest.mark.slurm, pytest.mark.megatron, pytest.mark.slow, pytest.mark.usefixtures("slurm_cluster")]


def _digest(paths: list[Path]) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


def _retention(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "launchers.retention", str(folder)], cwd=REPO, capture_output=True,
                          text=True, timeout=300)


def _only_what_a_run_needs(out: Path) -> tuple[Path, dict[str, str]]:
    """The sweep's one code archive (checked: the stages' packages and conf/, no tests/ or docs/, unpacked beside
    it), and the digest of every other file of the sweep."""
    (archive,) = out.glob("nemo_run/experiments/*/*/*/*.tar.gz")
    with tarfile.open(archive) as tar:
        top = {n.split("/", 1)[0] for n in tar.getnames()}
    assert {"experiments", "contracts", "launchers", "analysis", "conf"} <= top
    assert not top & {"tests", "docs"}, top
    assert (archive.parent / "code").is_dir()
    kept = [p for p in out.rglob("*") if p.is_file() and "code" not in p.relative_to(out).parts
            and not p.name.endswith(".tar.gz")]
    return archive, _digest(kept)


def test_a_job_ships_only_what_a_run_needs_and_the_copies_are_removed_by_command(tmp_path):
    out = tmp_path / "s"
    res = run_sweep(["cluster=local_slurm", "allow_dirty=true", "poll_s=1", f"output_dir={out}", "sweep=full",
                     "dispatcher=alltoall", "overlap=off", "delay_wgrad=off"])
    assert res.returncode == 0, tail(res)
    archive, before = _only_what_a_run_needs(out)
    with read_only_view(out, tmp_path / "ro") as view:  # a read-only folder: said so, nothing removed
        res = _retention(view)
        assert res.returncode == 2 and f"the sweep folder {view} is not writable" in res.stderr, res.stderr
        assert "Traceback" not in res.stderr and archive.exists(), res.stderr
    moved = tmp_path / "shared" / out.name  # the folder copied elsewhere (to shared storage, say): found there
    shutil.copytree(out, moved, symlinks=True)
    res = _retention(moved)
    assert res.returncode == 0 and "removed 2 code copies" in res.stdout, res.stdout + res.stderr
    assert not list(moved.glob("nemo_run/experiments/*/*/*/*.tar.gz")) and archive.exists()
    res = _retention(out)
    assert res.returncode == 0 and "removed 2 code copies" in res.stdout, res.stdout + res.stderr
    assert not archive.exists() and not (archive.parent / "code").exists()
    assert _digest(list(map(Path, before))) == before  # logs, outputs, manifest and report untouched
    res = _retention(tmp_path)
    assert res.returncode == 2 and "error:" in res.stderr, res.stderr


def test_a_packed_allocation_ships_one_copy_kept_while_a_run_of_it_is_to_go(tmp_path):
    out = tmp_path / "s"
    # two runs, one allocation; each holds 8 s before its work, so the second is still to go when the first ends
    p = spawn_sweep(["cluster=local_slurm", "allow_dirty=true", "poll_s=1", f"output_dir={out}", "sweep=full",
                     "dispatcher=alltoall", "overlap=on,off", "delay_wgrad=off", "pack=true", "payload.hold_s=8",
                     "payload.hold_at=start"])
    try:
        end, states = time.time() + 600, []
        while time.time() < end and p.poll() is None:
            try:
                m = json.loads((out / "manifest.json").read_text())
            except (OSError, ValueError):
                m = {"variants": []}
            states = [ManifestStatus(a["status"]).final for v in m["variants"] for a in v["attempts"]]
            if len(states) == 2 and sum(states) == 1:
                break
            time.sleep(0.2)
        assert len(states) == 2 and sum(states) == 1, f"no moment with one run to go (ended: {states})"
        mid = _retention(out)
        rc = p.wait(timeout=600)
    finally:
        if p.poll() is None:
            p.kill()
    _, err = p.communicate()
    assert mid.returncode == 0, mid.stdout + mid.stderr
    assert "removed 0 code copies" in mid.stdout and "kept those of 1 live job folder(s)" in mid.stdout, mid.stdout
    assert rc == 0, err[-3000:]  # the second run started in the copy retention kept
    m = json.loads((out / "manifest.json").read_text())
    attempts = [a for v in m["variants"] for a in v["attempts"]]
    assert len({a["job_id"] for a in attempts}) == 1 and {a["status"] for a in attempts} == {"succeeded"}, attempts
    archive, before = _only_what_a_run_needs(out)
    assert archive.parent.name.startswith("pack-"), archive
    res = _retention(out)
    assert res.returncode == 0 and "removed 2 code copies" in res.stdout, res.stdout + res.stderr
    assert not archive.exists() and not (archive.parent / "code").exists()
    assert _digest(list(map(Path, before))) == before
