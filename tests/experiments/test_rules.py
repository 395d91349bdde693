"""Static preflight rule table: CASES C01, C02, C04, C05 and the world-size arithmetic."""

from __future__ import annotations

import pytest

from experiments.rules import RULES, evaluate
from tests.experiments.helpers import ctx


def errors(c):
    return {f.rule: f.message for f in evaluate(c) if f.severity == "error"}


def warnings(c):
    return {f.rule: f.message for f in evaluate(c) if f.severity == "warning"}


def test_valid_overlap_variant_passes():
    assert errors(ctx()) == {}


# --- C01 (Megatron-Bridge PR 497, Megatron-Core checks)
def test_c01_pp_without_vpp_rejected_naming_vpp():
    e = errors(ctx(pipeline_model_parallel_size=4, expert_model_parallel_size=8, world=32))
    assert "overlap_vpp" in e and "virtual_pipeline_model_parallel_size" in e["overlap_vpp"]


def test_c01_pp_with_vpp_accepted():
    e = errors(ctx(pipeline_model_parallel_size=2, virtual_pipeline_model_parallel_size=2, world=16))
    assert "overlap_vpp" not in e


def test_c01_ep1_rejected_naming_expert_parallelism():
    e = errors(ctx(expert_model_parallel_size=1))
    assert "expert model parallelism" in e["overlap_ep"]


def test_c01_allgather_with_overlap_rejected():
    e = errors(ctx("allgather"))
    assert "alltoall/flex token dispatcher" in e["overlap_dispatcher"]


def test_c01_old_torch_hang_rule():
    e = errors(ctx(torch="2.5.1"))
    assert "A2A Overlap encounters hang issue with torch version < 2.6.0" in e["overlap_torch"]
    assert "overlap_torch" not in errors(ctx(torch="2.6.0"))
    assert "overlap_torch" not in errors(ctx(torch="2.5.1", overlap=False))


# --- C02 (Bridge PR 4971: rule copies drifted)
def test_c02_moe_in_recompute_modules_rejected():
    e = errors(ctx(recompute_granularity="selective", recompute_modules=["moe", "mlp"]))
    assert "disable moe in recompute_modules" in e["overlap_recompute_moe"]


def test_c02_mtp_two_layers_rejected():
    assert "MTP supports at most one layer" in errors(ctx(mtp_num_layers=2))["overlap_mtp"]
    assert "overlap_mtp" not in errors(ctx(mtp_num_layers=1))


def test_c02_shared_expert_overlap_rule_in_table():
    assert "overlap_shared_expert" in errors(ctx(moe_shared_expert_overlap=True))


@pytest.mark.parametrize("field,value,rule", [
    ("recompute_granularity", "full", "overlap_full_recompute"),
    ("recompute_method", "uniform", "overlap_recompute_method"),
    ("recompute_num_layers", 2, "overlap_recompute_layers"),
])
def test_overlap_recompute_rules(field, value, rule):
    assert rule in errors(ctx(**{field: value}))


def test_fp32_rejected_with_overlap():
    assert "bf16 or fp16" in errors(ctx(bf16=False, fp16=False))["overlap_precision"]
    assert "overlap_precision" not in errors(ctx(bf16=False, fp16=True))


def test_cuda_graph_scope_moe_rejected_with_te_graphs():
    e = errors(ctx(cuda_graph_impl="transformer_engine", cuda_graph_scope=["moe"]))
    assert "overlap_cuda_graph_scope" in e
    assert "overlap_cuda_graph_scope" not in errors(
        ctx(cuda_graph_impl="transformer_engine", cuda_graph_scope=["moe_router", "moe_preprocess"]))


def test_old_core_mtp_needs_pp_and_cuda_graph_impl():
    assert "overlap_mtp_pp_old_core" in errors(ctx(core="0.17.0", mtp_num_layers=1))
    assert "overlap_mtp_pp_old_core" not in errors(ctx(core="0.19.2", mtp_num_layers=1))
    assert "overlap_cuda_graph_impl_old_core" in errors(ctx(core="0.16.0", cuda_graph_impl="local"))


