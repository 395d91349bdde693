"""The main job on a real Slurm cluster (the local one: slurm-wlm + munge + slurmdbd/MariaDB, 2 fake H100s),
through NeMo-Run, with the payload's validate mode against real Megatron-Core: the isolation sweep with its gates,
a failing job, a job cancelled mid-run, a job killed by a 1-minute time limit, a packed sweep, a resumed sweep, and a
partition Slurm refuses. Each must end with the right status and exit code and lose nothing. Every sweep runs
the real CLI in a process of its own (tests/e2e/cli.py)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.cli import run_sweep, tail

pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("slurm_cluster")]
# megatron where a job validates its run: the payload imports Megatron-Core inside the Slurm job
BASE = ["cluster=local_slurm", "allow_dirty=true", "poll_s=1"]


def _m(d: Path) -> dict:
    return json.loads((d / "manifest.json").read_text())


def _variants(d: Path) -> dict:
    return {v["name"]: v for v in _m(d)["variants"]}


def _summary_runs(d: Path) -> dict:
    return {(r["variant"], r["attempt"]): r for r in json.loads((d / "report" / "summary.json").read_text())["runs"]}


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _wait_running(job_id: str, timeout_s: float = 600) -> None:
    end = time.time() + timeout_s
    while time.time() < end:
        st = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True).stdout
        if st.strip() == "RUNNING":
            return
        time.sleep(1)
    raise AssertionError(f"job {job_id} did not start within {timeout_s} s")


@pytest.mark.megatron
@pytest.mark.slow
def test_isolation_sweep_on_slurm_validates_and_follows_gates(tmp_path):
    out = tmp_path / "s"
    res = run_sweep([*BASE, f"output_dir={out}", "sweep=isolation"])
    assert res.returncode == 0, tail(res)
    v = _variants(out)
    kept = [n for n, x in v.items() if x["status"] != "pruned"]
    assert set(kept) == {"a2a.ovl0.dw0", "a2a.ovl1.dw0", "a2a.ovl1.dw1"}
    for n in kept:
        (a,) = v[n]["attempts"]
        assert a["status"] == "succeeded" and a["job_id"].isdigit()
        adir = (out / a["log_dir"]).parent  # a gated arm runs in a block of its own: its repeat is that block
        assert (adir / "effective_config.json").exists()
        assert any(p.name.startswith("log-") for p in (adir / "logs").iterdir())
        assert "#SBATCH --partition=debug" in (adir / "job.sh").read_text()
    # the gate: stage 3 was submitted only after stage 1 finished
    assert v["a2a.ovl1.dw1"]["attempts"][0]["submitted"] >= v["a2a.ovl1.dw0"]["attempts"][0]["finished"]
    runs = _summary_runs(out)
    assert {k: r["status"] for k, r in runs.items() if r["status"] != "pruned"} == {
        (n, 1): "validated" for n in kept}


@pytest.mark.megatron
@pytest.mark.slow
def test_failing_job_exits_3_then_resume_resubmits_only_it(tmp_path):
    out = tmp_path / "s"
    args = [*BASE, f"output_dir={out}", "preflight=off", "sweep=full", "dispatcher=alltoall", "overlap=on,off",
            "delay_wgrad=off", "model.expert_model_parallel_size=1"]
    res = run_sweep(args)
    assert res.returncode == 3, tail(res)
    runs = _summary_runs(out)
    assert runs[("a2a.ovl0.dw0", 1)]["status"] == "validated"
    bad = runs[("a2a.ovl1.dw0", 1)]
    assert bad["status"] == "failed"
    assert any("expert model parallelism" in e for e in bad["evidence"]), bad
    assert _variants(out)["a2a.ovl1.dw0"]["attempts"][0]["status"] == "failed"
    before = _digest(out / "variants" / "a2a.ovl1.dw0" / "attempt-1")
    sid = _m(out)["sweep_id"]
    res = run_sweep([*BASE, "action=run", f"sweep_id={sid}", f"output_dir={out}"])
    assert res.returncode == 3, tail(res)
    v = _variants(out)
    assert [a["attempt"] for a in v["a2a.ovl1.dw0"]["attempts"]] == [1, 2]
    assert [a["attempt"] for a in v["a2a.ovl0.dw0"]["attempts"]] == [1]
    assert _digest(out / "variants" / "a2a.ovl1.dw0" / "attempt-1") == before


@pytest.mark.slow
def test_cancelled_mid_run_is_cancelled_and_collect_exits_3(tmp_path):
    out = tmp_path / "s"
    args = [*BASE, f"output_dir={out}", "sweep=full", "dispatcher=alltoall", "overlap=off", "delay_wgrad=off",
            "payload.hold_s=300", "payload.hold_at=start", "detach=true", "collect_job=false"]
    t0 = time.time()
    res = run_sweep(args)
    assert res.returncode == 0, tail(res)
    assert time.time() - t0 < 60  # detached: returned once queued, not after the 300 s hold
    (a,) = _variants(out)["a2a.ovl0.dw0"]["attempts"]
    assert a["status"] == "submitted"
    _wait_running(a["job_id"])
    sid = _m(out)["sweep_id"]
    res = run_sweep([*BASE, "action=cancel", f"sweep_id={sid}", f"output_dir={out}"])
    assert res.returncode == 0, tail(res)
    assert res.stderr.strip().splitlines()[-1] == f"exit code 0: cancelled 1 run(s) of sweep {sid}; nothing more " \
        "is launched", tail(res)
    res = run_sweep([*BASE, "action=status", f"sweep_id={sid}", f"output_dir={out}"])
    assert "is cancelled: 1 of 1 run(s) cancelled" in res.stderr.strip().splitlines()[-1], tail(res)
    res = run_sweep([*BASE, "action=collect", f"sweep_id={sid}", f"output_dir={out}"])
    assert res.returncode == 3, tail(res)
    (a,) = _variants(out)["a2a.ovl0.dw0"]["attempts"]
    assert a["status"] == "cancelled"
    r = _summary_runs(out)[("a2a.ovl0.dw0", 1)]
    assert r["status"] in ("failed", "incomplete") and "cancel" in (r["reason"] or "")
    assert list((out / "variants" / "a2a.ovl0.dw0" / "attempt-1" / "logs").iterdir())


@pytest.mark.slow
def test_time_limit_kills_the_job_and_is_reported(tmp_path):
    out = tmp_path / "s"
    args = [*BASE, f"output_dir={out}", "sweep=full", "dispatcher=alltoall", "overlap=off", "delay_wgrad=off",
            "payload.hold_s=600", "payload.hold_at=start", "cluster.time_limit=00:01:00"]
    res = run_sweep(args)
    assert res.returncode == 3, tail(res)
    (a,) = _variants(out)["a2a.ovl0.dw0"]["attempts"]
    assert a["status"] == "timeout"
    r = _summary_runs(out)[("a2a.ovl0.dw0", 1)]
    assert r["status"] == "failed" and "time" in (r["reason"] or "").lower()


@pytest.mark.megatron
@pytest.mark.slow
def test_packed_sweep_uses_one_allocation_per_stage(tmp_path):
    out = tmp_path / "s"
    res = run_sweep([*BASE, f"output_dir={out}", "sweep=isolation", "pack=true"])
    assert res.returncode == 0, tail(res)
    v = _variants(out)
    stage1 = {v[n]["attempts"][0]["job_id"] for n in ("a2a.ovl0.dw0", "a2a.ovl1.dw0")}
    assert len(stage1) == 1
    assert v["a2a.ovl1.dw1"]["attempts"][0]["job_id"] not in stage1
    for n in ("a2a.ovl0.dw0", "a2a.ovl1.dw0", "a2a.ovl1.dw1"):
        assert v[n]["attempts"][0]["status"] == "succeeded"


@pytest.mark.megatron
@pytest.mark.slow
def test_packed_blocks_use_one_allocation_per_block(tmp_path):
    """With pack=true each block (one run of every arm, in its recorded order) is one allocation."""
    out = tmp_path / "s"
    res = run_sweep([*BASE, f"output_dir={out}", "sweep=full", "dispatcher=alltoall", "overlap=on,off",
                     "delay_wgrad=off", "repeats=2", "pack=true"])
    assert res.returncode == 0, tail(res)
    m = json.loads((out / "manifest.json").read_text())
    jobs = {(v["name"], a["repeat"]): (a["job_id"], a["pack_step"]) for v in m["variants"] for a in v["attempts"]}
    per_block = [{jobs[(n, b["index"])][0] for n in b["order"]} for b in m["blocks"]]
    assert len(m["blocks"]) == 2 and all(len(j) == 1 for j in per_block) and per_block[0] != per_block[1]
    assert all(a["status"] == "succeeded" for v in m["variants"] for a in v["attempts"])


def test_unknown_partition_exits_5_and_leaves_nothing_queued(tmp_path):
    out = tmp_path / "s"
    res = run_sweep([*BASE, f"output_dir={out}", "sweep=full", "dispatcher=alltoall", "overlap=off", "delay_wgrad=off",
                     "cluster.partition=nosuchpartition"])
    assert res.returncode == 5, tail(res)
    assert "nosuchpartition" in res.stderr
    # no job of THIS sweep is queued (other sweeps may share the cluster): their scripts live under its folder
    q = subprocess.run(["squeue", "-h", "-o", "%o"], capture_output=True, text=True).stdout
    assert str(out) not in q
    assert all(not a.get("job_id") for v in _variants(out).values() for a in v["attempts"])


@pytest.mark.megatron
@pytest.mark.slow
def test_planted_secrets_reach_no_file_of_the_sweep(tmp_path, monkeypatch):
    """CONTRACTS §10: a secret from the submitting environment and one given as a cluster env var never appear
    in any file the tool writes (manifest, variant.json, job.sh, NeMo-Run's own sbatch scripts, logs)."""
    import secrets

    # made at run time, so that the values are not even in this file (which the job's code archive ships)
    env_secret, cli_secret = "planted-env-" + secrets.token_hex(6), "planted-cli-" + secrets.token_hex(6)
    monkeypatch.setenv("WANDB_API_KEY", env_secret)
    out = tmp_path / "s"
    res = run_sweep([*BASE, f"output_dir={out}", "sweep=full", "dispatcher=alltoall", "overlap=off", "delay_wgrad=off",
                     f"+cluster.env_vars.HF_TOKEN={cli_secret}"])
    assert res.returncode == 0, tail(res)
    files = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.name == "job.sh" for p in files) and any("sbatch" in p.name for p in files)
    for p in files:
        data = p.read_bytes()
        assert env_secret.encode() not in data and cli_secret.encode() not in data, p
    assert "HF_TOKEN=***" in json.dumps(_m(out)["overrides"])


