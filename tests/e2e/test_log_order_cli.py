"""In the README's cron form (``... >> results/nightly.log 2>&1``: stdout is a file, so Python buffers it in blocks,
and nothing sets PYTHONUNBUFFERED) the last line of every ``experiments.sweep`` command is its ``exit code N: ...``
line, and the analysis and history CLIs keep the order of what they print. The real CLIs, through ``sh -c``, with
an environment built from scratch (the test runner's own may set PYTHONUNBUFFERED, which would hide the bug)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.history import record_summary
from analysis.history.synthetic import SyntheticSeries, simulate_series
from launchers.templates import CACHE_ENV
from tests.e2e.cli import REPO

LOG = REPO / "tests" / "analysis" / "fixtures" / "h200_mbridge_tiny_moe_baseline.log"


def _env() -> dict[str, str]:
    """``env -i``-like: what a cron job has, plus this checkout on the path and the test's template cache."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/root"),
           "LANG": "C.UTF-8", "PYTHONPATH": str(REPO)}
    if CACHE_ENV in os.environ:
        env[CACHE_ENV] = os.environ[CACHE_ENV]
    assert "PYTHONUNBUFFERED" not in env
    return env


def _logged(log: Path, *args: str) -> tuple[int, list[str]]:
    """Run ``python ARGS >> log 2>&1`` as cron does; returns the exit status and the lines this command added."""
    start = len(log.read_text().splitlines()) if log.exists() else 0
    cmd = " ".join(["exec", sys.executable, *(f"'{a}'" for a in args), ">>", f"'{log}'", "2>&1"])
    rc = subprocess.run(["sh", "-c", cmd], cwd=REPO, env=_env(), timeout=600, check=False).returncode
    return rc, log.read_text().splitlines()[start:]


def _ends_with_exit_line(rc: int, lines: list[str]) -> None:
    assert lines and lines[-1].startswith(f"exit code {rc}:"), "\n".join(lines[-30:])
    assert sum(line.startswith("exit code ") for line in lines) == 1, "\n".join(lines[-30:])


@pytest.mark.slow  # several CLI processes
def test_plan_and_refusal_end_with_the_exit_line_in_a_shared_log(tmp_path):
    log = tmp_path / "nightly.log"
    rc, lines = _logged(log, "-m", "experiments.sweep", "action=plan", f"output_dir={tmp_path / 'p'}")
    assert rc == 0
    _ends_with_exit_line(rc, lines)
    assert any("a2a" in line for line in lines[:-1])  # the plan table, printed on stdout before the exit line
    rc, lines = _logged(log, "-m", "experiments.sweep", "action=plan", "dispatcher=bogus",
                        f"output_dir={tmp_path / 'q'}")
    assert rc == 2 and any("bogus" in line for line in lines), lines
    _ends_with_exit_line(rc, lines)
    rc, lines = _logged(log, "-m", "experiments.sweep", "action=status", f"output_dir={tmp_path / 'p'}",
                        f"sweep_id={json.loads((tmp_path / 'p' / 'manifest.json').read_text())['sweep_id']}")
    assert rc == 0
    _ends_with_exit_line(rc, lines)


@pytest.mark.slow
def test_the_analysis_and_history_clis_keep_their_order_in_a_shared_log(tmp_path):
    log = tmp_path / "analysis.log"
    rc, lines = _logged(log, "-m", "analysis.report", str(LOG), "--out", str(tmp_path / "r"))
    assert rc in (0, 3, 4) and lines[-1] == f"exit code {rc}", lines[-10:]  # its own exit line, last
    url = f"sqlite:///{tmp_path / 'h.db'}"
    for night in simulate_series(SyntheticSeries(), 4, seed=9):
        record_summary(url, night)
    # the night's table on stdout, then the --json write failing on stderr (/proc takes no new file)
    rc, lines = _logged(log, "-m", "analysis.history", "judge", "--url", url, "--json", "/proc/judge.json")
    assert rc == 5 and lines[0].startswith("night ") and lines[-1].startswith("error: --json /proc/judge.json was "
                                                                             "not written"), lines


@pytest.mark.slurm
@pytest.mark.megatron
@pytest.mark.slow
@pytest.mark.usefixtures("slurm_cluster")
def test_a_detached_slurm_sweep_ends_with_the_exit_line_in_a_shared_log(tmp_path):
    """The nightly's own shape: queued on Slurm, detached, a collect job chained; stdout lines ("detached: ...",
    "collect chained: ...") come before the exit line. Cancelled afterwards."""
    log, out = tmp_path / "nightly.log", tmp_path / "s"
    rc, lines = _logged(log, "-m", "experiments.sweep", "sweep=nightly", "cluster=local_slurm", "repeats=1",
                        "dispatcher=alltoall", "overlap=off,on", "delay_wgrad=off", "allow_dirty=true",
                        f"output_dir={out}")
    try:
        assert rc == 0, "\n".join(lines[-30:])
        assert any(line.startswith("detached: ") for line in lines), "\n".join(lines[-30:])
        _ends_with_exit_line(rc, lines)
    finally:
        if (out / "manifest.json").exists():
            sweep_id = json.loads((out / "manifest.json").read_text())["sweep_id"]
            rc, lines = _logged(log, "-m", "experiments.sweep", "cluster=local_slurm", "allow_dirty=true",
                                "action=cancel", f"sweep_id={sweep_id}", f"output_dir={out}")
    assert rc == 0
    _ends_with_exit_line(rc, lines)
