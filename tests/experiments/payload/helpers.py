"""Build variant.json documents for payload tests (independent of the planner, which is written concurrently).

The base settings are the tiny_moe profile (conf/model/tiny_moe.yaml on top of conf/model/_base.yaml) with the
alltoall dispatcher, EP=2 on one node of two GPUs.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

TINY_SETTINGS: dict[str, Any] = {
    "moe_token_dispatcher_type": "alltoall", "moe_flex_dispatcher_backend": None,
    "overlap_moe_expert_parallel_comm": False, "delay_wgrad_compute": False,
    "num_layers": 4, "hidden_size": 512, "num_attention_heads": 8, "num_query_groups": 4, "kv_channels": 64,
    "ffn_hidden_size": 1536, "moe_ffn_hidden_size": 512, "num_moe_experts": 8, "moe_router_topk": 2,
    "vocab_size": 32000, "moe_shared_expert_intermediate_size": None, "moe_shared_expert_overlap": False,
    "mtp_num_layers": None, "add_bias_linear": False, "add_qkv_bias": False,
    "tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1, "virtual_pipeline_model_parallel_size": None,
    "context_parallel_size": 1, "expert_model_parallel_size": 2, "expert_tensor_parallel_size": 1,
    "sequence_parallel": False, "num_layers_in_first_pipeline_stage": None, "num_layers_in_last_pipeline_stage": None,
    "account_for_embedding_in_pipeline_split": False, "account_for_loss_in_pipeline_split": False,
    "seq_length": 1024, "global_batch_size": 8, "micro_batch_size": 1,
    "recompute_granularity": None, "recompute_method": None, "recompute_num_layers": None, "recompute_modules": None,
    "bf16": True, "fp16": False, "cuda_graph_impl": "none", "cuda_graph_scope": [],
    "overlap_grad_reduce": False, "gradient_accumulation_fusion": False, "moe_router_force_load_balancing": True,
}
FLEX = ("deepep", "hybridep", "ncclep")
SHORT = {"alltoall": "a2a", "allgather": "ag"}


def make_variant(dispatcher: str = "alltoall", overlap: bool = False, delay_wgrad: bool = False, *,
                 settings: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    """A schema_version 1 variant.json document; ``settings`` override single fields, ``top`` top-level keys
    (``cluster``/``container``/``env``/``payload``/``model`` are merged one level deep)."""
    s = copy.deepcopy(TINY_SETTINGS)
    s["moe_token_dispatcher_type"] = "flex" if dispatcher in FLEX else dispatcher
    s["moe_flex_dispatcher_backend"] = dispatcher if dispatcher in FLEX else None
    s["overlap_moe_expert_parallel_comm"], s["delay_wgrad_compute"] = overlap, delay_wgrad
    s.update(settings or {})
    doc: dict[str, Any] = {
        "schema_version": 1, "sweep_id": "20261129-160000Z-a1b2c3",
        "variant": f"{SHORT.get(dispatcher, dispatcher)}.ovl{int(overlap)}.dw{int(delay_wgrad)}",
        "dispatcher": dispatcher, "overlap": overlap, "delay_wgrad": delay_wgrad,
        "axes": {}, "group": {}, "role": "variant", "stage": 1, "mode": "validate",
        "model": {"name": "tiny_moe", "recipe": "gpt_provider", "hf_path": None},
        "settings": s,
        "cluster": {"name": "local_slurm", "executor": "slurm", "nodes": 1, "gpus_per_node": 2, "gpu_type": "h200",
                    "world_size": 2},
        "container": {"name": "mbridge_0_6_h200", "image": None, "torch": "2.11.0", "transformer_engine": "2.12.0",
                      "megatron_core": "0.19.2", "megatron_bridge": "0.6.2", "deep_ep": None},
        "env": {}, "payload": {"train_iters": 30, "seed": 1234, "hold_s": 0, "log_interval": 1},
        "allow_adjust": ["moe_shared_expert_overlap"],
    }
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(doc.get(key), dict) and key != "settings":
            doc[key] = {**doc[key], **value}
        else:
            doc[key] = value
    return doc


def write_variant(folder: Path, doc: dict[str, Any], name: str | None = None) -> Path:
    """Write ``doc`` as ``folder/<name or variant>/variant.json``; returns the path."""
    path = Path(folder) / (name or doc["variant"]) / "variant.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1))
    return path


def read_effective(out_dir: Path) -> dict[str, Any]:
    return json.loads((Path(out_dir) / "effective_config.json").read_text())


TOP_KEYS = ("schema_version", "variant", "mode", "attempt", "requested", "effective", "adjustments", "env",
            "versions", "hardware", "checks")


def assert_complete(doc: dict[str, Any]) -> None:
    """Every CONTRACTS §6 key is present (unknown values are null, never absent)."""
    from experiments.payload.effective import EFFECTIVE_KEYS, HARDWARE_KEYS, VERSION_KEYS

    for key in TOP_KEYS:
        assert key in doc, key
    assert doc["schema_version"] == 1
    assert set(EFFECTIVE_KEYS) <= set(doc["effective"]) and len(EFFECTIVE_KEYS) == 27
    assert set(VERSION_KEYS) == set(doc["versions"])
    # the launched-world keys were added later (CONTRACTS §6 allows additions): documents recorded before lack them
    assert set(HARDWARE_KEYS) - {"nodelist", "node_of_rank", "ranks_per_node"} <= set(doc["hardware"]) <= set(HARDWARE_KEYS)
    assert set(doc["checks"]) >= {"verdict", "messages", "not_run"}
    assert doc["checks"]["verdict"] in ("pass", "fail")
    for key in ("dispatcher", "overlap", "delay_wgrad"):
        assert key in doc["requested"]
    json.dumps(doc)
