"""Validate-mode checks through the real CLI: ``preflight=container`` (one validate job for every kept variant,
locally and on the local Slurm), a check that needs a library this machine lacks (reported as not checked,
never as a rejection), and the files of a validated sweep under a restrictive umask. Each sweep runs the real CLI in a process of its own (tests/e2e/cli.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.cli import REPO, run_sweep, tail

KEPT = {"a2a.ovl0.dw0", "a2a.ovl1.dw0", "a2a.ovl1.dw1"}


def _variants(d: Path) -> dict:
    return {v["name"]: v for v in json.loads((d / "manifest.json").read_text())["variants"]}


def _check_container_preflight(out: Path) -> None:
    v = _variants(out)
    assert {n for n, x in v.items() if x["status"] != "pruned"} == KEPT
    for n in KEPT:  # each kept variant was checked by the preflight job, then ran
        doc = json.loads((out / "preflight" / n / "effective_config.json").read_text())
        assert doc["checks"]["verdict"] == "pass", (n, doc["checks"])
        assert [a["status"] for a in v[n]["attempts"]] == ["succeeded"], (n, v[n])
    summary = json.loads((out / "preflight" / "validate_all.json").read_text())
    assert {r["variant"] for r in summary["results"]} == KEPT


@pytest.mark.megatron
@pytest.mark.slow
def test_container_preflight_runs_locally(tmp_path):
    out = tmp_path / "s"
    res = run_sweep([f"output_dir={out}", "preflight=container", "poll_s=0.5"])
    assert res.returncode == 0, tail(res)
    _check_container_preflight(out)


@pytest.mark.megatron
@pytest.mark.slow
@pytest.mark.slurm
@pytest.mark.usefixtures("slurm_cluster")
def test_container_preflight_runs_on_slurm(tmp_path):
    out = tmp_path / "s"
    res = run_sweep(["cluster=local_slurm", "allow_dirty=true", "poll_s=1", f"output_dir={out}",
                     "preflight=container"])
    assert res.returncode == 0, tail(res)
    _check_container_preflight(out)


@pytest.mark.megatron
@pytest.mark.slow
def test_a_check_needing_transformer_engine_is_not_checked_here_not_rejected(tmp_path):
    # qwen3_30b_a3b uses TE CUDA graphs; with delay_wgrad Megatron-Core asks for TE >= 2.10, and this machine and its
    # container profile (ci_cpu) have no Transformer Engine: the rule cannot be decided here
    out = tmp_path / "s"
    res = run_sweep([f"output_dir={out}", "model=qwen3_30b_a3b", "poll_s=0.5"])
    assert res.returncode == 0, tail(res)
    (a,) = _variants(out)["a2a.ovl1.dw1"]["attempts"]
    assert a["status"] == "succeeded", a
    checks = json.loads((out / Path(a["log_dir"]).parent / "effective_config.json").read_text())["checks"]
    assert checks["verdict"] == "pass" and not checks["messages"], checks
    assert any(s.startswith("not checked: transformer_engine is not installed here (TE version >= 2.10.0")
               for s in checks["not_run"]), checks["not_run"]


@pytest.mark.megatron
@pytest.mark.slow
def test_a_check_only_megatron_bridge_could_decide_is_not_checked_here_not_rejected(tmp_path):
    # DeepSeek-V3's Bridge recipe builds an MLA model (multi_latent_attention); its profile's fields alone are
    # rejected by Megatron-Core ("mla_up_proj ... only supported with multi_latent_attention"). Without
    # Megatron-Bridge here (CI has megatron-core only), that is an environment gap: the baseline is validated
    # by the container preflight and by its own run, and every Bridge check reads "not checked: megatron_bridge
    # is not installed here (...)"
    out = tmp_path / "s"
    res = run_sweep([f"output_dir={out}", "model=deepseek_v3", "preflight=container", "poll_s=0.5"])
    assert res.returncode == 0, tail(res)
    (a,) = _variants(out)["a2a.ovl0.dw0"]["attempts"]
    assert a["status"] == "succeeded", a
    for doc in (out / "preflight" / "a2a.ovl0.dw0" / "effective_config.json",
                out / Path(a["log_dir"]).parent / "effective_config.json"):
        checks = json.loads(doc.read_text())["checks"]
        assert checks["verdict"] == "pass" and not checks["messages"], checks
        gap = "not checked: megatron_bridge is not installed here ("
        assert any(s.startswith(gap + "megatron.bridge.recipes.deepseek") and "multi_latent_attention" in s
                   for s in checks["not_run"]), checks["not_run"]
        assert any(s.startswith(gap + "megatron.bridge CommOverlapConfig.setup") for s in checks["not_run"])
        assert not any("is not importable" in s for s in checks["not_run"]), checks["not_run"]
    md = (out / "report" / "report.md").read_text()
    assert "| a2a.ovl0.dw0 | validated |" in md and "not run: not checked" not in md
    assert "Note: not checked: megatron_bridge is not installed here (megatron.bridge.recipes.deepseek" in md


@pytest.mark.megatron
@pytest.mark.slow
def test_a_restrictive_umask_is_honoured_by_every_file_of_the_sweep(tmp_path):
    out = tmp_path / "s"
    res = subprocess.run([sys.executable, "-m", "experiments.sweep", f"output_dir={out}", "poll_s=0.5"], cwd=REPO,
                         capture_output=True, text=True, timeout=900, preexec_fn=lambda: os.umask(0o077))
    assert res.returncode == 0, res.stderr[-3000:]
    files = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.name == "exit.json" for p in files) and any(p.name == "effective_config.json" for p in files)
    loose = {str(p.relative_to(out)): oct(p.stat().st_mode & 0o777) for p in files if p.stat().st_mode & 0o077}
    assert loose == {}


@pytest.mark.megatron
@pytest.mark.slow
def test_the_report_names_each_attempts_own_commit(tmp_path):
    out = tmp_path / "s"
    res = run_sweep([f"output_dir={out}", "poll_s=0.5"])
    assert res.returncode == 0, tail(res)
    doc = json.loads((out / "manifest.json").read_text())
    plan_sha = doc["git_sha"]
    other = "f" * 40  # what an attempt resumed from a checkout at another commit records
    attempt = doc["variants"][0]["attempts"][0]
    attempt["git_sha"] = other
    (out / "manifest.json").write_text(json.dumps(doc))
    res = subprocess.run([sys.executable, "-m", "analysis.report", str(out), "--quiet"], cwd=REPO,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    name = f"{doc['variants'][0]['name']} r{attempt['repeat']} a{attempt['attempt']}"
    md = (out / "report" / "report.md").read_text()
    assert f"git {plan_sha} (the plan's)" in md
    assert f"Attempts that ran another commit: git {other}: {name}" in md, md[:2000]
