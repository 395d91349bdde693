"""experiments.timeline: the conductor's own time, derived from phase marks (issue 16)."""

from __future__ import annotations

import json
import time

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
