"""Megatron-Core 0.19's checks that ``TransformerConfig.__post_init__`` does not run but the model build or the
first step does, run in validate mode on the built config so that validate mode is as strict as training.

Each check names the Megatron-Core 0.19.2 line it mirrors (paths under ``megatron/core/``):

- ``moe_router_topk`` within 1..``num_moe_experts``: the router picks its experts with ``torch.topk(logits,
  k=self.topk, dim=1)`` over the ``num_moe_experts`` logits (``transformer/moe/router.py:305``, and
  ``transformer/moe/moe_utils.py:823`` for the score functions), which raises "selected index k out of range" at
  the first forward step when k exceeds the experts. Checked with that same ``torch.topk`` call on a CPU tensor.
- ``kv_channels`` >= 1: ``query_projection_size = kv_channels * num_attention_heads``
  (``transformer/attention.py:333``) gives a head size of 0, and ``DotProductAttention`` then computes
  ``1.0 / math.sqrt(hidden_size_per_attention_head)`` (``transformer/dot_product_attention.py:85``).
- ``num_attention_heads`` divisible by ``num_query_groups``: grouped-query attention repeats each key/value head
  ``num_attention_heads // num_query_groups`` times (``transformer/dot_product_attention.py:169-174``), and with
  fewer groups than TP ranks the build calls ``divide(num_attention_heads, num_query_groups)``
  (``transformer/attention.py:358``, ``utils.py:556`` ``ensure_divisibility``).
"""

from __future__ import annotations

from typing import Any


def build_check_messages(cfg: Any) -> list[str]:
    """The failures of the checks above for a built ``TransformerConfig`` ``cfg`` (its ``kv_channels`` and
    ``num_query_groups`` already filled in by ``__post_init__``); empty when the model can be built."""
    import torch

    out: list[str] = []
    experts, topk = getattr(cfg, "num_moe_experts", None), getattr(cfg, "moe_router_topk", None)
    if experts:
        try:
            if int(topk) < 1:
                raise RuntimeError("k must be at least 1")
            torch.topk(torch.zeros(1, int(experts)), k=int(topk), dim=1)
        except (RuntimeError, TypeError, ValueError) as e:
            out.append(f"moe_router_topk={topk} cannot pick from num_moe_experts={experts}: the router's "
                       f"torch.topk(logits, k={topk}) fails ({str(e).splitlines()[0]}) "
                       "(megatron/core/transformer/moe/router.py:305)")
    kv = getattr(cfg, "kv_channels", None)
    if kv is not None and int(kv) < 1:
        out.append(f"kv_channels={kv} gives attention heads of size {kv}: DotProductAttention divides by "
                   "sqrt(kv_channels) (megatron/core/transformer/dot_product_attention.py:85); use kv_channels >= 1 "
                   "or null (hidden_size // num_attention_heads)")
    heads, groups = getattr(cfg, "num_attention_heads", None), getattr(cfg, "num_query_groups", None)
    if heads and groups and int(heads) % int(groups):
        out.append(f"num_attention_heads={heads} is not divisible by num_query_groups={groups}: grouped-query "
                   "attention repeats each key/value head heads // groups times "
                   "(megatron/core/transformer/dot_product_attention.py:169)")
    return out
