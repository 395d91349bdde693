"""The precision axis (conf/precision/): its settings in every variant, the rules keyed on it, the published row it
matches, variant.json's mixed-precision recipe and the history series it records under."""

from __future__ import annotations

import pytest

from analysis.history.ingest import _series_model
from contracts.errors import ConfigError
from experiments.plan import make_plan, manifest_doc, variant_payload

H100_16 = ["action=plan", "model=qwen3_30b_a3b", "cluster=h100_slurm", "cluster.nodes=2"]


def test_fp8_cs_plans_and_matches_the_published_fp8_row(tmp_path):
    plan = make_plan([*H100_16, "precision=fp8_cs", f"output_dir={tmp_path / 's'}"])
    row = plan.bound["reference"]
    assert row is not None and (row["model"], row["gpu"], row["gpus"], row["precision"]) == (
        "qwen3_30b_a3b", "h100", 16, "fp8")
    assert plan.bound["precision"] == "fp8_cs"
    kept = [v for v in plan.variants if v.status != "pruned"]
    assert kept and all(v.settings["fp8"] == "hybrid" and v.settings["fp8_recipe"] == "tensorwise" for v in kept)
    doc = variant_payload(plan, kept[0])
    assert doc["precision"] == {"name": "fp8_cs", "mixed_precision": "bf16_with_fp8_current_scaling_mixed"}
    assert manifest_doc(plan)["precision"] == "fp8_cs"


def test_bf16_does_not_match_an_fp8_row(tmp_path):
    plan = make_plan([*H100_16, f"output_dir={tmp_path / 's'}"])
    assert plan.bound["reference"] is None and plan.bound["precision"] == "bf16"
    assert all("fp8" not in v.settings for v in plan.variants)


def test_nvfp4_on_h100_is_pruned_with_the_reason(tmp_path):
    with pytest.raises(ConfigError, match=r"precision_arch.*nvfp4 needs a Blackwell GPU"):
        make_plan([*H100_16, "precision=nvfp4", f"output_dir={tmp_path / 's'}"])
    # as an axis, the nvfp4 group is pruned whole with that reason and the bf16 group is kept
    plan = make_plan([*H100_16, "precision=bf16,nvfp4", f"output_dir={tmp_path / 't'}"])
    nv = [v for v in plan.variants if v.axes.get("precision") == "nvfp4"]
    bf = [v for v in plan.variants if v.axes.get("precision") == "bf16"]
    assert nv and all(v.status == "pruned" and any("Blackwell" in r for r in v.reasons) for v in nv)
    assert any(v.status != "pruned" for v in bf)


def test_unknown_precision_names_the_valid_ones(tmp_path):
    with pytest.raises(ConfigError, match="Valid options: bf16, fp8_cs, fp8_delayed, mxfp8, nvfp4"):
        make_plan([*H100_16, "precision=fp4", f"output_dir={tmp_path / 's'}"])


def test_history_series_keeps_precisions_apart():
    assert _series_model("qwen3_30b_a3b", "fp8_cs") == "qwen3_30b_a3b@fp8_cs"
    assert _series_model("qwen3_30b_a3b", "bf16") == "qwen3_30b_a3b"
    assert _series_model("qwen3_30b_a3b", None) == "qwen3_30b_a3b"  # a night recorded before the axis
