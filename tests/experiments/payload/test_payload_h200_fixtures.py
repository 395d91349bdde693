"""Documents the payload wrote on the lent H200 with the real stack (2026-11-29): Megatron-Bridge 0.6.2,
Megatron-Core 0.19.2, Transformer Engine 2.12.0, torch 2.11.0+cu130, one H200 (so EP=1 only).

How they were made (scripts/gpu bring-up, then in one warm window):
  python3 -m experiments.payload.validate_all /tmp/v /tmp/po/validate         (4 variants, real Bridge checks)
  torchrun --nproc-per-node=1 -m experiments.train /tmp/v/<v>/variant.json /tmp/po/<v>   (train mode)
  python3 -m experiments.payload.validate_all /tmp/q /tmp/pq                 (qwen3 recipe offline, recipe typos)
The variants came from tests/experiments/payload/helpers.make_variant with expert_model_parallel_size=1 on a
1-GPU cluster. These tests hold today's code to the shape of those real documents and record what the real
library said.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from experiments.payload.cli import main

from .helpers import assert_complete, make_variant, read_effective, write_variant

FIX = Path(__file__).parent / "fixtures" / "h200"


def load(name):
    return json.loads((FIX / name).read_text())


@pytest.mark.parametrize("name", sorted(p.name for p in FIX.glob("*.effective_config.json")))
def test_real_documents_are_complete(name):
    doc = load(name)
    assert_complete(doc)
    assert doc["versions"]["megatron_bridge"] == "0.6.2" and doc["versions"]["transformer_engine"] == "2.12.0"
    assert doc["versions"]["megatron_core"] == "0.19.2" and doc["hardware"]["gpu_name"] == "NVIDIA H200"
    assert doc["hardware"]["compute_capability"] == "9.0"
    if doc["written_at"] == "before_setup":  # no process group yet: the ranks' host names are unknown
        assert doc["hardware"]["hostnames"] is None
    else:
        assert doc["hardware"]["hostnames"] == ["vm"]


def test_real_training_run_matched_its_variant_at_train_start():
    doc = load("train_a2a.ovl0.dw0.effective_config.json")
    assert doc["written_at"] == "train_start" and doc["checks"]["verdict"] == "pass" and doc["mismatches"] == []
    assert doc["runtime"]["token_dispatchers"] == ["MoEAlltoAllTokenDispatcher"]
    assert doc["effective"]["overlap_moe_expert_parallel_comm"] is False and doc["effective"]["train_iters"] == 30
    assert doc["env"]["CUDA_DEVICE_MAX_CONNECTIONS"] == "32"
    assert "comm_overlap was None: created CommOverlapConfig(tp_comm_overlap=False)" in doc["notes"]
    log = (FIX / "train_a2a.ovl0.dw0.payload.log").read_text()
    assert len(re.findall(r"iteration +\d+/ +30 \|", log)) == 30 and "[payload] exit 0" in log
    assert log.index("[payload] train_start") < log.index("iteration        1/")


def test_real_bridge_rejected_overlap_at_ep1_with_its_own_message():
    """Megatron-Bridge's check (comm_overlap.py) words it differently from Megatron-Core's copy (CASES C02)."""
    bridge_msg = "overlap_moe_expert_parallel_comm is only supported when expert_model_parallel_size > 1"
    for name in ("train_a2a.ovl1.dw0.effective_config.json", "validate_a2a.ovl1.dw0.effective_config.json"):
        doc = load(name)
        assert doc["checks"] == {**doc["checks"], "verdict": "fail", "messages": [bridge_msg]}
    assert "[payload] error 1 check_failed: " + bridge_msg in (FIX / "train_a2a.ovl1.dw0.payload.log").read_text()


def test_real_flex_variants_passed_the_h200_gpu_check():
    for v in ("deepep", "hybridep"):
        doc = load(f"validate_{v}.ovl0.dw0.effective_config.json")
        assert doc["checks"]["verdict"] == "pass"
        assert (doc["effective"]["moe_token_dispatcher_type"], doc["effective"]["moe_flex_dispatcher_backend"]) == (
            "flex", v)
        assert doc["checks"]["not_run"] == [
            "megatron.core parallel_state.initialize_model_parallel and model build (no process group in validate "
            "mode)"]
    # ... and deepep at TP x EP = 1 then failed at model build (now exit 1, a check failure; exit 20 back then)
    assert "DeepEP dispatcher requires TPxEP > 1 when instantiating TransformerLayer" in (
        FIX / "train_deepep.ovl0.dw0.payload.log").read_text()


def test_real_recipe_errors_have_their_codes():
    results = load("validate_all_recipes.json")["results"]
    codes = {Path(r["path"]).parent.name: (r["code"], r["messages"][0]) for r in results}
    assert codes["hf"][0] == 15 and "model.hf_path" in codes["hf"][1] and "huggingface.co" in codes["hf"][1]
    assert codes["typo"][0] == 11 and "close matches: qwen3_30b_a3b_pretrain_config" in codes["typo"][1]
    assert codes["modtypo"][0] == 11 and "no module 'megatron.bridge.recipes.qwen3'" in codes["modtypo"][1]


@pytest.mark.megatron
def test_cpu_documents_have_the_same_shape_as_the_real_ones(tmp_path, capsys):
    real = load("validate_a2a.ovl0.dw0.effective_config.json")
    doc = make_variant(settings={"expert_model_parallel_size": 1}, cluster={"gpus_per_node": 1, "world_size": 1})
    assert main([str(write_variant(tmp_path, doc)), str(tmp_path / "o")]) == 0
    capsys.readouterr()
    cpu = read_effective(tmp_path / "o")
    for key in ("effective", "versions", "hardware"):
        assert list(cpu[key]) == list(real[key]), key
    assert set(real) <= set(cpu)
    assert cpu["effective"] == real["effective"]  # same variant, same effective values from Core alone