# --- C04 (TE PR 2142, Bridge PRs 532, 2578)
def test_c04_delay_wgrad_without_overlap_rejected():
    e = errors(ctx(overlap=False, delay_wgrad=True))
    assert e["delay_wgrad_needs_overlap"] == (
        "overlap_moe_expert_parallel_comm must be enabled when enabling delay_wgrad_compute")


def test_c04_delay_wgrad_overlap_grad_reduce_te_2_6_rejected():
    e = errors(ctx(delay_wgrad=True, overlap_grad_reduce=True, te="2.6.0"))
    assert "2.7.0" in e["delay_wgrad_te_2_7"]
    assert "delay_wgrad_te_2_7" not in errors(ctx(delay_wgrad=True, overlap_grad_reduce=True, te="2.7.0"))


def test_te_minimums_2_3_2_10_2_12():
    assert "delay_wgrad_te_2_3" in errors(ctx(delay_wgrad=True, te="2.2.0"))
    assert "delay_wgrad_te_2_10" in errors(ctx(delay_wgrad=True, te="2.9.0", cuda_graph_impl="transformer_engine",
                                               cuda_graph_scope=["moe_router"]))
    e = errors(ctx(delay_wgrad=True, te="2.11.0", cuda_graph_impl="transformer_engine", cuda_graph_scope=["attn"],
                   gradient_accumulation_fusion=True))
    assert "delay_wgrad_te_2_12" in e
    ok = errors(ctx(delay_wgrad=True, te="2.12.0", cuda_graph_impl="transformer_engine", cuda_graph_scope=["attn"],
                    gradient_accumulation_fusion=True))
    assert "delay_wgrad_te_2_12" not in ok


def test_c04_scope_as_single_string_does_not_crash():
    e = errors(ctx(cuda_graph_impl="transformer_engine", cuda_graph_scope="moe"))
    assert "overlap_cuda_graph_scope" in e


def test_unknown_te_is_a_warning_not_a_prune():
    c = ctx(delay_wgrad=True, te=None)
    assert "te_unknown" in warnings(c) and not errors(c)


# --- C05 (Bridge issue 5992): flex backend vs the target GPU
def test_c05_deepep_on_gb200_rejected_with_hybridep_hint():
    e = errors(ctx("deepep", gpu="gb200"))
    assert "hybridep" in e["deepep_gpu"]
    assert "deepep_gpu" not in errors(ctx("hybridep", gpu="gb200"))
    assert "deepep_gpu" not in errors(ctx("deepep", gpu="b200"))


def test_ncclep_needs_hopper_and_core_019():
    assert "ncclep_gpu" in errors(ctx("ncclep", gpu="a100"))
    assert "ncclep_core" in errors(ctx("ncclep", core="0.18.0"))
    assert errors(ctx("ncclep", gpu="h100", te="2.18.0", moe_expert_rank_capacity_factor=1.5,
                      moe_ncclep_static_shape=True)) == {}


def test_ncclep_needs_capacity_factor_and_te_with_nccl_ep():
    # the proven stack (core 0.19.2, TE 2.12) cannot build an ncclep arm: both the buffer budget and NCCL EP miss
    e = errors(ctx("ncclep", overlap=False, te="2.12.0"))
    assert {"ncclep_capacity_factor", "ncclep_te"} <= set(e)
    assert "moe_expert_rank_capacity_factor" in e["ncclep_capacity_factor"]
    assert set(errors(ctx("ncclep", overlap=False, te="2.18.0"))) == {"ncclep_capacity_factor"}
    assert errors(ctx("ncclep", overlap=False, te="2.18.0", moe_expert_rank_capacity_factor=1.5)) == {}
    # core 0.18 had no capacity-factor requirement (it had no ncclep backend at all: ncclep_core)
    assert "ncclep_capacity_factor" not in errors(ctx("ncclep", overlap=False, core="0.18.0"))


