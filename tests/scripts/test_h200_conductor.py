"""The conductor's own time on the lent H200 (issue 16, 2026-12-01 16:34 UTC): three one-run sweeps of
``model=moe_bench_h200 model.num_layers=4`` (20 iterations) and the 6-run A/B ``ab_bench``, as their
``conductor.json`` records (``tests/scripts/fixtures/h200_conductor/``). The derived figures must follow from the
recorded marks (experiments.timeline.derive), and each record must say what its console line said."""

from __future__ import annotations

import json
import re
from pathlib import Path

from experiments import timeline

FIX = Path(__file__).parent / "fixtures" / "h200_conductor"


def _session(name: str) -> dict:
    doc = json.loads((FIX / f"{name}.conductor.json").read_text())
    assert doc["schema_version"] == timeline.SCHEMA_VERSION
    return doc["sessions"][-1]


def test_recorded_figures_follow_from_the_marks():
    for name in ("s1", "s2", "s3", "ab_bench"):
        s = _session(name)
        jobs = [{k: s["start"] + v for k, v in j.items()} for j in s["jobs"].values()]
        d = timeline.derive(s["start"], s["end"], jobs)
        for key in ("runs", "pre_launch_s", "post_job_s", "between_runs_s", "overhead_s"):
            assert abs(d[key] - s[key]) < 0.01, (name, key, d[key], s[key])
        marks = s["marks"]
        assert marks["composed"] <= marks["planned"] <= marks["written"] <= marks["launching"] <= s["pre_launch_s"]


def test_the_console_line_is_the_record():
    for k in (1, 2, 3):
        s = _session(f"s{k}")
        line = next(x for x in (FIX / f"s{k}.console.log").read_text().splitlines() if x.startswith("conductor:"))
        pre, post = (float(v) for v in re.findall(r"([\d.]+) s (?:before|after)", line))
        assert (pre, post) == (round(s["pre_launch_s"], 1), round(s["post_job_s"], 1))
        assert s["runs"] == 1 and "exit code 0" in (FIX / f"s{k}.console.log").read_text()
