"""``action=plan sweep=full`` on every container profile and GPU type: each ncclep arm is kept only where the
profiled libraries can build it (Megatron-Core >= 0.19 with moe_expert_rank_capacity_factor, TE >= 2.17 with NCCL
EP), and no plan fails. The library's own refusal of a forced arm is tests/experiments/payload/test_payload_validate.py.
"""

from __future__ import annotations

import pytest

from experiments.compose import group_options
from experiments.plan import make_plan
from experiments.rules import NCCLEP_TE_MIN, parse_version

GPUS = ("h100", "h200", "b200", "gb200", "a100")


def _plan(tmp_path, container: str, gpu: str, *extra: str):
    return make_plan(["action=plan", "sweep=full", "model=qwen3_30b_a3b", "cluster=h100_slurm", "cluster.nodes=2",
                      f"cluster.gpu_type={gpu}", f"container={container}", "max_gpu_hours=1e9",
                      f"output_dir={tmp_path / (container + gpu + str(len(extra)))}", *extra])


@pytest.mark.slow
@pytest.mark.parametrize("container", group_options("container"))
def test_full_sweep_plans_on_every_profile_and_gpu(tmp_path, container):
    for gpu in GPUS:
        plan = _plan(tmp_path, container, gpu)
        prof = plan.expansion.container
        te, core = parse_version(prof.transformer_engine), parse_version(prof.megatron_core)
        ncclep = [v for v in plan.variants if v.dispatcher == "ncclep"]
        assert ncclep and all(v.status == "pruned" for v in ncclep), (container, gpu)  # no capacity factor given
        # with the buffer budget set, ncclep arms stay only where TE has NCCL EP, the core has the backend and the
        # GPU is Hopper or Blackwell
        plan = _plan(tmp_path, container, gpu, "model.moe_expert_rank_capacity_factor=1.5")
        kept = [v for v in plan.variants if v.dispatcher == "ncclep" and v.status != "pruned"]
        can = ((te is None or te >= NCCLEP_TE_MIN) and (core is None or core >= (0, 19, 0))
               and gpu in ("h100", "h200", "b200", "gb200"))
        assert bool(kept) == can, (container, gpu, [v.reasons for v in plan.variants if v.dispatcher == "ncclep"])


def test_proven_stack_plans_no_ncclep_arm_that_cannot_build(tmp_path):
    plan = _plan(tmp_path, "mbridge_0_6_h200", "h200", "model.moe_expert_rank_capacity_factor=1.5")
    for v in (v for v in plan.variants if v.dispatcher == "ncclep"):
        assert v.status == "pruned" and any("[ncclep_te]" in r for r in v.reasons)


def test_hybridep_variables_only_on_hybridep_arms(tmp_path):
    from experiments.payload.spec import drop_foreign_env
    from experiments.plan import variant_payload

    plan = make_plan(["action=plan", "model=qwen3_30b_a3b", "cluster=h100_slurm", "cluster.nodes=2",
                      "+cluster.env_vars.NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN=8", "+cluster.env_vars.USE_MNNVL=0",
                      f"output_dir={tmp_path / 's'}"])
    envs = {v.dispatcher: variant_payload(plan, v)["env"] for v in plan.variants if v.status != "pruned"}
    assert envs["hybridep"]["NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN"] == "8" and envs["hybridep"]["USE_MNNVL"] == "0"
    for d in ("alltoall", "deepep"):
        assert "USE_MNNVL" not in envs[d] and "NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN" not in envs[d]
        assert envs[d]["CUDA_DEVICE_MAX_CONNECTIONS"] == "32"
    environ = {"USE_MNNVL": "0", "CUDA_DEVICE_MAX_CONNECTIONS": "32"}
    assert drop_foreign_env("deepep", environ) == ["USE_MNNVL"] and environ == {"CUDA_DEVICE_MAX_CONNECTIONS": "32"}
    environ = {"USE_MNNVL": "0"}
    assert drop_foreign_env("hybridep", environ) == [] and environ == {"USE_MNNVL": "0"}


def test_shared_expert_overlap_model_default_per_dispatcher(tmp_path):
    """deepseek_v3 sets moe_shared_expert_overlap: its allgather arm cannot build, and the flex arms get it turned
    off by Bridge's apply_flex_dispatcher_backend, recorded as an adjustment (not a silent second knob)."""
    plan = make_plan(["action=plan", "sweep=full", "model=deepseek_v3", "cluster=h100_slurm", "cluster.nodes=128",
                      "overlap=off", "delay_wgrad=off", "max_gpu_hours=1e9", f"output_dir={tmp_path / 's'}"])
    by = {v.dispatcher: v for v in plan.variants}
    assert by["allgather"].status == "pruned"
    assert any("[shared_expert_overlap_dispatcher]" in r for r in by["allgather"].reasons)
    flex = by["deepep"]
    assert flex.settings["moe_shared_expert_overlap"] is False
    assert [a["field"] for a in flex.adjustments] == ["moe_shared_expert_overlap"]
    assert by["alltoall"].settings["moe_shared_expert_overlap"] is True  # the baseline keeps the model's value
