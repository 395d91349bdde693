"""The main job on the embedded default (cluster=local, no GPU -> validate mode), for real: NeMo-Run's
LocalExecutor starts the payload, which runs real Megatron-Core checks; the sweep follows the isolation gates,
collects and writes the report. Also Ctrl-C-free bad input and resume on the local executor. Each sweep runs the
real CLI in a process of its own (tests/e2e/cli.py)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from experiments.sweep import main
from tests.e2e.cli import run_sweep, tail
from tests.e2e.leftovers import Leftovers, warm_libraries


def _manifest(d: Path) -> dict:
    return json.loads((d / "manifest.json").read_text())


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


# a sweep's payload checks each run against the real Megatron-Core (validate mode): megatron
@pytest.mark.megatron
@pytest.mark.slow
def test_default_sweep_validates_follows_gates_and_reports(tmp_path):
    out = tmp_path / "sweep"
    token = "tok-" + hashlib.sha256(str(tmp_path).encode()).hexdigest()[:16]
    # the payload fails with env_mismatch (exit 17) when a promised variable is missing: rc 0 means the job saw it
    res = run_sweep([f"output_dir={out}", "poll_s=0.5", f"+cluster.env_vars.MY_TOKEN={token}"])
    assert res.returncode == 0, tail(res)
    m = _manifest(out)
    assert m["mode"] == "validate"
    v = {x["name"]: x for x in m["variants"]}
    # stage 1 ran, the gate opened for alltoall and stage 3 ran after it
    for name in ("a2a.ovl0.dw0", "a2a.ovl1.dw0", "a2a.ovl1.dw1"):
        (a,) = v[name]["attempts"]
        assert a["status"] == "succeeded", (name, a)
        adir = (out / a["log_dir"]).parent  # a gated arm runs in a block of its own: its repeat is that block
        eff = json.loads((adir / "effective_config.json").read_text())
        assert eff["checks"]["verdict"] == "pass" and eff["versions"]["megatron_core"].startswith("0.19")
        assert list((adir / "logs").iterdir()) and (adir / "job.sh").read_text().startswith("#!/bin/bash")
    assert v["a2a.ovl1.dw1"]["attempts"][0]["submitted"] >= v["a2a.ovl1.dw0"]["attempts"][0]["finished"]
    # one validate process for the whole sweep (the libraries are imported once): the gated stage was handed to the
    # stage-1 process, which the conductor ended once everything had been launched
    (batch,) = (out / "nemo_run" / "validate").iterdir()
    assert len({v[n]["attempts"][0]["job_id"] for n in ("a2a.ovl0.dw0", "a2a.ovl1.dw0", "a2a.ovl1.dw1")}) == 1
    assert (batch / "more-1.json").exists() and (batch / "done").exists() and not (batch / "closed").exists()
    assert v["deepep.ovl1.dw0"]["status"] == "pruned" and v["deepep.ovl1.dw0"]["attempts"] == []
    summary = json.loads((out / "report" / "summary.json").read_text())
    statuses = {r["variant"]: r["status"] for r in summary["runs"]}
    assert {k: s for k, s in statuses.items() if s != "pruned"} == {
        "a2a.ovl0.dw0": "validated", "a2a.ovl1.dw0": "validated", "a2a.ovl1.dw1": "validated"}
    assert statuses["deepep.ovl1.dw0"] == "pruned"
    assert (out / "report" / "report.md").exists() and (out / "report" / "report.html").exists()
    _check_secret_mode_and_report(out, token)


def _check_secret_mode_and_report(out: Path, token: str) -> None:
    """On the real default sweep: a secret reaches the job but no file, the files have the umask's mode, and the
    report shows the mode, the gates and the plan's warnings once."""
    import os

    eff = json.loads((out / "variants" / "a2a.ovl0.dw0" / "attempt-1" / "effective_config.json").read_text())
    assert eff["env"]["MY_TOKEN"] == "***"  # the job's process had it (the payload masks what it records)
    for p in out.rglob("*"):
        if p.is_file():
            assert token.encode() not in p.read_bytes(), p
    umask = os.umask(0)
    os.umask(umask)
    for p in [*out.glob("report/*"), *out.glob("variants/*/attempt-*/*"), *out.glob("variants/*/*")]:
        if p.is_file():
            assert p.stat().st_mode & 0o777 == 0o666 & ~umask, p
    md = (out / "report" / "report.md").read_text()
    assert "mode=validate" in md
    assert not (out / "report" / "throughput.png").exists()  # no timings, no timing plot
    assert "## Isolation gates" in md and "gate overlap_passed opened" in md
    assert "## Plan warnings" in md and "cluster=local found no GPU" in md
    notes = [line for line in md.splitlines() if line.startswith("Note: ")]
    assert len(notes) == len(set(notes))  # a note shared by every run is shown once, not per run


