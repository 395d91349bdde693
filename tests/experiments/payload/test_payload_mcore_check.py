"""check_transformer_config against the real Megatron-Core on the CPU: a matrix of valid and invalid variants.

The expected messages are Megatron-Core's own texts (megatron-core 0.19.2 transformer_config.py and
num_microbatches_calculator.py); a drift in the library makes these tests fail.
"""

from __future__ import annotations

import time

import pytest

from experiments.payload.mcore_check import (
    CheckResult,
    check_transformer_config,
    scope_list,
    transformer_config_kwargs,
)

from .helpers import TINY_SETTINGS

pytestmark = pytest.mark.megatron


def settings(**over):
    s = dict(TINY_SETTINGS)
    s.update(over)
    return s


OVL = {"overlap_moe_expert_parallel_comm": True}

VALID = {
    "baseline": {},
    "overlap": OVL,
    "overlap+delay_wgrad": {**OVL, "delay_wgrad_compute": True},
    "flex deepep overlap": {**OVL, "moe_token_dispatcher_type": "flex", "moe_flex_dispatcher_backend": "deepep"},
    "flex hybridep": {"moe_token_dispatcher_type": "flex", "moe_flex_dispatcher_backend": "hybridep"},
    "flex ncclep overlap": {**OVL, "moe_token_dispatcher_type": "flex", "moe_flex_dispatcher_backend": "ncclep"},
    "allgather without overlap": {"moe_token_dispatcher_type": "allgather"},
    "pp4 with vpp": {**OVL, "pipeline_model_parallel_size": 2, "virtual_pipeline_model_parallel_size": 2},
    "selective core_attn": {**OVL, "recompute_granularity": "selective", "recompute_modules": ["core_attn"]},
    "mtp 1": {**OVL, "mtp_num_layers": 1},
    "fp16": {**OVL, "bf16": False, "fp16": True},
    "te graphs on router": {**OVL, "cuda_graph_impl": "transformer_engine",
                            "cuda_graph_scope": ["moe_router", "moe_preprocess"]},
    "scope as one string": {**OVL, "cuda_graph_impl": "transformer_engine", "cuda_graph_scope": "moe_router"},
    "ep1 without overlap": {"expert_model_parallel_size": 1},
}

INVALID = {  # case -> (overrides, the library's message)
    "C04 delay_wgrad without overlap": (
        {"delay_wgrad_compute": True},
        "overlap_moe_expert_parallel_comm must be enabled when enabling delay_wgrad_compute"),
    "C01 EP=1 with overlap": (
        {**OVL, "expert_model_parallel_size": 1},
        "overlap_moe_expert_parallel_comm is only supported with expert model parallelism"),
    "C01 allgather with overlap": (
        {**OVL, "moe_token_dispatcher_type": "allgather"},
        "overlap_moe_expert_parallel_comm is supported with alltoall/flex token dispatcher"),
    "C01 PP>1 without VPP": (
        {**OVL, "pipeline_model_parallel_size": 4, "num_layers": 8},
        "If enabling EP A2A overlap, virtual_pipeline_model_parallel_size must be specified when "
        "pipeline_model_parallel_size > 1"),
    "C02 moe in recompute_modules": (
        {**OVL, "recompute_granularity": "selective", "recompute_modules": ["moe", "mlp"]},
        "disable moe in recompute_modules when enabling overlap_moe_expert_parallel_comm"),
    "C02 MTP 2": (
        {**OVL, "mtp_num_layers": 2},
        "MTP supports at most one layer when enabling overlap_moe_expert_parallel_comm."),
    "C02 shared expert overlap": (
        {**OVL, "moe_shared_expert_intermediate_size": 1024, "moe_shared_expert_overlap": True},
        "disable moe_shared_expert_overlap when enabling overlap_moe_expert_parallel_comm"),
    "full recompute": (
        {**OVL, "recompute_granularity": "full", "recompute_method": "uniform", "recompute_num_layers": 1},
        "disable full recomputation when enabling overlap_moe_expert_parallel_comm"),
    "recompute method": (
        {**OVL, "recompute_granularity": "selective", "recompute_method": "uniform"},
        "disable recomputation method when enabling overlap_moe_expert_parallel_comm"),
    "fp32": (
        {**OVL, "bf16": False, "fp16": False},
        "overlap_moe_expert_parallel_comm is only supported with bf16 or fp16 model"),
}


@pytest.mark.parametrize("case", sorted(VALID))
def test_valid_variants_pass(case):
    r = check_transformer_config(settings(**VALID[case]), world_size=2, versions={"transformer_engine": "2.12.0"})
    assert r.verdict == "pass", r.messages
    assert r.messages == ()
    assert r.effective["overlap_moe_expert_parallel_comm"] is settings(**VALID[case])[
        "overlap_moe_expert_parallel_comm"]


