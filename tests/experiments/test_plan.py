"""Planner: composition, expansion, groups/baselines, names, bad input (CASES C01-C05 planner parts, C12)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.config import ConfigError
from experiments.plan import make_plan
from experiments.sweep import main

REPO = Path(__file__).resolve().parents[2]


def plan(*ov):
    return make_plan(["action=plan", *ov])


def by_name(p):
    return {v.name: v for v in p.variants}


def test_overlap_delay_product_keeps_three_of_four_cells():
    p = plan("sweep=full", "dispatcher=alltoall", "overlap=on,off", "delay_wgrad=on,off")
    v = by_name(p)
    assert set(v) == {"a2a.ovl0.dw0", "a2a.ovl1.dw0", "a2a.ovl0.dw1", "a2a.ovl1.dw1"}
    kept = {n for n, x in v.items() if x.status != "pruned"}
    assert kept == {"a2a.ovl0.dw0", "a2a.ovl1.dw0", "a2a.ovl1.dw1"}
    assert "overlap_moe_expert_parallel_comm must be enabled when enabling delay_wgrad_compute" in \
        v["a2a.ovl0.dw1"].reasons[0]


def test_every_variant_sets_both_flags_explicitly():
    for v in plan("sweep=full").variants:
        assert v.settings["overlap_moe_expert_parallel_comm"] is v.overlap
        assert v.settings["delay_wgrad_compute"] is v.delay_wgrad
        assert isinstance(v.overlap, bool) and isinstance(v.delay_wgrad, bool)


def test_c12_comma_list_is_one_sweep_over_two_values():
    p = plan("sweep=full", "dispatcher=alltoall", "overlap=on,off", "delay_wgrad=off")
    assert [v.name for v in p.variants] == ["a2a.ovl1.dw0", "a2a.ovl0.dw0"] or \
        {v.name for v in p.variants} == {"a2a.ovl1.dw0", "a2a.ovl0.dw0"}


def test_extra_axis_defines_groups_and_baselines():
    p = plan("model=qwen3_30b_a3b", "cluster=h100_slurm", "cluster.nodes=4", "sweep=full", "dispatcher=alltoall",
             "overlap=on", "delay_wgrad=off", "model.expert_model_parallel_size=8,16")
    v = by_name(p)
    assert {"a2a.ovl1.dw0.ep8", "a2a.ovl1.dw0.ep16", "a2a.ovl0.dw0.ep8", "a2a.ovl0.dw0.ep16"} == set(v)
    for ep in (8, 16):
        base = v[f"a2a.ovl0.dw0.ep{ep}"]
        assert base.role == "baseline" and base.group == {"model.expert_model_parallel_size": ep}
        assert v[f"a2a.ovl1.dw0.ep{ep}"].settings["expert_model_parallel_size"] == ep


def test_duplicates_collapse():
    p = plan("sweep=full", "dispatcher=alltoall,alltoall", "overlap=on,on,off", "delay_wgrad=off")
    assert len(p.variants) == 2


def test_names_are_slurm_safe():
    p = plan("sweep=full", "dispatcher=alltoall", "overlap=off", "delay_wgrad=off",
             "+cluster.env_vars.TAG=a b,c d")
    for v in p.variants:
        assert len(v.name) <= 64 and all(c.isalnum() or c in "_.-" for c in v.name)


def test_isolation_stages_and_gate():
    p = plan("cluster=h100_slurm", "model=qwen3_30b_a3b", "container=nemo_26_04")
    v = by_name(p)
    assert v["a2a.ovl0.dw0"].stage == 1 and v["a2a.ovl1.dw0"].stage == 1
    assert v["deepep.ovl1.dw0"].stage == 2 and v["hybridep.ovl1.dw0"].stage == 2
    assert v["a2a.ovl1.dw1"].status == "gated" and v["a2a.ovl1.dw1"].gate == "overlap_passed"


def test_c05_gb200_prunes_deepep_from_target_gpu_not_login_node():
    p = plan("cluster=gb200_slurm", "model=qwen3_30b_a3b", "cluster.nodes=4")
    v = by_name(p)
    assert v["deepep.ovl1.dw0"].status == "pruned" and "hybridep" in v["deepep.ovl1.dw0"].reasons[0]
    assert v["hybridep.ovl1.dw0"].status != "pruned"


def test_c02_shared_expert_overlap_default_is_adjusted_and_recorded():
    p = plan("model=deepseek_v3", "cluster=h100_slurm", "cluster.nodes=128", "model.virtual_pipeline_model_parallel_size=2",
             "model.num_layers_in_first_pipeline_stage=null", "model.num_layers_in_last_pipeline_stage=null",
             "model.num_layers=64", "max_gpu_hours=100000", "sweep=full", "dispatcher=alltoall", "overlap=on",
             "delay_wgrad=off")
    v = by_name(p)["a2a.ovl1.dw0"]
    assert v.settings["moe_shared_expert_overlap"] is False
    assert v.adjustments[0]["field"] == "moe_shared_expert_overlap" and v.adjustments[0]["from"] is True
    assert by_name(p)["a2a.ovl0.dw0"].settings["moe_shared_expert_overlap"] is True


def test_c01_library_recipe_without_vpp_prunes_overlap_but_keeps_baseline():
    p = plan("model=deepseek_v3", "cluster=h100_slurm", "cluster.nodes=128", "max_gpu_hours=100000")
    v = by_name(p)
    assert v["a2a.ovl0.dw0"].status == "planned"
    assert any("virtual_pipeline_model_parallel_size" in r for r in v["a2a.ovl1.dw0"].reasons)


def test_c12_list_value_is_one_argument_and_a_list():
    p = plan("sweep=full", "dispatcher=alltoall", "overlap=off", "delay_wgrad=off",
             "model.recompute_granularity=selective", "model.recompute_modules=[moe,mlp]")
    assert p.variants[0].settings["recompute_modules"] == ["moe", "mlp"]


def test_c12_quoted_comma_is_one_string():
    p = plan("sweep=full", "dispatcher=alltoall", "overlap=off", "delay_wgrad=off",
             "+cluster.env_vars.NCCL_IB_HCA='mlx5_0,mlx5_1'")
    assert p.job(p.variants[0].name).env["NCCL_IB_HCA"] == "mlx5_0,mlx5_1"
    assert len(p.variants) == 1


@pytest.mark.parametrize("override,needle", [
    ("dispatcher=deeepep", "Did you mean 'deepep'"),
    ("model.expert_model_parallel_sise=2", "Did you mean 'expert_model_parallel_size'"),
    ("modle.num_layers=2", "'model'"),
    ("overlap=onn", "Valid options: off, on"),
    ("model.expert_model_parallel_size=abc", "model.expert_model_parallel_size='abc' has the wrong type"),
    ("model=qwen3", "Valid options:"),
    ("sweep=isolation,full", "one preset"),
    ("preflight=sometimes", "Valid values: static, container, off"),
])
def test_bad_input_names_value_and_valid_ones(override, needle):
    with pytest.raises(ConfigError, match=None) as e:
        plan(override)
    assert needle in str(e.value)


def test_misspelt_axis_value_outside_preset():
    with pytest.raises(ConfigError, match="not part of sweep=isolation"):
        plan("dispatcher=allgather")


def test_empty_sweep_is_an_error():
    with pytest.raises(ConfigError, match="empty"):
        plan("sweep=isolation", "dispatcher=deepep", "overlap=off")


def test_gpu_hour_guard():
    with pytest.raises(ConfigError, match="max_gpu_hours"):
        plan("cluster=h100_slurm", "model=qwen3_30b_a3b", "max_gpu_hours=1")


def test_invalid_baseline_stops_the_plan():
    with pytest.raises(ConfigError, match="baseline"):
        plan("model.num_moe_experts=7")


def test_repeats_are_interleaved_blocks():
    """Issue 15 replaced the fixed round-robin order: each block holds every arm once (repeat = block index)."""
    p = plan("repeats=3", "sweep=full", "dispatcher=alltoall", "overlap=on,off", "delay_wgrad=off")
    names = [n for n, _ in p.runs]
    assert sorted(names[:2]) == sorted(names[2:4]) == sorted(names[4:6]) and [r for _, r in p.runs] == [0, 0, 1, 1, 2, 2]


def test_cli_plan_writes_manifest_and_variant_files(tmp_path, capsys):
    out = tmp_path / "s"
    rc = main(["action=plan", f"output_dir={out}"])
    assert rc == 0
    m = json.loads((out / "manifest.json").read_text())
    assert m["schema_version"] == 1 and m["sweep_id"] and m["mode"] == "validate"
    kept = [v for v in m["variants"] if v["status"] != "pruned"]
    for v in kept:
        vj = json.loads((out / "variants" / v["name"] / "variant.json").read_text())
        assert vj["schema_version"] == 1 and vj["settings"]["overlap_moe_expert_parallel_comm"] is v["overlap"]
        assert (out / "variants" / v["name"] / "job.sh").read_text().strip()
    for v in m["variants"]:
        if v["status"] == "pruned":
            assert v["reasons"] and not (out / "variants" / v["name"]).exists()
    assert "a2a.ovl0.dw0" in capsys.readouterr().out


def test_cli_bad_input_exits_2_and_writes_nothing(tmp_path):
    out = tmp_path / "s"
    assert main(["action=plan", f"output_dir={out}", "dispatcher=deeepep"]) == 2
    assert not out.exists()


def test_cli_help_is_fast_and_lazy():
    code = ("import sys, time; t=time.time(); import experiments.sweep as s; s.main(['--help']); "
            "print('nemo_run' in sys.modules, 'hydra' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False False"


def test_profile_that_needs_an_image_but_has_none():
    with pytest.raises(ConfigError, match="cluster.container_image is null"):
        plan("cluster=h100_slurm", "model=qwen3_30b_a3b", "cluster.container_image=null")
