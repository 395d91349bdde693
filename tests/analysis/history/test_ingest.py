"""Reading summary.json (CONTRACTS §7) + run.json step times into the history's input records."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime

import pytest

from analysis.history import HistoryInputError, load_summary
from tests.analysis.history.helpers import GOLDEN_SWEEP, copy_golden


def _edit(path, fn):
    data = json.loads(path.read_text())
    fn(data)
    path.write_text(json.dumps(data))


def test_golden_sweep_folder():
    night = load_summary(GOLDEN_SWEEP)
    s = night.sweep
    assert s.sweep_id == "20261129-010000Z-a1b2c3"
    assert (s.series.preset, s.series.model, s.series.cluster) == ("nightly", "tiny_moe", "local_slurm")
    assert s.night == date(2026, 11, 29) and s.created == datetime(2026, 11, 29, 1, tzinfo=UTC)
    assert dict(s.container)["megatron_core"] == "0.19.2" and s.dirty is False
    # the latest attempt of each (variant, repeat) counts: deepep repeat 1 is attempt 3 (ok), not 2 (failed)
    keyed = {(r.variant, r.repeat): r for r in night.runs}
    assert len(night.runs) == 6
    assert keyed[("deepep.ovl1.dw0", 1)].attempt == 3 and keyed[("deepep.ovl1.dw0", 1)].status == "ok"
    # per-iteration step times come from run.json
    base = keyed[("a2a.ovl0.dw0", 0)]
    assert base.step_times_ms[0] == 1012.4 and len(base.step_times_ms) == 8 and base.role == "baseline"
    assert keyed[("a2a.ovl1.dw0", 0)].role == "variant"
    assert base.tokens_per_s_per_gpu and base.peak_mem_gb == 3.2 and base.loss_last == 9.87
    sp = {x.variant: x for x in night.speedups}
    assert set(sp) == {"a2a.ovl1.dw0", "deepep.ovl1.dw0"} and sp["a2a.ovl1.dw0"].value > 1.2
    assert night.warnings == ()


def test_summary_path_and_step_times_inline(tmp_path):
    sweep = copy_golden(tmp_path)
    summary = sweep / "report" / "summary.json"

    def inline(d):
        d["runs"][0]["step_times_ms"] = [5.0, 6.0, 7.0]
    _edit(summary, inline)
    night = load_summary(summary)  # sweep dir found as the parent of report/
    first = json.loads(summary.read_text())["runs"][0]
    rec = next(r for r in night.runs if (r.variant, r.repeat) == (first["variant"], first["repeat"]))
    assert rec.step_times_ms == (5.0, 6.0, 7.0)


def test_missing_run_json_warns_and_keeps_the_median(tmp_path):
    sweep = copy_golden(tmp_path)
    (sweep / "variants" / "a2a.ovl1.dw0" / "attempt-1" / "run.json").unlink()
    night = load_summary(sweep)
    rec = next(r for r in night.runs if (r.variant, r.repeat) == ("a2a.ovl1.dw0", 0))
    assert rec.step_times_ms == () and rec.step_time_ms is not None
    assert any("a2a.ovl1.dw0 repeat 0: no per-iteration step times" in w for w in night.warnings)


def test_no_successful_baseline_is_recorded_with_a_warning(tmp_path):
    sweep = copy_golden(tmp_path)

    def fail_baseline(d):
        for r in d["runs"]:
            if r["variant"] == "a2a.ovl0.dw0":
                r.update(status="failed", reason="OOM", step_time_ms=None)
        for c in d["comparisons"]:
            c.update(speedup=None, verdict="not_comparable")
    _edit(sweep / "report" / "summary.json", fail_baseline)
    night = load_summary(sweep)
    assert all(x.value is None and "no successful baseline run (a2a.ovl0.dw0)" in x.reason for x in night.speedups)
    assert any("baseline a2a.ovl0.dw0 has no successful run (failed (OOM), failed (OOM))" in w for w in night.warnings)


def test_manifest_fills_a_null_sweep_block(tmp_path):
    sweep = copy_golden(tmp_path)
    _edit(sweep / "report" / "summary.json", lambda d: d.update(sweep=None))
    assert load_summary(sweep).sweep.sweep_id == "20261129-010000Z-a1b2c3"


@pytest.mark.parametrize("mutate, match", [
    (lambda d: d.update(schema_version=2), r"schema_version 2 is not supported; valid: 1"),
    (lambda d: d.update(sweep=None), r"needs the sweep's sweep_id, name, created, model, cluster"),
    (lambda d: d["sweep"].update(created="yesterday"), r"created='yesterday' is not an ISO-8601 time"),
    (lambda d: d["runs"][0].update(status="great"), r"status 'great' is not one of ok, ok_with_warning"),
    (lambda d: d["runs"][0].update(repeat="one"), r"repeat='one' and attempt=1 must be integers"),
    (lambda d: d["runs"][0]["step_time_ms"].update(median="fast"), r"median='fast' is not a finite number"),
    (lambda d: d["runs"][0].update(step_times_ms=[1.0, -2.0]), r"step_times_ms must be a list of positive"),
    (lambda d: d["comparisons"][0].update(baseline=None), r"comparisons\[0\] needs 'variant' and 'baseline'"),
    (lambda d: d.update(runs={}), r"'runs' must be a list, got dict"),
])
def test_bad_input_names_the_value(tmp_path, mutate, match):
    sweep = copy_golden(tmp_path)
    (sweep / "manifest.json").unlink()
    _edit(sweep / "report" / "summary.json", mutate)
    with pytest.raises(HistoryInputError, match=match):
        load_summary(sweep)


def test_unreadable_files(tmp_path):
    with pytest.raises(HistoryInputError, match="summary.json not found at"):
        load_summary(tmp_path / "nope.json")
    bad = tmp_path / "summary.json"
    bad.write_text("{not json")
    with pytest.raises(HistoryInputError, match="summary.json at .* is unreadable"):
        load_summary(bad)


def test_role_and_group_from_the_run_entries_without_a_manifest(tmp_path):
    sweep = copy_golden(tmp_path)
    (sweep / "manifest.json").unlink()

    def tag(d):
        for r in d["runs"]:
            r["group"] = {"model.expert_model_parallel_size": 16}
            r["role"] = "baseline" if r["variant"] == "a2a.ovl0.dw0" else "variant"
        d["comparisons"] = []
    _edit(sweep / "report" / "summary.json", tag)
    night = load_summary(sweep)
    assert {r.group_key for r in night.runs} == {"model.expert_model_parallel_size=16"}
    assert {r.variant for r in night.runs if r.role == "baseline"} == {"a2a.ovl0.dw0"}
