"""Conformance: the static rule table (tier 1) against real Megatron-Core 0.19 (tier 2), on the CPU.

For a matrix of variants, the verdict of the rule rows whose real check lives in Megatron-Core's
``TransformerConfig.__post_init__`` (scope ``core``, plus the micro-batch arithmetic ``gbs_dp``) must equal the
verdict of the real library built from the same settings (experiments/payload/mcore_check.py). Any disagreement is a
failing test, never a skip: this is what catches the Bridge/Core rule drift of CASES C02.

How each row of experiments/rules.py is covered:
- against real Megatron-Core here: every ``core`` row (overlap_*, graph_scope_*, delay_wgrad_needs_overlap, heads_tp,
  query_groups_tp, layers_pp; router_topk_experts, kv_channels_positive and heads_query_groups against the checks
  of the model build that validate mode runs, experiments/payload/build_checks.py) and ``gbs_dp``; the first run found two missing rows (graph_scope_moe, graph_scope_mlp)
  and one mis-scoped row (experts_ep is checked at MoE layer build, not in TransformerConfig);
- against real Megatron-Core with the version check patched (``assumed_versions``, as upstream's own tests patch
  ``is_torch_min_version``/``is_te_min_version``): overlap_torch (torch 2.5.1), delay_wgrad_te_2_10 (TE 2.9 / 2.10);
- by unit tests only (tests/experiments/test_rules.py), because the real check lives in Megatron-Bridge or
  Transformer Engine, which cannot be imported without TE: deepep_gpu, hybridep_gpu, ncclep_gpu, flex_package,
  overlap_experts, delay_wgrad_te_2_3, delay_wgrad_te_2_7, delay_wgrad_te_2_12, te_unknown;
- by unit tests of other core versions (test_rules.py): overlap_mtp_pp_old_core, overlap_cuda_graph_impl_old_core,
  ncclep_core; world_mp and world_ep need a process group (parallel_state), which validate mode lists as not run.
"""

from __future__ import annotations

import itertools

import pytest

from experiments.payload.mcore_check import check_transformer_config
from experiments.rules import RULES, evaluate
from tests.experiments.helpers import ctx

pytestmark = pytest.mark.megatron  # every test builds a real Megatron-Core TransformerConfig

CORE_ROWS = tuple(r.id for r in RULES if r.scope == "core") + ("gbs_dp",)
WORLD = 16

# one change at a time on top of a valid EP=8 configuration; each is tried with every overlap/delay cell
CHANGES = {
    "valid": {},
    "ep1": {"expert_model_parallel_size": 1},
    "allgather": {"dispatcher": "allgather"},
    "flex_deepep": {"dispatcher": "deepep"},
    "pp4_no_vpp": {"pipeline_model_parallel_size": 4, "num_layers": 8},
    "pp2_vpp2": {"pipeline_model_parallel_size": 2, "virtual_pipeline_model_parallel_size": 2, "num_layers": 8},
    "full_recompute": {"recompute_granularity": "full", "recompute_method": "uniform", "recompute_num_layers": 1},
    "recompute_method_only": {"recompute_granularity": "selective", "recompute_method": "uniform"},
    "selective_moe_mlp": {"recompute_granularity": "selective", "recompute_modules": ["moe", "mlp"]},
    "selective_core_attn": {"recompute_granularity": "selective", "recompute_modules": ["core_attn"]},
    "fp32": {"bf16": False, "fp16": False},
    "fp16": {"bf16": False, "fp16": True},
    "shared_overlap": {"moe_shared_expert_intermediate_size": 512, "moe_shared_expert_overlap": True},
    "mtp2": {"mtp_num_layers": 2},
    "mtp1": {"mtp_num_layers": 1},
    "te_graph_moe": {"cuda_graph_impl": "transformer_engine", "cuda_graph_scope": ["moe"]},
    "te_graph_router": {"cuda_graph_impl": "transformer_engine", "cuda_graph_scope": ["moe_router",
                                                                                      "moe_preprocess"]},
    "te_graph_scope_string": {"cuda_graph_impl": "transformer_engine", "cuda_graph_scope": "mlp"},
    "experts_not_divisible": {"num_moe_experts": 12},
    "heads_tp": {"tensor_model_parallel_size": 2, "num_attention_heads": 7, "num_query_groups": 7},
    "gbs_not_divisible": {"global_batch_size": 12},
    "topk_above_experts": {"moe_router_topk": 10},
    "topk_equals_experts": {"moe_router_topk": 8},
    "kv_channels_0": {"kv_channels": 0},
    "heads_not_per_group": {"num_attention_heads": 8, "num_query_groups": 3},
    "old_torch": {"torch": "2.5.1"},
    "te_2_9_graphs": {"te": "2.9.0", "cuda_graph_impl": "transformer_engine", "cuda_graph_scope": ["moe_router"]},
    "te_2_10_graphs": {"te": "2.10.0", "cuda_graph_impl": "transformer_engine", "cuda_graph_scope": ["moe_router"]},
}
CELLS = [(o, d) for o, d in itertools.product((False, True), (False, True))]


def _case(change: dict, overlap: bool, delay: bool):
    change = dict(change)
    dispatcher = change.pop("dispatcher", "alltoall")
    torch_v = change.pop("torch", "2.11.0")
    te_v = change.pop("te", "2.12.0")
    c = ctx(dispatcher, overlap, delay, torch=torch_v, te=te_v, world=WORLD, **change)
    return c, {"torch": torch_v, "transformer_engine": te_v}


@pytest.mark.parametrize("name", sorted(CHANGES))
@pytest.mark.parametrize("overlap,delay", CELLS)
def test_rule_table_matches_megatron_core(name, overlap, delay):
    c, versions = _case(CHANGES[name], overlap, delay)
    ours = [f for f in evaluate(c) if f.rule in CORE_ROWS and f.severity == "error"]
    real = check_transformer_config(c.settings, world_size=WORLD, versions=versions)
    assert real.unknown_fields == (), real.messages
    assert (not ours) == real.ok, (
        f"rule table says {[f.rule + ': ' + f.message for f in ours] or 'valid'}, "
        f"Megatron-Core {real.core_version} says {list(real.messages) or 'valid'}")


def test_messages_of_overlap_rules_are_the_library_text():
    """Where the rule mirrors a core assert, our message starts with the library's own sentence."""
    for name, rule in (("ep1", "overlap_ep"), ("allgather", "overlap_dispatcher"), ("fp32", "overlap_precision"),
                       ("mtp2", "overlap_mtp"), ("selective_moe_mlp", "overlap_recompute_moe")):
        c, versions = _case(CHANGES[name], True, False)
        real = check_transformer_config(c.settings, world_size=WORLD, versions=versions)
        ours = {f.rule: f.message for f in evaluate(c)}
        lib = real.messages[0].rstrip(".")
        assert ours[rule].startswith(lib[:40]), (ours[rule], lib)
    c, versions = _case({}, False, True)
    real = check_transformer_config(c.settings, world_size=WORLD, versions=versions)
    assert real.messages[0] == {f.rule: f.message for f in evaluate(c)}["delay_wgrad_needs_overlap"]