@pytest.mark.megatron
@pytest.mark.slow
def test_no_thread_is_left_after_an_in_process_sweep(tmp_path):
    """The default main job, in this process: once main() returns, neither a torchx log-copy thread of its local
    jobs (torchx ends it when asked the final status of the finished job) nor any other thread it started runs."""
    warm_libraries()
    left = Leftovers()
    assert main([f"output_dir={tmp_path / 'sweep'}", "poll_s=0.5"]) == 0
    assert left.python() == []
    assert left.os() == {}
    m = _manifest(tmp_path / "sweep")
    assert {a["status"] for v in m["variants"] for a in v["attempts"]} == {"succeeded"}
    # every experiment was left (NeMo-Run's _DONE) after torchx closed its job's log files (its SUCCESS file)
    exps = list((tmp_path / "sweep" / "nemo_run" / "experiments").glob("*/*/_CONFIG"))
    assert exps and all((e.parent / "_DONE").is_file() and list(e.parent.rglob("SUCCESS")) for e in exps)


@pytest.mark.megatron
@pytest.mark.slow
def test_forced_invalid_variant_fails_with_library_message_then_resume_keeps_attempts(tmp_path):
    out = tmp_path / "sweep"
    args = [f"output_dir={out}", "poll_s=0.5", "preflight=off", "sweep=full", "dispatcher=alltoall",
            "overlap=on,off", "delay_wgrad=off", "model.expert_model_parallel_size=1"]
    res = run_sweep(args)
    assert res.returncode == 3, tail(res)
    summary = json.loads((out / "report" / "summary.json").read_text())
    runs = {r["variant"]: r for r in summary["runs"]}
    assert runs["a2a.ovl0.dw0"]["status"] == "validated"
    bad = runs["a2a.ovl1.dw0"]
    assert bad["status"] == "failed"
    assert any("only supported with expert model parallelism" in e for e in bad["evidence"]), bad
    before = _digest(out / "variants" / "a2a.ovl1.dw0" / "attempt-1")
    sweep_id = _manifest(out)["sweep_id"]
    # resume: only the failed run is resubmitted, as attempt 2; attempt 1 is kept byte for byte
    res = run_sweep(["action=run", f"sweep_id={sweep_id}", f"output_dir={out}", "poll_s=0.5"])
    assert res.returncode == 3, tail(res)
    m = {x["name"]: x for x in _manifest(out)["variants"]}
    assert [a["attempt"] for a in m["a2a.ovl1.dw0"]["attempts"]] == [1, 2]
    assert [a["attempt"] for a in m["a2a.ovl0.dw0"]["attempts"]] == [1]
    assert _digest(out / "variants" / "a2a.ovl1.dw0" / "attempt-1") == before


def test_status_and_unknown_sweep_id(tmp_path, capsys):
    # a check of the command line that starts no sweep: in-process, in the fast tier
    assert main(["action=status", "sweep_id=20990101-000000Z-abcdef", f"results_root={tmp_path}"]) == 2
    assert "not found" in capsys.readouterr().err


@pytest.mark.megatron
@pytest.mark.slow
def test_blocks_and_control_arm_on_the_local_executor(tmp_path):
    """Interleaved blocks for real on NeMo-Run's LocalExecutor (validate mode): 2 blocks of 3 arms, the control copy of the
    baseline in each, executed one at a time in the recorded order; the report lists the blocks."""
    out = tmp_path / "sweep"
    res = run_sweep([f"output_dir={out}", "poll_s=0.5", "sweep=full", "dispatcher=alltoall", "overlap=on,off",
                     "delay_wgrad=off", "repeats=2", "control=true", "block_seed=11"])
    assert res.returncode == 0, tail(res)
    m = _manifest(out)
    assert m["design"]["seed"] == 11 and m["design"]["control"] is True and len(m["blocks"]) == 2
    assert all(set(b["order"]) == {"a2a.ovl0.dw0", "a2a.ovl0.dw0.ctl", "a2a.ovl1.dw0"} for b in m["blocks"])
    v = {x["name"]: x for x in m["variants"]}
    assert v["a2a.ovl0.dw0.ctl"]["role"] == "control"
    # validate mode checks the runs in one process, in the recorded order: one job for all of them
    att = {(x["name"], a["repeat"]): a for x in m["variants"] for a in x["attempts"]}
    assert set(att) == {(r["variant"], r["repeat"]) for r in m["runs"]}
    assert len({a["job_id"] for a in att.values()}) == 1
    order = json.loads(next((out / "nemo_run" / "validate").glob("*/runs.json")).read_text())
    tasks = [re.match(r"^(.*)\.r(\d+)\.a\d+$", Path(r["log"]).stem).groups() for r in order["runs"]]
    assert [(n, int(k)) for n, k in tasks] == [(r["variant"], r["repeat"]) for r in m["runs"]]
    summary = json.loads((out / "report" / "summary.json").read_text())
    assert {(r["variant"], r["repeat"]) for r in summary["runs"]} == {(r["variant"], r["repeat"]) for r in m["runs"]}
    assert len(summary["design"]["blocks"]) == 2
    report = (out / "report" / "report.md").read_text()
    assert "## Blocks" in report and "a2a.ovl0.dw0.ctl" in report
