"""Documents the payload wrote on the lent H200 machines with the real stack (2026-11-29): Megatron-Bridge 0.6.2,
Megatron-Core 0.19.2, Transformer Engine 2.12.0, torch 2.11.0+cu130.

fixtures/h200 (one H200, so EP=1): made after the scripts/gpu bring-up, in one warm window, by
  python3 -m experiments.payload.validate_all /tmp/v /tmp/po/validate         (real Bridge + Core checks)
  torchrun --nproc-per-node=1 -m experiments.train /tmp/v/<v>/variant.json /tmp/po/<v> [--attempt 2 --hold-s 3]
  python3 -m experiments.payload.validate_all /tmp/q /tmp/pq                 (qwen3 recipe offline, recipe typos)
fixtures/h200x2 (two H200, EP=2): the same with torchrun --nproc-per-node=2 (overlap + delay_wgrad trained).
The variants came from tests/experiments/payload/helpers.make_variant. These tests hold today's code to the shape
of those real documents and record what the real libraries said.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from experiments.payload.cli import main
from experiments.payload.mcore_check import check_transformer_config

from .helpers import TINY_SETTINGS, assert_complete, make_variant, read_effective, write_variant

FIX = Path(__file__).parent / "fixtures" / "h200"
FIX2 = Path(__file__).parent / "fixtures" / "h200x2"


def load(name, folder=FIX):
    return json.loads((folder / name).read_text())


@pytest.mark.parametrize("path", sorted(FIX.glob("*.effective_config.json")) + sorted(FIX2.glob("*.effective_config.json")),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_real_documents_are_complete(path):
    doc = json.loads(path.read_text())
    assert_complete(doc)
    assert doc["versions"]["megatron_bridge"] == "0.6.2" and doc["versions"]["transformer_engine"] == "2.12.0"
    assert doc["versions"]["megatron_core"] == "0.19.2" and doc["hardware"]["gpu_name"] == "NVIDIA H200"
    assert doc["hardware"]["compute_capability"] == "9.0"
    if doc["written_at"] in ("before_setup", "setup_failed"):  # no process group yet: host names unknown
        assert doc["hardware"]["hostnames"] is None
    elif doc["mode"] == "train":  # all ranks, gathered at train start
        assert doc["hardware"]["hostnames"] == ["vm"] * doc["hardware"]["world_size"]
    else:  # validate: the one process that ran the checks
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


def test_real_apply_flex_forced_shared_expert_overlap_off_as_an_allowed_adjustment():
    doc = load("validate_hybridep_shared.ovl0.dw0.effective_config.json")
    assert doc["checks"]["verdict"] == "pass" and doc["effective"]["moe_shared_expert_overlap"] is False
    assert doc["adjustments"] == [{"field": "moe_shared_expert_overlap", "from": True, "to": False,
                                   "why": "flex/hybridep: apply_flex_dispatcher_backend forces it off"}]


def test_real_deepep_at_tp_ep_1_fails_at_model_build_as_a_check():
    """Megatron-Core's layer-build assertion, after every config check passed (validate cannot see it)."""
    msg = "DeepEP dispatcher requires TPxEP > 1 when instantiating TransformerLayer"
    doc = load("train_deepep.ovl0.dw0.effective_config.json")
    assert doc["written_at"] == "setup_failed" and doc["checks"]["messages"] == [msg] and doc["attempt"] == 2
    log = (FIX / "train_deepep.ovl0.dw0.payload.log").read_text()
    assert f"[payload] error 1 check_failed: {msg}" in log and "[payload] hold: done after 3 s" in log


def test_real_two_gpu_run_with_overlap_and_delay_wgrad():
    doc = load("train_a2a.ovl1.dw1.effective_config.json", FIX2)
    assert doc["written_at"] == "train_start" and doc["checks"]["verdict"] == "pass"
    assert doc["effective"]["overlap_moe_expert_parallel_comm"] is True and doc["effective"]["delay_wgrad_compute"]
    assert doc["effective"]["expert_model_parallel_size"] == 2 and doc["hardware"]["world_size"] == 2
    assert doc["hardware"]["hostnames"] == ["vm", "vm"] and doc["hardware"]["gpus_per_node"] == 2
    log = (FIX2 / "train_a2a.ovl1.dw1.payload.log").read_text()
    assert len(re.findall(r"iteration +\d+/ +30 \|", log)) == 30
    assert "[payload] train_start a2a.ovl1.dw1: effective config matches the variant on 2 rank(s)" in log
    # DeepEP is absent on the machine: the flex run stops at model build on both ranks, after the checks passed
    deep = (FIX2 / "train_deepep.ovl1.dw0.payload.log").read_text()
    assert deep.count("[payload] error 20 training_failed: pretrain raised ImportError: DeepEP is not installed") == 2


@pytest.mark.megatron  # asks the real Megatron-Core for its wording
def test_bridge_and_core_word_the_delay_wgrad_rule_differently():
    """CASES C02 drift, seen for real: Bridge's check (CommOverlapConfig.setup) fires first with its own text."""
    bridge = load("validate_a2a.ovl0.dw1.effective_config.json", FIX2)["checks"]["messages"]
    assert bridge == ["overlap_moe_expert_parallel_comm is required for delay_wgrad_compute"]
    core = check_transformer_config({**TINY_SETTINGS, "delay_wgrad_compute": True})
    assert core.messages == ("overlap_moe_expert_parallel_comm must be enabled when enabling delay_wgrad_compute",)


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
    for key in ("effective", "versions"):
        assert list(cpu[key]) == list(real[key]), key
    assert list(cpu["hardware"])[:len(real["hardware"])] == list(real["hardware"])  # ours adds the world's keys
    assert set(real) <= set(cpu)
    assert cpu["effective"] == real["effective"]  # same variant, same effective values from Core alone