@pytest.mark.megatron
@pytest.mark.slow
def test_nightly_submits_detached_and_collect_records_history(tmp_path):
    """The nightly flow: sweep=nightly returns once queued (detached, 3 repeats round-robin); action=collect later
    waits, collects, analyses and records the history database (SQLite here)."""
    out, db = tmp_path / "s", tmp_path / "history.db"
    args = [*BASE, f"output_dir={out}", "sweep=nightly", "dispatcher=alltoall", "overlap=on,off",
            "delay_wgrad=off", f"history.url=sqlite:///{db}", "collect_job=false"]  # collected by hand below
    res = run_sweep(args)
    assert res.returncode == 0, tail(res)
    last = res.stderr.strip().splitlines()[-1]  # what it did: nothing is judged yet
    assert last.startswith("exit code 0: detached: 6 run(s) queued in sweep ") and "good" not in last, last
    m = _m(out)
    order = [(r["variant"], r["repeat"]) for r in m["runs"]]
    # interleaved blocks: every arm once per block, in each block's recorded random order
    assert [r for _, r in order] == [0, 0, 1, 1, 2, 2]
    assert [n for n, _ in order] == [n for b in m["blocks"] for n in b["order"]]
    assert all(a["status"] in ("submitted", "running") for v in m["variants"] for a in v["attempts"])
    sid = m["sweep_id"]
    res = run_sweep([*BASE, "action=collect", f"sweep_id={sid}", f"output_dir={out}", f"history.url=sqlite:///{db}"])
    assert res.returncode == 0, tail(res)
    assert res.stderr.strip().splitlines()[-1] == "exit code 0: every kept run is good"
    assert "the history step (exit code 0): recorded as series" in (out / "report" / "report.md").read_text()
    v = _variants(out)
    assert all(len(v[n]["attempts"]) == 3 for n in ("a2a.ovl0.dw0", "a2a.ovl1.dw0"))
    # a repeat is a repeat, an attempt a retry: r0-r2 are each attempt 1, in their own folders
    for n in ("a2a.ovl0.dw0", "a2a.ovl1.dw0"):
        assert [(a["repeat"], a["attempt"]) for a in v[n]["attempts"]] == [(0, 1), (1, 1), (2, 1)]
        for d in ("attempt-1", "r1-attempt-1", "r2-attempt-1"):
            assert (out / "variants" / n / d / "effective_config.json").is_file()
    names = {r["name"] for r in json.loads((out / "report" / "summary.json").read_text())["runs"]}
    assert {"a2a.ovl0.dw0.r0", "a2a.ovl0.dw0.r1", "a2a.ovl0.dw0.r2"} <= names
    assert db.exists() and (out / "report" / "history.json").exists() and (out / "report" / "history.html").exists()
    import sqlite3

    with sqlite3.connect(db) as con:
        tables = {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
        run_table = next(t for t in tables if "run" in t)
        assert con.execute(f"select count(*) from {run_table}").fetchone()[0] == 6