def test_ncclep_overlap_without_static_shape_warns_of_the_sync():
    c = ctx("ncclep", te="2.18.0", moe_expert_rank_capacity_factor=1.5)
    assert "ncclep_overlap_static_shape" in warnings(c) and not errors(c)
    assert "ncclep_overlap_static_shape" not in warnings(ctx("ncclep", te="2.18.0", moe_ncclep_static_shape=True,
                                                             moe_expert_rank_capacity_factor=1.5))


def test_precision_rules_key_on_gpu_te_and_core():
    from dataclasses import replace

    base = ctx(overlap=False)
    assert "precision_arch" in errors(replace(base, precision="nvfp4"))
    assert "Blackwell" in errors(replace(base, precision="mxfp8"))["precision_arch"]
    assert "precision_arch" not in errors(replace(base, precision="nvfp4", gpu_type="b200"))
    assert errors(replace(base, precision="fp8_cs")) == {}
    assert "precision_te" in errors(replace(base, precision="fp8_cs", te=(2, 1, 0)))
    assert "precision_te" in errors(replace(base, precision="nvfp4", gpu_type="b200", te=(2, 6, 0)))
    ovl = ctx(overlap=True, gpu="b200", env={"CUDA_DEVICE_MAX_CONNECTIONS": "32"})
    assert "nvfp4_overlap_core" in errors(replace(ovl, precision="nvfp4", core=(0, 19, 1)))
    assert "nvfp4_overlap_core" not in errors(replace(ovl, precision="nvfp4", core=(0, 19, 2)))
    assert "nvfp4_overlap_core" not in errors(replace(base, precision="nvfp4", gpu_type="b200", core=(0, 18, 0)))


def test_missing_deepep_package_prunes_flex():
    assert "flex_package" in errors(ctx("deepep", deep_ep=None))
    assert "flex_package" in errors(ctx("hybridep", deep_ep=None))


# --- world-size arithmetic
def test_world_size_rules():
    assert "world_mp" in errors(ctx(overlap=False, tensor_model_parallel_size=3, world=8, num_attention_heads=9,
                                    num_query_groups=3))
    assert "world_ep" in errors(ctx(overlap=False, expert_model_parallel_size=16, world=8, num_moe_experts=16))
    assert "experts_ep" in errors(ctx(overlap=False, num_moe_experts=12, expert_model_parallel_size=8))
    assert "gbs_dp" in errors(ctx(overlap=False, global_batch_size=12, world=8))
    assert "layers_pp" in errors(ctx(overlap=False, num_layers=5, pipeline_model_parallel_size=2, world=16))
    assert "layers_pp" not in errors(ctx(overlap=False, num_layers=94, pipeline_model_parallel_size=8,
                                         virtual_pipeline_model_parallel_size=4, world=16,
                                         account_for_embedding_in_pipeline_split=True,
                                         account_for_loss_in_pipeline_split=True))


def test_performance_warnings_do_not_prune():
    c = ctx(env={"CUDA_DEVICE_MAX_CONNECTIONS": "1"}, expert_model_parallel_size=2)
    w = warnings(c)
    assert "overlap_max_connections" in w and "overlap_small_ep" in w
    assert not errors(c)


def test_every_rule_names_its_source_and_scope():
    for r in RULES:
        assert r.source and r.scope in ("core", "bridge", "te", "world", "env")


def test_deepep_and_ncclep_need_tp_times_ep_above_one():
    assert "flex_tp_ep" in errors(ctx("deepep", overlap=False, expert_model_parallel_size=1))
    assert "flex_tp_ep" in errors(ctx("ncclep", overlap=False, expert_model_parallel_size=1))
    assert "flex_tp_ep" not in errors(ctx("hybridep", overlap=False, expert_model_parallel_size=1))
    assert "flex_tp_ep" not in errors(ctx("deepep", overlap=False, expert_model_parallel_size=2))


