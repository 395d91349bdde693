"""The plan's bound (experiments/reference.py): the published row, the reference gate, the overlap-ceiling pruning,
the Williams block orders; and the conductor's reference gate (experiments/conductor/gates.py)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from analysis.analyze import analyze_sweep
from contracts.errors import ConfigError
from contracts.manifest import Manifest, ManifestWriter
from contracts.sweepdir import SweepDir
from experiments.blocks import block_order, position_balance, williams_rows
from experiments.conductor.gates import open_gates
from experiments.plan import make_plan, manifest_doc
from experiments.reference import gpu_peaks, match_row, published_rows
from tests.analysis.synth import make_sweep

FIXTURES = Path(__file__).resolve().parents[1] / "analysis" / "fixtures"
GB200 = ["action=plan", "model=qwen3_235b_a22b", "cluster=gb200_slurm", "cluster.nodes=64", "max_gpu_hours=1e9",
         "model.virtual_pipeline_model_parallel_size=4"]


def test_tables_are_sourced():
    assert {k: v["dense_bf16_tflops"] for k, v in gpu_peaks().items()} == {
        "h100": 989, "h200": 989, "b200": 2250, "gb200": 2500}
    for v in gpu_peaks().values():
        assert abs(v["sparse_bf16_tflops"] - 2 * v["dense_bf16_tflops"]) <= 1 and v["source"].startswith("https://www.nvidia")
    for r in published_rows():
        assert r["source"].startswith(("https://docs.nvidia.com/nemo/megatron-bridge/",
                                       "https://github.com/NVIDIA-NeMo/Megatron-Bridge/blob/v0.6.0/docs/"))
        assert r["tflops_per_gpu"] > 0
        assert {"model", "gpu", "gpus", "precision", "container", "tp", "pp", "ep"} <= set(r)


def test_match_row_by_model_gpu_scale_precision():
    row, why = match_row("qwen3_235b_a22b", "gb200", 256, "bf16")
    assert row["tflops_per_gpu"] == 728 and why is None
    row, why = match_row("qwen3_235b_a22b", "gb200", 128, "bf16")
    assert row is None and "256 GPUs" in why
    assert match_row("tiny_moe", "h200", 1, "bf16") == (None, None)


def test_plan_records_the_bound_and_gates_the_arms_on_the_reference(tmp_path):
    plan = make_plan([*GB200, "reference_gate=true", f"output_dir={tmp_path / 's'}"])
    b = plan.bound
    assert b["peak_tflops"] == 2500 and b["reference"]["tflops_per_gpu"] == 728 and b["reference_gate"]
    assert b["link"] == "nvlink" and b["link_gbps"] == 900  # EP inside the NVL72 domain
    assert "layout differs" in b["reference_note"]
    gated = {v.name: v.gate for v in plan.variants if v.role != "baseline" and v.status == "gated"}
    assert gated and set(gated.values()) <= {"reference_passed", "overlap_passed"}
    assert len(plan.blocks) == 1 and all(n.startswith("a2a.ovl0.dw0") for n in plan.blocks[0]["order"])
    assert manifest_doc(plan)["bound"]["reference"]["source"].startswith("https://docs.nvidia.com")


def test_plan_without_a_published_row_has_no_gate(tmp_path):
    plan = make_plan(["action=plan", "model=qwen3_30b_a3b", "cluster=h100_slurm", "reference_gate=true",
                      f"output_dir={tmp_path / 's'}"])
    assert plan.bound["reference"] is None and not plan.bound["reference_gate"]
    assert plan.bound["peak_tflops"] == 989 and plan.bound["link"] == "nvlink+nic"
    assert not any(v.gate == "reference_passed" for v in plan.variants)


def _earlier(tmp_path: Path, exposed: float) -> Path:
    sw = tmp_path / "earlier"
    (sw / "report").mkdir(parents=True)
    (sw / "report" / "summary.json").write_text(json.dumps({"runs": [
        {"name": "a2a.ovl0.dw0.r0.a1", "role": "baseline",
         "step_breakdown_ms": {"comm_exposed": exposed, "step": 1000.0}}]}))
    return sw


def test_prune_below_ceiling_from_an_earlier_sweep(tmp_path):
    base = ["action=plan", "model=qwen3_30b_a3b", "cluster=h100_slurm", "prune_below_ceiling=true",
            f"output_dir={tmp_path / 's'}"]
    plan = make_plan([*base, f"ceiling_from={_earlier(tmp_path, 10.0)}"])
    pruned = [v for v in plan.variants if v.overlap and v.role != "baseline"]
    assert pruned and all(v.status == "pruned" for v in pruned)
    assert any("overlap ceiling 1.0% < practical_threshold 2.0%" in r for r in pruned[0].reasons)
    kept = make_plan([*base, f"output_dir={tmp_path / 't'}", f"ceiling_from={_earlier(tmp_path / 'x', 300.0)}"])
    assert any(v.overlap and v.status == "planned" for v in kept.variants)


def test_prune_below_ceiling_needs_a_ceiling(tmp_path):
    with pytest.raises(ConfigError, match="ceiling_from"):
        make_plan(["action=plan", "sweep=full", "model=qwen3_30b_a3b", "cluster=h100_slurm",
                   "prune_below_ceiling=true", f"output_dir={tmp_path / 's'}"])


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6])
def test_williams_rows_balance_position_and_carry_over(n):
    rows = williams_rows(n)
    assert len(rows) == (n if n % 2 == 0 else 2 * n)
    assert set(Counter((r[i], i) for r in rows for i in range(n)).values()) == {len(rows) // n}
    assert len(set(Counter((r[i], r[i + 1]) for r in rows for i in range(n - 1)).values())) == 1


def test_block_orders_balance_positions_over_a_cycle():
    arms = ["a2a.ovl0.dw0", "a2a.ovl1.dw0", "deepep.ovl1.dw0", "a2a.ovl0.dw0.ctl"]
    blocks = [{"index": i, "order": block_order(arms, 1234, i)} for i in range(8)]
    assert all(sorted(b["order"]) == sorted(arms) for b in blocks)
    assert all(counts == [2, 2, 2, 2] for counts in position_balance(blocks).values())
    assert block_order(arms, 1234, 3) == block_order(arms, 1234, 3)  # recorded, never re-drawn: deterministic


def test_reference_gate_closes_on_a_baseline_below_the_published_row(tmp_path):
    """The conductor's gate reads the analysed reference block: 700 vs 782 TFLOP/s/GPU keeps the arms skipped."""
    sw = make_sweep(tmp_path, [
        {"name": "a2a.ovl0.dw0", "dispatcher": "alltoall", "overlap": False, "delay_wgrad": False,
         "role": "baseline", "attempts": [{"lines": None, "effective": None}]},
        {"name": "a2a.ovl1.dw0", "dispatcher": "alltoall", "overlap": True, "delay_wgrad": False,
         "status": "gated", "reasons": ["gate reference_passed: waits"], "attempts": []}])
    shutil.copy(FIXTURES / "bound" / "baseline_below_published.log", sw / "variants/a2a.ovl0.dw0/attempt-1/logs/")
    m = json.loads((sw / "manifest.json").read_text())
    m["variants"][1]["gate"] = "reference_passed"
    row = next(r for r in published_rows() if r["model"] == "deepseek_v3" and r["gpu"] == "gb200"
               and r["precision"] == "bf16")
    m["bound"] = {"gpu_type": "gb200", "reference": row, "reference_gate": True}
    (sw / "manifest.json").write_text(json.dumps(m))
    sd = SweepDir(sw)
    writer = ManifestWriter(sd, Manifest.load(sd))
    assert open_gates(writer, analyze_sweep(sw, write_run_json=False)) is False
    arm = next(v for v in Manifest.load(sd).variants if v.name == "a2a.ovl1.dw0")
    assert str(arm.status) == "skipped"
    assert any(r.startswith("gate reference_passed closed: published baseline") and "10.5% below" in r
               for r in arm.variant.reasons)
    # the same baseline at the published figure opens it
    m["bound"]["reference"] = {**row, "tflops_per_gpu": 710}
    (sw / "manifest.json").write_text(json.dumps({**m, "variants": m["variants"]}))
    writer = ManifestWriter(sd, Manifest.load(sd))
    assert open_gates(writer, analyze_sweep(sw, write_run_json=False)) is True
