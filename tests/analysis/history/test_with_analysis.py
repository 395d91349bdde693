"""The real analysis stage feeds the history: sweep folders with Megatron logs -> analysis.analyze_sweep ->
report/summary.json + run.json (step_times_ms) -> record_summary -> judge_night. Guards the contract between the
two stages (CONTRACTS §7 summary.json, §3 run.json)."""

from __future__ import annotations

import json
import random

import pytest

from analysis.analyze import analyze_sweep
from analysis.api import write_report
from analysis.history import judge_night, record_summary
from tests.analysis import synth

REQ = {"a2a.ovl0.dw0": {"dispatcher": "alltoall", "overlap": False, "delay_wgrad": False},
       "a2a.ovl1.dw0": {"dispatcher": "alltoall", "overlap": True, "delay_wgrad": False}}


def _night(root, n: int, rng: random.Random, slow: float = 1.0):
    base = {"a2a.ovl0.dw0": 500.0, "a2a.ovl1.dw0": 400.0 * slow}
    variants = [{"name": name, **req, "role": "baseline" if not req["overlap"] else "variant",
                 "attempts": [{"repeat": r, "effective": synth.effective_config(name, req),
                               "lines": synth.training_log(30, step=lambda i, b=base[name]: b * (1 + rng.gauss(0, 0.01)))}
                              for r in range(3)]}
                for name, req in REQ.items()]
    sweep = synth.make_sweep(root, variants, sweep_id=f"202611{20 + n}-010000Z-00000{n}")
    manifest = json.loads((sweep / "manifest.json").read_text())
    manifest.update(name="nightly", created=f"2026-11-{20 + n}T01:00:00Z")
    (sweep / "manifest.json").write_text(json.dumps(manifest))
    write_report(analyze_sweep(sweep), sweep / "report")
    return sweep


@pytest.mark.slow  # five nights analysed and recorded
def test_analysis_output_is_recorded_and_judged(tmp_path):
    url = f"sqlite:///{tmp_path / 'history.db'}"
    rng = random.Random(0)
    for n in range(5):
        sweep = _night(tmp_path / "results", n, rng, slow=1.15 if n == 4 else 1.0)
        res = record_summary(url, sweep)
        assert res.runs == 6 and res.speedups == 1 and res.steps >= 6 * 20, res  # >= 20 steady iterations a run
        assert res.warnings == (), res.warnings
    report = judge_night(url)
    assert str(report.series) == "nightly/tiny_moe/local"
    v = report.variant("a2a.ovl1.dw0")
    assert v.role == "variant" and v.baseline_variant == "a2a.ovl0.dw0"
    assert (v.step_time.verdict, v.speedup.verdict) == ("regression", "regression")
    assert v.step_time.change > 0.1 and v.step_time.p_iterations < 1e-6
    assert report.variant("a2a.ovl0.dw0").step_time.verdict == "within_noise"
    assert report.exit_code == 4