# --- size-dependent rules (issue 14)
def test_hybridep_tokens_per_rank_limit_across_nodes():
    # 16 GPUs on 2 nodes of 8, TP1 x EP16: the HybridEP group spans two NVLink domains
    big = ctx("hybridep", overlap=False, world=16, nodes=2, expert_model_parallel_size=16, num_moe_experts=16,
              seq_length=32768, micro_batch_size=1)
    assert "21844" in errors(big)["hybridep_tokens_per_rank"] and "32768" in errors(big)["hybridep_tokens_per_rank"]
    # TP2 halves the tokens per rank: 16384 fit (3 x 16384 + 1 < 65536)
    ok = ctx("hybridep", overlap=False, world=16, nodes=2, expert_model_parallel_size=8, num_moe_experts=16,
             tensor_model_parallel_size=2, seq_length=32768, micro_batch_size=1)
    assert "hybridep_tokens_per_rank" not in errors(ok)
    # one node: no IB queue pair, no limit
    one = ctx("hybridep", overlap=False, world=8, nodes=1, expert_model_parallel_size=8, seq_length=65536)
    assert "hybridep_tokens_per_rank" not in errors(one)
    # GB200 NVL72: 16 GPUs over 4 trays are one NVLink domain
    nvl = ctx("hybridep", overlap=False, gpu="gb200", world=16, nodes=4, expert_model_parallel_size=16,
              num_moe_experts=16, seq_length=32768)
    assert "hybridep_tokens_per_rank" not in errors(nvl)


def test_hybridep_limit_boundary_is_the_tx_depth():
    from experiments.rules import HYBRIDEP_MAX_TOKENS_PER_RANK
    assert 3 * HYBRIDEP_MAX_TOKENS_PER_RANK + 1 < 65536 <= 3 * (HYBRIDEP_MAX_TOKENS_PER_RANK + 1) + 1
    edge = dict(overlap=False, world=16, nodes=2, expert_model_parallel_size=16, num_moe_experts=16,
                micro_batch_size=1)
    assert "hybridep_tokens_per_rank" not in errors(ctx("hybridep", seq_length=HYBRIDEP_MAX_TOKENS_PER_RANK, **edge))
    assert "hybridep_tokens_per_rank" in errors(ctx("hybridep", seq_length=HYBRIDEP_MAX_TOKENS_PER_RANK + 1, **edge))


def test_hopper_tp_with_overlap_warns_and_blackwell_does_not():
    w = warnings(ctx(tensor_model_parallel_size=2, num_query_groups=4))
    assert "Hopper and before" in w["hopper_tp_overlap_connections"]
    assert not errors(ctx(tensor_model_parallel_size=2, num_query_groups=4))
    assert "hopper_tp_overlap_connections" not in warnings(ctx(gpu="b200", tensor_model_parallel_size=2,
                                                                num_query_groups=4))
    assert "hopper_tp_overlap_connections" not in warnings(ctx(overlap=False, tensor_model_parallel_size=2,
                                                                num_query_groups=4))
    assert "hopper_tp_overlap_connections" not in warnings(ctx())


# --- rules completed against Core 0.19.2 / Bridge 0.6.2 (each cites its file and line in experiments/rules.py)
def test_whole_layer_te_graph_with_overlap_is_pruned():
    assert "overlap_whole_layer_graph" in errors(ctx(cuda_graph_impl="transformer_engine", cuda_graph_scope=[]))
    assert "overlap_whole_layer_graph" not in errors(ctx(cuda_graph_impl="transformer_engine",
                                                         cuda_graph_scope=["moe_router", "moe_preprocess"]))
    assert "overlap_whole_layer_graph" not in errors(ctx(overlap=False, cuda_graph_impl="transformer_engine"))


def test_one_microbatch_per_step_warns_that_nothing_overlaps():
    assert "overlap_one_microbatch" in warnings(ctx(global_batch_size=8, world=8))  # DP 8, MBS 1: 1 micro-batch
    assert "overlap_one_microbatch" not in warnings(ctx(global_batch_size=64, world=8))


