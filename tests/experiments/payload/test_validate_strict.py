"""Validate mode is as strict as training: what Megatron-Core 0.19.2 refuses at the model build or the first step
(router top-k above the experts, kv_channels=0, heads not a multiple of the query groups) fails validate mode and
is pruned by the planner's rule table, each naming the Megatron-Core line."""

from __future__ import annotations

import pytest

from experiments.rules import evaluate
from tests.experiments.helpers import ctx, settings

BAD = {"moe_router_topk": ({"moe_router_topk": 10}, "router_topk_experts", "router.py:305"),
       "kv_channels": ({"kv_channels": 0}, "kv_channels_positive", "dot_product_attention.py:85"),
       "groups": ({"num_attention_heads": 8, "num_query_groups": 3}, "heads_query_groups",
                  "dot_product_attention.py:169")}


@pytest.mark.parametrize("name", sorted(BAD))
def test_the_rule_table_prunes_with_the_megatron_line(name: str) -> None:
    change, rule, line = BAD[name]
    found = {f.rule: f for f in evaluate(ctx(**change))}
    assert rule in found and line in found[rule].text and found[rule].severity == "error"
    assert rule not in {f.rule for f in evaluate(ctx())}


@pytest.mark.megatron
@pytest.mark.parametrize("name", sorted(BAD))
def test_validate_mode_fails_what_the_model_build_would(name: str) -> None:
    from experiments.payload.mcore_check import check_transformer_config

    change, _, line = BAD[name]
    real = check_transformer_config(settings(**change), world_size=16)
    assert not real.ok and any(line in m for m in real.messages), real.messages
    assert check_transformer_config(settings(), world_size=16).ok
