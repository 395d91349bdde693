"""analysis/measure/profile_breakdown.py on synthetic Chrome traces in torch.profiler's layout (exact expected numbers)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from analysis.measure.profile_breakdown import (
    PARTS,
    TraceError,
    breakdown,
    categorize,
    load_or_summarize,
    load_trace,
)

CPU = {"pid": 1, "tid": 7}


def _kernel(name, ts, dur, corr, stream=7):
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
            "args": {"correlation": corr}}


def _launch(ts, corr):
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", **CPU, "ts": ts, "dur": 1,
            "args": {"correlation": corr}}


def trace():
    """One step: expert GEMM 0-100 (launched inside moe_experts), dense GEMM 100-150, attention 150-200,
    elementwise 200-220, idle 220-250, all-to-all 230-300 of which 270-300 overlaps a dense GEMM on stream 8."""
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#18", **CPU, "ts": 0, "dur": 400},
          {"ph": "X", "cat": "user_annotation", "name": "moe_experts", **CPU, "ts": 0, "dur": 10}]
    ks = [("sm90_xmma_gemm_bf16", 0, 100), ("nvjet_tst_128x256", 100, 50),
          ("cudnn_generated_fort_native_sdpa_sm90", 150, 50), ("vectorized_elementwise_kernel", 200, 20),
          ("ncclDevKernel_SendRecv", 230, 70)]
    for i, (name, ts, dur) in enumerate(ks):
        ev.append(_launch(5 if i == 0 else 20 + i, i))
        ev.append(_kernel(name, ts, dur, i, stream=9 if "nccl" in name else 7))
    ev.append(_launch(30, 99))
    ev.append(_kernel("ampere_bf16_s16816gemm", 270, 30, 99, stream=8))
    return ev


def test_breakdown_partitions_the_step():
    b = breakdown(trace())
    p = b["parts_ms"]
    assert b["steps"] == 1 and b["profiled_steps"] == [18]
    assert p["expert_gemm"] == pytest.approx(0.100)
    assert p["dense_gemm"] == pytest.approx(0.080)   # 100-150 and 270-300
    assert p["attention"] == pytest.approx(0.050)
    assert p["other_compute"] == pytest.approx(0.020)
    assert p["comm_exposed"] == pytest.approx(0.040)  # 230-270
    assert p["idle"] == pytest.approx(0.010)          # 220-230
    assert sum(p[k] for k in PARTS) == pytest.approx(b["step_ms"]) == pytest.approx(0.300)
    assert b["comm_ms"]["alltoall"] == pytest.approx(0.070) and b["comm_ms"]["hidden"] == pytest.approx(0.030)
    assert b["hidden_comm_fraction"] == pytest.approx(30 / 70, abs=1e-4)


def test_no_comm_means_no_hidden_fraction():
    ev = [e for e in trace() if "nccl" not in e.get("name", "")]
    assert breakdown(ev)["hidden_comm_fraction"] is None


@pytest.mark.parametrize("name,expert,want", [
    ("ncclDevKernel_AllReduce_Sum_f32", False, "nccl_other"), ("ncclDevKernel_SendRecv", True, "alltoall"),
    ("nvjet_tst_64x8_64x16", True, "expert_gemm"), ("nvjet_tst_64x8_64x16", False, "dense_gemm"),
    ("flash_fwd_kernel", False, "attention"), ("triton_poi_fused_add", True, "other_compute"),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26", True, "attention")])
def test_categorize(name, expert, want):
    assert categorize(name, expert) == want


def test_load_or_summarize_caches_and_reports_damage(tmp_path):
    d = tmp_path / "attempt-1" / "profile" / "torch_profile"
    d.mkdir(parents=True)
    with gzip.open(d / "rank-0.json.gz", "wt") as f:
        json.dump({"traceEvents": trace()}, f)
    doc = load_or_summarize(tmp_path / "attempt-1")
    assert doc["parts_ms"]["expert_gemm"] == pytest.approx(0.1)
    assert (tmp_path / "attempt-1" / "profile" / "step_breakdown.json").is_file()
    assert load_or_summarize(tmp_path / "no-such") is None
    bad = tmp_path / "b" / "profile" / "torch_profile"
    bad.mkdir(parents=True)
    (bad / "rank-0.json.gz").write_bytes(b"not gzip")
    assert "cannot read" in load_or_summarize(tmp_path / "b")["error"]


def test_trace_without_kernels_is_an_error(tmp_path):
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 1}]}))
    with pytest.raises(TraceError, match="no GPU kernel"):
        breakdown(load_trace(p), source=str(p))


# --- the real H200 profile (moe_bench_h200 with 8 experts, micro-batch 8, 2026-12-01): committed trace summary
FIXTURE = Path(__file__).parent / "fixtures" / "h200_profile"


def test_h200_trace_summary_fixture():
    b = json.loads((FIXTURE / "step_breakdown.json").read_text())
    assert b["schema"] == "step_breakdown/1" and b["steps"] == 2 and b["kernels"] > 10_000
    parts = b["parts_ms"]
    assert sum(parts[k] for k in PARTS) == pytest.approx(b["step_ms"], abs=0.01)
    # what the profile showed: expert GEMMs lead, then dense GEMMs; no communication at EP=1 on one GPU
    assert parts["expert_gemm"] > parts["dense_gemm"] > parts["attention"] > 0
    assert b["comm_ms"]["total"] == 0 and b["hidden_comm_fraction"] is None
    assert b["gpu_busy_fraction"] > 0.9


def test_h200_summary_and_report_fixture():
    from analysis.measure.results import RunResult
    from analysis.render import breakdown_blocks

    s = json.loads((FIXTURE / "summary.json").read_text())
    run = s["runs"][0]
    b = json.loads((FIXTURE / "step_breakdown.json").read_text())
    assert run["step_breakdown_ms"] == {**b["parts_ms"], "step": b["step_ms"]}
    assert run["tflops_per_gpu"]["median"] > 459  # >= 60% of the 765 TFLOP/s matmul ceiling
    r = RunResult.from_json(run)
    blocks = breakdown_blocks((r,))
    assert blocks and blocks[-1].rows[0][0] == "a2a.ovl0.dw0" and blocks[-1].rows[0][2] == "910.4"
    assert "Where the step time goes" in (FIXTURE / "report.md").read_text()
