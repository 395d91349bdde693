"""A repeats=auto sweep with the history on: its verdicts use the noise prior learnt from the series' earlier sweeps
(analysis.api.nightly_prior -> analysis.history.api.noise_prior -> analysis.measure.pooled), on the real H200 A/B
fixture recorded twice into a real SQLite history."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from analysis.history import record_summary
from analysis.report import main as report_main

FIX = Path(__file__).parent / "fixtures" / "h200_blocks" / "ab_bench"


def _copy(tmp_path: Path, name: str, sweep_id: str, created: str, history: str | None = None) -> Path:
    d = tmp_path / name
    shutil.copytree(FIX, d)
    m = json.loads((d / "manifest.json").read_text())
    m["sweep_id"], m["created"] = sweep_id, created
    if history:
        m["config"]["history"] = {**m["config"]["history"], "enabled": True, "url": history}
    (d / "manifest.json").write_text(json.dumps(m))
    assert report_main([str(d), "--quiet"]) == 0
    return d


def test_a_nightly_sweep_judges_equivalence_with_the_prior_of_its_earlier_nights(tmp_path):
    url = f"sqlite:///{tmp_path / 'history.db'}"
    for i, day in enumerate(("2026-12-01", "2026-12-02")):
        record_summary(url, _copy(tmp_path, f"night{i}", f"2026120{i + 1}-161645Z-0cc98{i}", f"{day}T16:16:45Z"))
    tonight = _copy(tmp_path, "tonight", "20261203-161645Z-0cc989", "2026-12-03T16:16:45Z", history=url)
    s = json.loads((tonight / "report" / "summary.json").read_text())
    prior = s["design"]["noise_prior"]
    assert prior["nights"] == 2 and prior["df"] == 4 and prior["var"] > 0  # two sweeps of 2 arms x 3 blocks
    (c,) = s["comparisons"]
    seq = c["sequential"]
    assert seq["design"] == "pooled_group_sequential_t" and seq["noise"]["prior"] == prior
    assert c["speedup_method"] == "pooled_blocks_t" and c["verdict"] == "equivalent"
    # the same sweep without the history: no prior, the same verdict needs the sweep's own blocks only
    alone = json.loads((tmp_path / "night0" / "report" / "summary.json").read_text())
    assert "noise_prior" not in alone["design"] and alone["comparisons"][0]["sequential"]["noise"]["prior"] is None
    assert s["gpu_time"] is None or "verdicts" in s["gpu_time"]


def test_with_a_prior_one_block_decides_and_the_plan_starts_with_one(tmp_path):
    url = f"sqlite:///{tmp_path / 'history.db'}"
    for i, day in enumerate(("2026-12-01", "2026-12-02")):
        record_summary(url, _copy(tmp_path, f"night{i}", f"2026120{i + 1}-161645Z-0cc98{i}", f"{day}T16:16:45Z"))
    d = tmp_path / "one"
    shutil.copytree(FIX, d)
    m = json.loads((d / "manifest.json").read_text())
    m["sweep_id"], m["created"] = "20261203-161645Z-0cc989", "2026-12-03T16:16:45Z"
    m["config"]["history"] = {**m["config"]["history"], "enabled": True, "url": url}
    for v in m["variants"]:  # keep block 0 only
        v["attempts"] = [a for a in v["attempts"] if a["repeat"] == 0]
    m["blocks"] = m["blocks"][:1]
    (d / "manifest.json").write_text(json.dumps(m))
    report_main([str(d), "--quiet"])
    (c,) = json.loads((d / "report" / "summary.json").read_text())["comparisons"]
    assert len(c["blocks"]) == 1 and c["sequential"]["design"] == "pooled_group_sequential_t"
    assert c["sequential"]["look"] in (None, 1) and c["verdict"] in ("equivalent", "no_significant_difference")
    assert c["sequential"]["wants_more"] == (c["sequential"]["state"] == "undecided")

    from types import SimpleNamespace

    from experiments.plan import _nightly_prior

    exp = SimpleNamespace(preset=SimpleNamespace(name="full"),
                          jobs={"a": SimpleNamespace(model=SimpleNamespace(name="moe_bench_h200"))},
                          container=SimpleNamespace(versions=lambda: {"name": "mbridge_0_6_h200"}))
    settings = SimpleNamespace(repeats="auto")
    prior = _nightly_prior(settings, {"history": {"enabled": True, "url": url}}, exp, SimpleNamespace(name="local"))
    assert prior is not None and prior.nights >= 2
    assert _nightly_prior(SimpleNamespace(repeats=2), {"history": {"enabled": True, "url": url}}, exp,
                          SimpleNamespace(name="local")) is None
