"""A report is written as a set: on a real full disk (a tiny tmpfs when this runs as root, and a file-size limit
set on a child process for any user) the old report stays whole, no temporary folder is left, and the CLI exits 5
naming the reason; the conductor's history files in report/ survive a rewrite."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.api import analyze_sweep, write_report
from analysis.reportset import ReportWriteError
from tests.analysis.synth import effective_config, make_sweep, training_log
from tests.launchers.conftest import IN_CI

REPO = Path(__file__).resolve().parents[2]
A2A0 = {"dispatcher": "alltoall", "overlap": False, "delay_wgrad": False}


def _sweep(root: Path) -> Path:
    return make_sweep(root, [{"name": "a2a.ovl0.dw0", "dispatcher": "alltoall", "overlap": False,
                              "delay_wgrad": False, "role": "baseline",
                              "attempts": [{"lines": training_log(30), "effective": effective_config(
                                  "a2a.ovl0.dw0", A2A0)}]}])


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _old_report(sweep: Path) -> dict[str, bytes]:
    summary = analyze_sweep(sweep)
    write_report(summary, sweep / "report", images=lambda s: {})
    (sweep / "report" / "history.json").write_text('{"night": "kept"}')
    return _snapshot(sweep / "report")


@pytest.fixture
def tiny_fs(tmp_path: Path):
    """A 1 MiB tmpfs (root only: mount(2) needs CAP_SYS_ADMIN)."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)],
                                           capture_output=True).returncode:
        why = "mounting a tmpfs needs root; the file-size-limit test covers this machine"
        if IN_CI:  # CI runs as root: a failed mount there is a real failure
            pytest.fail(why)
        pytest.skip(why)
    yield mnt
    subprocess.run(["umount", str(mnt)], check=False)


def test_a_full_disk_leaves_the_old_report_whole(tiny_fs: Path) -> None:
    sweep = _sweep(tiny_fs)
    before = _old_report(sweep)
    summary = analyze_sweep(sweep)
    big = {"plot.png": b"\0" * (2 << 20)}  # 2 MiB of plots on a 1 MiB file system
    with pytest.raises(ReportWriteError, match="was not replaced.*No space left on device.*previous report"):
        write_report(summary, sweep / "report", images=lambda s: big)
    assert _snapshot(sweep / "report") == before
    assert sorted(p.name for p in sweep.iterdir() if p.name.startswith(".report")) == []
    # with room again the rewrite replaces the set and keeps the conductor's history file
    write_report(summary, sweep / "report", images=lambda s: {"plot.png": b"png"})
    after = _snapshot(sweep / "report")
    assert after["history.json"] == before["history.json"] and after["plot.png"] == b"png"


def _report_cli(sweep: Path, limit: int) -> subprocess.CompletedProcess:
    """``python -m analysis.report SWEEP --quiet`` in a process whose files cannot grow past ``limit`` bytes."""
    code = ("import resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
            f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit})); "  # larger files: EFBIG from write(2)
            "from analysis.report import main; sys.exit(main(sys.argv[1:]))")
    return subprocess.run([sys.executable, "-c", code, str(sweep), "--quiet"], cwd=REPO, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)


def test_a_full_disk_while_run_json_is_written_exits_5_without_a_traceback(tmp_path: Path) -> None:
    sweep = _sweep(tmp_path)
    before = _old_report(sweep)
    res = _report_cli(sweep, 200)
    assert res.returncode == 5, res.stderr[-2000:]
    assert "writing into the sweep failed" in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert _snapshot(sweep / "report") == before


def test_the_cli_exits_5_with_the_reason_and_keeps_the_old_report(tmp_path: Path) -> None:
    sweep = _sweep(tmp_path)
    before = _old_report(sweep)
    res = _report_cli(sweep, 8000)  # each run.json fits; the report's files do not
    assert res.returncode == 5, res.stderr[-2000:]
    assert "was not replaced" in res.stderr and "Traceback" not in res.stderr
    assert _snapshot(sweep / "report") == before
    assert not [p for p in sweep.iterdir() if p.name.startswith(".report")]
    shutil.rmtree(sweep / "report")
