"""Artifacts this project produced on the lent H200 (2026-11-29): `python -m experiments.sweep cluster=local
model=tiny_moe model.expert_model_parallel_size=1 ...` through NeMo-Run's LocalExecutor + torchrun, with real
Megatron-Bridge 0.6.2 / Megatron-Core 0.19.2 / TE 2.12.0 (scripts/gpu/h200_runs.sh train). The sweep folders
(logs, effective_config.json, manifest) are re-analysed here with the current analysis stage."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from analysis.report import main as report_main

FIX = Path(__file__).parent / "fixtures" / "h200_sweep"


def _analyse(tmp_path: Path, name: str) -> tuple[int, dict]:
    d = tmp_path / name
    shutil.copytree(FIX / name, d)
    rc = report_main([str(d), "--quiet"])
    return rc, {r["variant"]: r for r in json.loads((d / "report" / "summary.json").read_text())["runs"]}


def test_baseline_trained_on_the_h200_through_the_sweep(tmp_path):
    rc, runs = _analyse(tmp_path, "tiny_isolation")
    assert rc == 0
    b = runs["a2a.ovl0.dw0"]
    assert b["status"] == "ok" and b["iterations"] == {"total": 30, "steady": 27, "skipped": 0}
    assert 450 < b["step_time_ms"]["median"] < 650 and b["step_time_ms"]["ci_low"] <= b["step_time_ms"]["median"]
    assert 1.5 < b["tflops_per_gpu"]["median"] < 4 and b["tokens_per_s_per_gpu"]["median"] > 10_000
    assert 1.0 < b["peak_mem_gb"] < 3.0 and b["loss"]["first"] > b["loss"]["last"]
    # every overlap arm was pruned by the static preflight at EP=1
    assert runs["a2a.ovl1.dw0"]["status"] == "pruned"


def test_effective_config_records_the_real_stack():
    eff = json.loads((FIX / "tiny_isolation/variants/a2a.ovl0.dw0/attempt-1/effective_config.json").read_text())
    assert eff["versions"]["transformer_engine"] == "2.12.0" and eff["versions"]["megatron_bridge"] == "0.6.2"
    assert eff["versions"]["megatron_core"] == "0.19.2" and eff["versions"]["torch"].startswith("2.11.0")
    assert eff["hardware"]["gpu_name"] == "NVIDIA H200" and eff["hardware"]["compute_capability"] == "9.0"
    assert eff["effective"]["moe_token_dispatcher_type"] == "alltoall"
    assert eff["effective"]["overlap_moe_expert_parallel_comm"] is False
    assert eff["effective"]["delay_wgrad_compute"] is False and eff["checks"]["verdict"] == "pass"


def test_overlap_forced_through_at_ep1_fails_with_the_bridge_message(tmp_path):
    rc, runs = _analyse(tmp_path, "tiny_forced")
    assert rc == 3
    bad = runs["a2a.ovl1.dw0"]
    assert bad["status"] == "failed"
    assert any("overlap_moe_expert_parallel_comm is only supported when expert_model_parallel_size > 1" in e
               for e in bad["evidence"])
    assert runs["a2a.ovl0.dw0"]["status"] == "ok"
