"""Figures against the bound (analysis/measure/bound.py): MFU, all-to-all bandwidth, overlap ceiling, published baseline."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from analysis.analyze import analyze_sweep
from analysis.api import write_report
from analysis.measure.bound import (
    BoundError,
    BoundReport,
    a2a_bytes_per_step,
    ceiling_from_sweep,
    link_bound,
    read_matmul_ceiling,
)
from analysis.measure.results import Summary
from tests.analysis.synth import effective_config, make_sweep, training_log

FIXTURES = Path(__file__).parent / "fixtures"
# the GB200 BF16 DeepSeek-V3 row of conf/reference/megatron_bridge_perf.yaml (NeMo 25.11 performance summary)
ROW = {"model": "deepseek_v3", "published_model": "DeepSeekV3", "gpu": "gb200", "gpus": 256, "precision": "bf16",
       "container": "nemo:25.11", "tflops_per_gpu": 782,
       "source": "https://docs.nvidia.com/nemo/megatron-bridge/latest/performance-summary.html"}
A2A0 = {"dispatcher": "alltoall", "overlap": False, "delay_wgrad": False}
A2A1 = {"dispatcher": "alltoall", "overlap": True, "delay_wgrad": False}


def test_link_bound_within_and_across_nvlink_domains():
    assert link_bound(ep=8, tp=1, gpus_per_node=8, nvlink_domain=None, nvlink_gbps=450, nic_gbps=50)[:2] == (
        "nvlink", 450.0)
    # EP16 on 8-GPU nodes: 7 of 15 peers on NVLink, 8 of 15 over the NIC; the NIC share bounds the time
    link, gbps, note = link_bound(ep=16, tp=1, gpus_per_node=8, nvlink_domain=None, nvlink_gbps=450, nic_gbps=50)
    assert link == "nvlink+nic" and gbps == pytest.approx(50 * 15 / 8) and "53%" in note
    # GB200 NVL72: EP64 on 4-GPU trays stays inside the 72-GPU NVLink domain
    assert link_bound(ep=64, tp=1, gpus_per_node=4, nvlink_domain=72, nvlink_gbps=900, nic_gbps=50)[:2] == (
        "nvlink", 900.0)
    assert link_bound(ep=16, tp=1, gpus_per_node=8, nvlink_domain=None, nvlink_gbps=None, nic_gbps=None)[1] is None
    assert link_bound(ep=1, tp=1, gpus_per_node=8, nvlink_domain=None, nvlink_gbps=450, nic_gbps=50)[1] is None


def test_a2a_bytes_arithmetic():
    # 64 sequences x 2048 tokens x 8 layers x top-2 x 4096 x 2 B x 4 passes x 1/2 leaving the GPU / 2 GPUs
    assert a2a_bytes_per_step(gbs=64, seq=2048, layers=8, topk=2, hidden=4096, ep=2, world=2) == (
        64 * 2048 * 8 * 2 * 4096 * 2 * 4 / 2 / 2)
    with pytest.raises(BoundError, match="positive"):
        a2a_bytes_per_step(gbs=0, seq=2048, layers=8, topk=2, hidden=4096, ep=2, world=2)


def test_matmul_ceiling_from_number_or_file(tmp_path):
    assert read_matmul_ceiling(779.0) == (779.0, "cluster.matmul_ceiling")
    f = tmp_path / "matmul.json"
    f.write_text(json.dumps({"ceiling_tflops": 779.4, "dtype": "bf16", "ceiling_size": 8192, "gpu_name": "H200"}))
    tf, src = read_matmul_ceiling(str(f))
    assert tf == 779.4 and "8192^3" in src
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(BoundError, match="ceiling_tflops"):
        read_matmul_ceiling(str(tmp_path / "bad.json"))


def _profiled(sw: Path, variant: str, exposed: float, step: float, a2a: float) -> None:
    prof = sw / "variants" / variant / "attempt-1" / "profile"
    prof.mkdir(parents=True)
    parts = {"expert_gemm": step - exposed - 5, "dense_gemm": 3, "attention": 1, "other_compute": 1,
             "comm_exposed": exposed, "idle": 0}
    (prof / "step_breakdown.json").write_text(json.dumps({
        "schema": "step_breakdown/1", "steps": 2, "step_ms": step, "parts_ms": parts,
        "comm_ms": {"alltoall": a2a, "nccl_other": 0, "total": a2a, "hidden": a2a - exposed},
        "hidden_comm_fraction": (a2a - exposed) / a2a}))


def _bound_sweep(tmp_path: Path, bound: dict, *, base_ms=500.0, arm_ms=450.0) -> Path:
    sw = make_sweep(tmp_path, [
        {"name": "a2a.ovl0.dw0", "dispatcher": "alltoall", "overlap": False, "delay_wgrad": False, "role": "baseline",
         "attempts": [{"lines": training_log(30, step=lambda i: base_ms + (i % 3), tflops=400.0),
                       "effective": effective_config("a2a.ovl0.dw0", A2A0)}]},
        {"name": "a2a.ovl1.dw0", "dispatcher": "alltoall", "overlap": True, "delay_wgrad": False,
         "attempts": [{"lines": training_log(30, step=lambda i: arm_ms + (i % 3), tflops=440.0),
                       "effective": effective_config("a2a.ovl1.dw0", A2A1)}]}])
    m = json.loads((sw / "manifest.json").read_text())
    m["bound"] = bound
    (sw / "manifest.json").write_text(json.dumps(m))
    return sw


def test_report_states_mfu_bandwidth_and_the_overlap_ceiling(tmp_path):
    bound = {"gpu_type": "h200", "peak_tflops": 989.0, "peak_source": "https://www.nvidia.com/en-us/data-center/h200/",
             "matmul_ceiling_tflops": 779.0, "matmul_source": "matmul.json", "link": "nvlink", "link_gbps": 450.0,
             "link_note": "EP=2 within one NVLink domain of 8 GPUs", "a2a_bytes_per_step": 4.0e9}
    sw = _bound_sweep(tmp_path, bound)
    _profiled(sw, "a2a.ovl0.dw0", exposed=100.0, step=500.0, a2a=160.0)
    summary = analyze_sweep(sw)
    b = summary.bound
    base = next(r for r in b.runs if r.run.startswith("a2a.ovl0"))
    assert base.mfu_peak == pytest.approx(400 / 989) and base.mfu_ceiling == pytest.approx(400 / 779)
    assert base.a2a_gbps == pytest.approx(4.0e9 / 0.160 / 1e9) and base.a2a_of_link == pytest.approx(25 / 450)
    ob = b.for_variant("a2a.ovl1.dw0")
    assert ob.max_saving == pytest.approx(0.2)
    assert ob.measured_saving == pytest.approx(1 - 451 / 501, abs=0.01)  # median 451 vs 501 ms: ~10% saved
    assert ob.fraction == pytest.approx(ob.measured_saving / 0.2)
    assert "overlap can gain at most 20.0% of the step; measured +10." in ob.text()
    paths = write_report(summary, tmp_path / "out")
    md = (tmp_path / "out" / "report.md").read_text()
    assert "## Against the bound" in md and "40.4%" in md and "51.3%" in md  # MFU vs peak, vs matmul ceiling
    assert "overlap can gain at most 20.0%" in md
    assert md.index("![speedup.png]") < md.index("## Runs")  # the headline plot sits under the speedup heading
    assert "speedup.png" in {p.name for p in paths}
    back = Summary.from_json(json.loads((tmp_path / "out" / "summary.json").read_text()))
    assert back.bound.for_variant("a2a.ovl1.dw0").max_saving == pytest.approx(0.2)


def test_real_format_baseline_below_the_published_row_warns(tmp_path):
    """A real-format Bridge log whose steady TFLOP/s/GPU (700) is 10% below the published 782: a WARNING."""
    sw = make_sweep(tmp_path, [{"name": "a2a.ovl0.dw0", "dispatcher": "alltoall", "overlap": False,
                                "delay_wgrad": False, "role": "baseline",
                                "attempts": [{"lines": None, "effective": None}]}])
    shutil.copy(FIXTURES / "bound" / "baseline_below_published.log", sw / "variants/a2a.ovl0.dw0/attempt-1/logs/")
    m = json.loads((sw / "manifest.json").read_text())
    m["bound"] = {"gpu_type": "gb200", "peak_tflops": 2500.0, "reference": ROW, "reference_gate": True}
    (sw / "manifest.json").write_text(json.dumps(m))
    summary = analyze_sweep(sw)
    check = summary.bound.reference[0]
    assert check.measured_tflops == pytest.approx(700, abs=1) and check.below
    assert check.ratio == pytest.approx(700 / 782, abs=0.002)
    write_report(summary, tmp_path / "out")
    md = (tmp_path / "out" / "report.md").read_text()
    assert "WARNING: 10.5% below the published figure" in md and ROW["source"] in md
    assert md.index("Published baseline") < md.index("## Runs")
    assert f"{ROW['tflops_per_gpu']} TFLOP/s/GPU" in md and "matched row" in md  # the report names the row


def test_report_names_the_row_matched_on_precision_and_the_core_recipe(tmp_path):
    """An fp8_cs sweep: the report names the published FP8 row it matched and Megatron-Core's recipe line."""
    from experiments.reference import core_recipe_notes, match_row

    row, _ = match_row("qwen3_30b_a3b", "h100", 16, "fp8")
    sw = make_sweep(tmp_path, [{"name": "a2a.ovl0.dw0", "dispatcher": "alltoall", "overlap": False,
                                "delay_wgrad": False, "role": "baseline",
                                "attempts": [{"lines": None, "effective": None}]}])
    m = json.loads((sw / "manifest.json").read_text())
    m["bound"] = {"gpu_type": "h100", "peak_tflops": 989.0, "reference": row, "precision": "fp8_cs",
                  "core_recipes": core_recipe_notes("qwen3_30b_a3b", "h100", "fp8")}
    (sw / "manifest.json").write_text(json.dumps(m))
    write_report(analyze_sweep(sw), tmp_path / "out")
    md = (tmp_path / "out" / "report.md").read_text()
    assert "matched row (fp8_cs): Qwen3_30B_a3B on 16 x h100, fp8, nemo:26.06: 203 TFLOP/s/GPU" in md
    assert "Megatron-Core recipe on 32 x h100 fp8" in md


def test_ceiling_from_an_earlier_sweep(tmp_path):
    sw = _bound_sweep(tmp_path, {"gpu_type": "h200"})
    _profiled(sw, "a2a.ovl0.dw0", exposed=5.0, step=500.0, a2a=40.0)
    write_report(analyze_sweep(sw), sw / "report")
    c = ceiling_from_sweep(sw)
    assert c["max_saving"] == pytest.approx(0.01) and c["from"] == str(sw)
    with pytest.raises(BoundError, match="profile=true"):
        ceiling_from_sweep(_unprofiled(tmp_path))


def _unprofiled(tmp_path: Path) -> Path:
    sw = _bound_sweep(tmp_path / "plain", {"gpu_type": "h200"})
    write_report(analyze_sweep(sw), sw / "report")
    return sw


def test_bound_report_round_trips_empty():
    assert BoundReport.from_json(None) is None
