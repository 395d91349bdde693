"""Validate mode on the CPU against the real Megatron-Core (Megatron-Bridge and TE are not importable here), the
CONTRACTS §6 document, and the validate_all preflight job."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.payload import errors
from experiments.payload.cli import main
from experiments.payload.validate_all import find_variant_files, validate_all

from .helpers import assert_complete, make_variant, read_effective, write_variant

pytestmark = pytest.mark.megatron
ROOT = Path(__file__).resolve().parents[3]
def validate_doc(tmp_path, capsys, doc):
    path = write_variant(tmp_path, doc)
    out = tmp_path / "out" / doc["variant"]
    code = main([str(path), str(out), "--attempt", "1"])
    return code, read_effective(out), capsys.readouterr().out


# a target container with DeepEP: validate builds the flex dispatcher against it (dispatcher_build.py); the proven
# stack's profile (deep_ep: null) is refused with Megatron-Core's "DeepEP is not installed"
WITH_DEEPEP = {"deep_ep": "1.2.1"}


def test_valid_variant_passes_and_the_document_is_complete(tmp_path, capsys):
    code, doc, out = validate_doc(tmp_path, capsys, make_variant("alltoall", True, True,
                                                                 axes={"model.expert_model_parallel_size": 2}))
    assert code == 0 and "[payload] validate a2a.ovl1.dw1: pass" in out
    assert_complete(doc)
    assert doc["requested"] == {"dispatcher": "alltoall", "overlap": True, "delay_wgrad": True,
                                "model.expert_model_parallel_size": 2}
    assert doc["effective"]["overlap_moe_expert_parallel_comm"] is True
    assert doc["effective"]["delay_wgrad_compute"] is True and doc["effective"]["train_iters"] == 30
    assert doc["attempt"] == 1 and doc["mode"] == "validate" and doc["mismatches"] == []
    assert doc["versions"]["megatron_core"] == "0.19.2" and doc["versions"]["torch"].startswith("2.")
    assert doc["versions"]["megatron_bridge"] is None and doc["versions"]["transformer_engine"] is None
    assert doc["hardware"]["world_size"] == 2 and doc["hardware"]["nodes"] == 1 and len(doc["hardware"]["hostnames"]) == 1
    not_run = " ".join(doc["checks"]["not_run"])
    for piece in ("CommOverlapConfig.setup", "validate_flex_dispatcher_backend", "ConfigContainer.validate",
                  "transformer_engine", "initialize_model_parallel",
                  "not checked: megatron_bridge is not installed here (megatron.bridge CommOverlapConfig.setup"):
        assert piece in not_run


@pytest.mark.parametrize("dispatcher, overlap, dw, over, message", [
    ("alltoall", False, True, {}, "overlap_moe_expert_parallel_comm must be enabled when enabling delay_wgrad_compute"),
    ("alltoall", True, False, {"expert_model_parallel_size": 1},
     "overlap_moe_expert_parallel_comm is only supported with expert model parallelism"),
    ("allgather", True, False, {}, "overlap_moe_expert_parallel_comm is supported with alltoall/flex token dispatcher"),
    ("alltoall", True, False, {"pipeline_model_parallel_size": 4, "num_layers": 8},
     "virtual_pipeline_model_parallel_size must be specified when pipeline_model_parallel_size > 1"),
    ("alltoall", True, False, {"mtp_num_layers": 2}, "MTP supports at most one layer"),
    ("deepep", True, False, {"recompute_granularity": "selective", "recompute_modules": ["moe", "mlp"]},
     "disable moe in recompute_modules when enabling overlap_moe_expert_parallel_comm"),
])
def test_invalid_variants_fail_with_library_messages(tmp_path, capsys, dispatcher, overlap, dw, over, message):
    code, doc, out = validate_doc(tmp_path, capsys, make_variant(dispatcher, overlap, dw, settings=over))
    assert code == errors.CHECK_FAILED == 1
    assert_complete(doc)
    assert doc["checks"]["verdict"] == "fail"
    assert any(message in m for m in doc["checks"]["messages"]), doc["checks"]["messages"]
    assert f"{message}" in out and ": fail" in out


def test_target_container_torch_is_used(tmp_path, capsys):
    """C01: with container torch 2.5.1 and overlap on, the variant is rejected (the hang rule)."""
    code, doc, _ = validate_doc(tmp_path, capsys, make_variant("alltoall", True, container={"torch": "2.5.1"}))
    assert code == 1
    assert doc["checks"]["messages"] == ["A2A Overlap encounters hang issue with torch version < 2.6.0"]


def test_delay_wgrad_with_old_te_lists_the_bridge_check_as_not_run(tmp_path, capsys):
    """C04: {delay_wgrad on, overlap_grad_reduce true} with TE 2.6.0 is a Megatron-Bridge check (TE >= 2.7.0):
    Megatron-Core alone accepts it, and the document says the Bridge check did not run."""
    code, doc, _ = validate_doc(tmp_path, capsys, make_variant("alltoall", True, True,
                                                               settings={"overlap_grad_reduce": True},
                                                               container={"transformer_engine": "2.6.0"}))
    assert code == 0
    assert any("TE >= 2.7.0" in n for n in doc["checks"]["not_run"])


def test_shared_expert_overlap_default_is_adjusted_and_recorded(tmp_path, capsys):
    """C02: a model default that turns on moe_shared_expert_overlap is switched off and recorded."""
    over = {"moe_shared_expert_intermediate_size": 1024, "moe_shared_expert_overlap": True}
    code, doc, _ = validate_doc(tmp_path, capsys, make_variant("alltoall", True, settings=over))
    assert code == 0
    assert doc["adjustments"] == [{"field": "moe_shared_expert_overlap", "from": True, "to": False,
                                   "why": "overlap_moe_expert_parallel_comm requires moe_shared_expert_overlap=False"}]
    assert doc["effective"]["moe_shared_expert_overlap"] is False


def test_shared_expert_overlap_not_allowed_is_rejected_by_the_library(tmp_path, capsys):
    over = {"moe_shared_expert_intermediate_size": 1024, "moe_shared_expert_overlap": True}
    code, doc, _ = validate_doc(tmp_path, capsys, make_variant("alltoall", True, settings=over, allow_adjust=[]))
    assert code == 1 and doc["adjustments"] == []
    assert doc["checks"]["messages"] == [
        "disable moe_shared_expert_overlap when enabling overlap_moe_expert_parallel_comm"]


def test_unknown_field_exits_14_and_names_the_version(tmp_path, capsys):
    code, doc, out = validate_doc(tmp_path, capsys, make_variant(settings={"moe_a2a_overlap": True}))
    assert code == errors.UNKNOWN_FIELD == 14
    assert "[payload] error 14 unknown_field: on megatron-core 0.19.2" in out and "'moe_a2a_overlap'" in out
    assert doc["checks"]["verdict"] == "fail" and doc["written_at"] == "error"
    assert_complete(doc)


def test_environment_is_recorded_and_secrets_masked(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32")
    monkeypatch.setenv("WANDB_API_KEY", "s3cr3t-value")
    monkeypatch.delenv("NCCL_NVLS_ENABLE", raising=False)
    doc_in = make_variant("hybridep", True, env={"CUDA_DEVICE_MAX_CONNECTIONS": "32", "WANDB_API_KEY": "***"},
                          container=WITH_DEEPEP)
    code, doc, _ = validate_doc(tmp_path, capsys, doc_in)
    assert code == 0
    assert doc["env"]["CUDA_DEVICE_MAX_CONNECTIONS"] == "32" and doc["env"]["WANDB_API_KEY"] == "***"
    assert doc["env"]["NCCL_NVLS_ENABLE"] is None
    assert "NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN" in doc["env"]
    assert "s3cr3t-value" not in (tmp_path / "out" / doc["variant"] / "effective_config.json").read_text()


@pytest.mark.slow
def test_subprocess_entry_point(tmp_path):
    path = write_variant(tmp_path, make_variant("deepep", True, container=WITH_DEEPEP))
    p = subprocess.run([sys.executable, "-m", "experiments.train", str(path), str(tmp_path / "out")], cwd=ROOT,
                       capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                       preexec_fn=lambda: os.umask(0o077))  # a restrictive umask is honoured
    assert p.returncode == 0, p.stdout + p.stderr
    assert "[payload] validate deepep.ovl1.dw0: pass" in p.stdout
    assert sorted(x.name for x in (tmp_path / "out").iterdir()) == ["effective_config.json"]
    assert (tmp_path / "out" / "effective_config.json").stat().st_mode & 0o777 == 0o600
    assert_complete(read_effective(tmp_path / "out"))


def test_validate_all_writes_one_document_per_variant(tmp_path, capsys):
    sweep = tmp_path / "sweep"
    good = [make_variant("alltoall"), make_variant("alltoall", True),
            make_variant("deepep", True, container=WITH_DEEPEP)]
    bad = make_variant("alltoall", False, True)
    for d in good + [bad]:
        write_variant(sweep / "variants", d)
    out = tmp_path / "preflight"
    code = validate_all([sweep], out)
    text = capsys.readouterr().out
    assert code == 1
    for d in good:
        assert f"[payload] validate {d['variant']}: pass" in text
        assert read_effective(out / d["variant"])["checks"]["verdict"] == "pass"
    assert f"[payload] validate {bad['variant']}: fail" in text
    assert read_effective(out / bad["variant"])["checks"]["messages"] == [
        "overlap_moe_expert_parallel_comm must be enabled when enabling delay_wgrad_compute"]
    summary = json.loads((out / "validate_all.json").read_text())
    assert [r["verdict"] for r in summary["results"]].count("pass") == 3 and len(summary["results"]) == 4


def test_validate_all_list_file_and_bad_entries(tmp_path, capsys):
    a = write_variant(tmp_path / "v", make_variant("alltoall", True))
    broken = tmp_path / "v" / "broken" / "variant.json"
    broken.parent.mkdir(parents=True)
    broken.write_text("{")
    listing = tmp_path / "list.txt"
    listing.write_text(f"# preflight list\n{a}\nv/broken/variant.json\n")
    assert find_variant_files(listing) == [a, tmp_path / "v" / "broken" / "variant.json"]
    code = validate_all([listing], tmp_path / "out")
    text = capsys.readouterr().out
    assert code == errors.BAD_VARIANT_FILE
    assert "[payload] validate a2a.ovl1.dw0: pass" in text and "error 10 bad_variant_file" in text
    assert validate_all([tmp_path / "nothing-here"], tmp_path / "out2") == errors.BAD_VARIANT_FILE


@pytest.mark.slow
def test_validate_all_command_line(tmp_path):
    write_variant(tmp_path / "s" / "variants", make_variant("alltoall"))
    p = subprocess.run([sys.executable, "-m", "experiments.payload.validate_all", str(tmp_path / "s"),
                        str(tmp_path / "o")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "[payload] validate a2a.ovl0.dw0: pass" in p.stdout and "1/1 passed" in p.stdout
    assert_complete(read_effective(tmp_path / "o" / "a2a.ovl0.dw0"))


def test_validate_all_keeps_both_documents_when_names_repeat(tmp_path, capsys):
    write_variant(tmp_path / "w", make_variant("alltoall"), name="x1")
    write_variant(tmp_path / "w", make_variant("alltoall"), name="x2")
    assert validate_all([tmp_path / "w"], tmp_path / "o") == 0
    assert "warning: variant name a2a.ovl0.dw0 repeats" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["a2a.ovl0.dw0", "a2a.ovl0.dw0~2", "validate_all.json"]
    folders = [r["folder"] for r in json.loads((tmp_path / "o" / "validate_all.json").read_text())["results"]]
    assert folders == ["a2a.ovl0.dw0", "a2a.ovl0.dw0~2"]


def test_validate_builds_the_dispatcher_and_refuses_ncclep_with_the_library_message(tmp_path, capsys):
    """An ncclep arm forced past the planner (preflight=off) is refused by validate on Megatron-Core 0.19.2 with the
    library's own message and place: the dispatcher build, not TransformerConfig, holds these checks."""
    code, doc, _ = validate_doc(tmp_path, capsys, make_variant("ncclep", False))
    assert code == 1
    text = " ".join(doc["checks"]["messages"])
    assert "TransformerEngine NCCL EP is unavailable" in text and "token_dispatcher.py:" in text
    assert any("decided by: token dispatcher" in n for n in doc["notes"])
    # a target with NCCL EP (TE 2.18) gets to the next library check: the buffer budget
    code, doc, _ = validate_doc(tmp_path / "te218", capsys,
                                make_variant("ncclep", False, container={"transformer_engine": "2.18.0"}))
    assert code == 1 and "requires moe_expert_rank_capacity_factor to be set" in str(doc["checks"])
    code, doc, _ = validate_doc(tmp_path / "ok", capsys, make_variant(
        "ncclep", False, container={"transformer_engine": "2.18.0"},
        settings={"moe_expert_rank_capacity_factor": 1.5}))
    assert code == 0, doc["checks"]


