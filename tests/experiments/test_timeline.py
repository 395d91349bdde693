"""experiments.timeline: the conductor's own time, derived from phase marks (issue 16)."""

from __future__ import annotations

import json
import time

import pytest

from contracts.sweepdir import SweepDir
from experiments import timeline


def test_derive_counts_only_the_time_no_run_was_in_flight():
    runs = [{"launched": 12.0, "ended": 20.0}, {"launched": 21.5, "ended": 30.0}, {"launched": 25.0, "ended": 28.0}]
    d = timeline.derive(10.0, 31.0, runs)
    assert d["runs"] == 3
    assert d["pre_launch_s"] == 2.0 and d["post_job_s"] == 1.0
    assert d["between_runs_s"] == 1.5  # 20.0 -> 21.5; the third run overlaps the second
    assert d["overhead_s"] == 2.0 + 1.5 + 1.0
    assert d["overhead_per_run_s"] == round(4.5 / 3, 3)
    assert d["wall_s"] == 21.0


def test_derive_without_runs_and_with_a_run_still_in_flight():
    assert timeline.derive(0.0, 5.0, [])["overhead_s"] == 5.0
    assert timeline.derive(0.0, 5.0, [])["pre_launch_s"] is None
    d = timeline.derive(0.0, 5.0, [{"launched": 1.0}])  # never seen final: in flight until the end
    assert d["post_job_s"] == 0.0 and d["overhead_s"] == 1.0


def test_record_appends_sessions_and_replaces_an_unreadable_file(tmp_path):
    SweepDir(tmp_path).conductor_json.write_text("{not json")
    timeline.reset()  # other tests of this process drove sweeps
    timeline.launched("r1")
    timeline.ended("r1")
    first = timeline.record(tmp_path, "run")
    timeline.launched("r1")
    timeline.ended("r1")
    second = timeline.record(tmp_path, "collect")
    doc = json.loads(SweepDir(tmp_path).conductor_json.read_text())
    assert doc["schema_version"] == timeline.SCHEMA_VERSION
    assert [s["action"] for s in doc["sessions"]] == ["run", "collect"]
    assert first["runs"] == 1 and second["jobs"]["r1"]["launched"] <= second["jobs"]["r1"]["ended"]
    assert "before the first launch" in timeline.describe(first)


def test_process_start_is_before_now_and_this_process_is_young():
    start = timeline.process_start()
    assert start <= time.time()
    assert time.time() - start < 24 * 3600  # a test process started today


def test_record_starts_the_next_command_afresh(tmp_path):
    timeline.reset()
    timeline.mark("planned")
    timeline.launched("a")
    timeline.record(tmp_path, "run")
    later = timeline.record(tmp_path, "collect")
    assert later["runs"] == 0 and later["marks"] == {} and later["jobs"] == {}


@pytest.mark.slow  # a shell and two interpreters, 2 s of stand-in set-up
def test_the_timeline_of_scripts_sweep_sh_starts_after_its_set_up(tmp_path):
    """scripts/sweep.sh installs the environment, then ``exec``s Python, which keeps the shell's process start
    time: the set-up (a 2 s stand-in for ``pip install`` here, minutes on a fresh machine) must not count as the
    conductor's time. The script's own text runs, with its set-up line and interpreter replaced."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    probe = ("import json, os, subprocess, sys; from experiments import timeline; "
             "child = subprocess.run([sys.executable, '-c', 'import os; from experiments import timeline; "
             "print(timeline._START - timeline.process_start())'], capture_output=True, text=True, "
             "env={**os.environ, 'MOE_SWEEP_EXEC': '1:1'}).stdout; "
             "print(json.dumps({'start': timeline._START, 'process': timeline.process_start(), "
             "'left': os.environ.get('MOE_SWEEP_EXEC'), 'child': float(child)}))")
    text = (repo / "scripts" / "sweep.sh").read_text()
    assert "bash scripts/setup.sh megatron" in text and "exec .venv/bin/python -m experiments.sweep" in text
    script = (text.replace('cd "$(dirname "$0")/.."', f"cd {repo}")
              .replace("bash scripts/setup.sh megatron", "sleep 2")
              .replace('exec .venv/bin/python -m experiments.sweep "$@"', f'exec {sys.executable} -c "$PROBE"'))
    (tmp_path / "sweep.sh").write_text(script)
    out = subprocess.run(["bash", str(tmp_path / "sweep.sh")], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(repo), "PROBE": probe}, timeout=120).stdout
    got = json.loads(out.strip().splitlines()[-1])
    assert got["start"] - got["process"] >= 1.5, got  # the 2 s set-up is before the command's start
    assert got["left"] is None  # removed: no child inherits it
    assert abs(got["child"]) < 0.5, got  # another pid's mark is ignored