@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_variants_fail_with_the_library_message(case):
    over, message = INVALID[case]
    r = check_transformer_config(settings(**over), versions={"transformer_engine": "2.12.0"})
    assert r.verdict == "fail"
    assert r.messages == (message,)
    assert r.effective == {}


def test_torch_of_the_target_container_keys_the_hang_rule():
    """C01: container torch 2.5.1 with overlap on is rejected; the installed torch (>= 2.6) passes."""
    old = check_transformer_config(settings(**OVL), versions={"torch": "2.5.1"})
    assert old.messages == ("A2A Overlap encounters hang issue with torch version < 2.6.0",)
    assert old.assumed_versions == {"torch": "2.5.1"}
    assert check_transformer_config(settings(**OVL)).ok


def test_te_version_keys_the_partial_cuda_graph_rule():
    s = settings(**OVL, delay_wgrad_compute=True, cuda_graph_impl="transformer_engine", cuda_graph_scope="moe_router")
    assert check_transformer_config(s, versions={"transformer_engine": "2.9.0"}).messages == (
        "TE version >= 2.10.0 is required for delay_wgrad_compute with partial cuda graph",)
    assert check_transformer_config(s, versions={"transformer_engine": "2.10.0"}).ok


def test_assumed_versions_are_restored_after_the_check():
    from megatron.core import utils

    before = (utils._torch_version, utils._te_version)
    check_transformer_config(settings(**OVL), versions={"torch": "2.5.1", "transformer_engine": "2.3.0"})
    assert (utils._torch_version, utils._te_version) == before


def test_microbatch_check_uses_the_world_size():
    bad = check_transformer_config(settings(global_batch_size=6, micro_batch_size=4), world_size=2)
    assert bad.messages == ("global batch size (6) is not divisible by micro batch size (4) times data parallel "
                            "size (2)",)
    ok = check_transformer_config(settings(global_batch_size=6, micro_batch_size=4), world_size=None)
    assert ok.ok and any("num_microbatches_calculator" in n for n in ok.not_run)


def test_unknown_setting_is_reported_not_ignored():
    r = check_transformer_config(settings(moe_overlap_typo=True))
    assert r.verdict == "fail" and r.unknown_fields == ("moe_overlap_typo",)
    assert "has no field 'moe_overlap_typo'" in r.messages[0]


def test_provider_only_fields_are_not_unknown_but_not_checked_here():
    r = check_transformer_config(settings(rotary_base=1000000, position_embedding_type="rope"))
    assert r.ok and r.unknown_fields == ()
    assert any("GPTModelProvider fields, not TransformerConfig: position_embedding_type, rotary_base" in n
               for n in r.not_run)


def test_cuda_graph_scope_string_does_not_crash():
    """C04: a scope given as a single string instead of a list."""
    assert scope_list("moe_router") == ["moe_router"]
    assert scope_list("attn,moe_router") == ["attn", "moe_router"]
    assert scope_list("full") == [] and scope_list(None) == []
    r = check_transformer_config(settings(cuda_graph_impl="transformer_engine", cuda_graph_scope="moe_router"))
    assert r.ok and r.effective["cuda_graph_scope"] == ["moe_router"]
    bogus = check_transformer_config(settings(cuda_graph_impl="transformer_engine", cuda_graph_scope="bogus"))
    assert bogus.verdict == "fail" and bogus.messages == ("KeyError: 'bogus'",)


def test_effective_values_are_the_finalised_ones():
    r = check_transformer_config(settings(expert_tensor_parallel_size=None, recompute_modules=None))
    assert r.effective["recompute_modules"] == ["core_attn"]  # Megatron-Core's default
    assert r.effective["expert_tensor_parallel_size"] == 1
    assert r.effective["seq_length"] == 1024 and r.effective["global_batch_size"] == 8


def test_pipeline_dtype_follows_precision_like_bridge():
    kwargs, unknown = transformer_config_kwargs(settings(pipeline_model_parallel_size=2))
    import torch

    assert unknown == [] and kwargs["pipeline_dtype"] is torch.bfloat16
    assert "vocab_size" not in kwargs and "global_batch_size" not in kwargs


def test_pure_and_fast_enough_for_a_conformance_table():
    check_transformer_config(settings())  # import once
    start = time.perf_counter()
    results = [check_transformer_config(settings(**over)) for over, _ in list(INVALID.values()) * 10]
    assert time.perf_counter() - start < 5.0
    assert all(isinstance(r, CheckResult) and r.verdict == "fail" for r in results)