def test_the_document_records_the_precision(tmp_path, capsys):
    s = {"fp8": "hybrid", "fp8_recipe": "tensorwise"}
    code, doc, _ = validate_doc(tmp_path, capsys, make_variant(
        "alltoall", settings=s, precision={"name": "fp8_cs", "mixed_precision": "bf16_with_fp8_current_scaling_mixed"}))
    assert code == 0, doc["checks"]
    assert doc["precision"] == {"name": "fp8_cs", "mixed_precision": "bf16_with_fp8_current_scaling_mixed",
                                "fp8": "hybrid", "fp8_recipe": "tensorwise"}
    code, doc, _ = validate_doc(tmp_path / "bf16", capsys, make_variant("alltoall"))
    assert doc["precision"]["name"] == "bf16"  # a variant.json written before the precision axis


def test_validate_builds_a_whole_moe_layer_where_the_cpu_allows(tmp_path, capsys):
    code, doc, _ = validate_doc(tmp_path, capsys, make_variant("deepep", True, container=WITH_DEEPEP))
    assert code == 0, doc["checks"]
    assert any("one MoE layer (router, SequentialMLP, dispatcher) built on the meta device" in n for n in doc["notes"])


@pytest.mark.parametrize("why, library, said", [
    ("megatron.bridge is not importable (missing module 'megatron.bridge': No module named 'megatron.bridge')",
     "megatron_bridge", "not checked: megatron_bridge is not installed here (a check)"),
    # Bridge is there, but its import needs Transformer Engine: that library is named, not Bridge
    ("megatron.bridge is not importable (missing module 'transformer_engine': No module named 'transformer_engine')",
     "megatron_bridge", "not checked: transformer_engine is not installed here (a check)"),
    ("needs a GPU for this flex variant's Bridge checks; none here", "megatron_bridge",
     "not checked: needs a GPU for this flex variant's Bridge checks; none here (a check)"),
    ("needs a GPU for this flex variant's Bridge checks; none here", "transformer_engine",
     "not checked: transformer_engine is not installed here (a check)"),  # TE is not installed in this environment
])
def test_a_check_that_could_not_run_names_the_missing_library(why, library, said):
    from experiments.payload.validate import not_checked

    assert not_checked(why, library, "a check") == said