def test_ep_overlap_companion_knobs():
    assert "dispatch_bwd_wgrad_excludes_overlap" in errors(ctx(overlap_dispatch_backward_with_experts_wgrad=True))
    assert "dispatch_bwd_wgrad_excludes_overlap" not in errors(ctx(
        overlap=False, overlap_dispatch_backward_with_experts_wgrad=True))
    assert "early_attn_release_needs_overlap" in errors(ctx(overlap=False, ep_overlap_early_attn_memory_release=True))
    assert "early_attn_release_needs_overlap" not in errors(ctx(ep_overlap_early_attn_memory_release=True))


def test_shared_expert_overlap_needs_alltoall_or_flex():
    c = ctx("allgather", overlap=False, moe_shared_expert_intermediate_size=512, moe_shared_expert_overlap=True)
    assert "shared_expert_overlap_dispatcher" in errors(c)
    assert "shared_expert_overlap_dispatcher" not in errors(ctx(
        overlap=False, moe_shared_expert_intermediate_size=512, moe_shared_expert_overlap=True))


def test_hybridep_padded_dispatch_warning_keys_on_the_bridge_version():
    from dataclasses import replace

    c = ctx("hybridep", overlap=False)
    assert "hybridep_padded_dispatch" in warnings(replace(c, bridge=(0, 6, 1)))
    assert "hybridep_padded_dispatch" not in warnings(replace(c, bridge=(0, 6, 2)))
    assert "hybridep_padded_dispatch" not in warnings(replace(c, bridge=(0, 6, 0), settings={
        **c.settings, "cuda_graph_impl": "transformer_engine"}))


def test_delay_wgrad_te_2_12_keys_on_graphed_modules_whatever_the_implementation():
    attn_local = ctx(delay_wgrad=True, te="2.11.0", cuda_graph_impl="local", cuda_graph_scope=["attn"],
                     gradient_accumulation_fusion=True)
    assert "delay_wgrad_te_2_12" in errors(attn_local)
    # attention bias only matters when attn is graphed
    router = ctx(delay_wgrad=True, te="2.12.0", cuda_graph_impl="transformer_engine", cuda_graph_scope=["moe_router"],
                 moe_shared_expert_intermediate_size=512, gradient_accumulation_fusion=True, add_qkv_bias=True)
    assert "delay_wgrad_te_2_12" not in errors(router)


def test_known_failures_warn():
    assert "deepep_b200_internode" in warnings(ctx("deepep", gpu="b200", expert_model_parallel_size=32,
                                                   num_moe_experts=64, world=64, nodes=8))
    assert "deepep_b200_internode" not in warnings(ctx("deepep", gpu="b200", world=64, nodes=8))  # EP 8: one node
    assert "ncclep_nvl72_low_latency" in warnings(ctx("ncclep", gpu="gb200"))
    assert "overlap_deadlock_at_scale" in warnings(ctx(world=256, global_batch_size=1024))
    assert "overlap_deadlock_at_scale" not in warnings(ctx(world=8))


def test_capacity_padding_paged_stash_and_sm_knobs():
    assert "deepep_pad_to_capacity" in errors(ctx("deepep", overlap=False, moe_pad_expert_input_to_capacity=True,
                                                  moe_expert_capacity_factor=1.0))
    assert "pad_needs_capacity_factor" in errors(ctx(overlap=False, moe_pad_expert_input_to_capacity=True))
    assert not errors(ctx(overlap=False, moe_pad_expert_input_to_capacity=True, moe_expert_capacity_factor=1.0))
    assert "paged_stash_needs_rank_capacity" in errors(ctx(overlap=False, moe_paged_stash=True))
    c = ctx("deepep", overlap=False, moe_deepep_num_sms=20, moe_hybridep_num_sms=24)
    assert "deprecated_sm_knobs" in errors(c) and "deprecated_sm_knob_used" in warnings(c)
    assert "deprecated_sm_knobs" not in errors(ctx("deepep", overlap=False, moe_deepep_num_sms=20))
