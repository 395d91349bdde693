"""The report CLI (CONTRACTS §7) on a synthetic sweep folder and on loose files: outputs, summary.json schema,
run.json per attempt, exit codes (CONTRACTS §5), bad input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from analysis.api import analyze_sweep, write_report
from analysis.measure.results import Summary
from analysis.report import main
from tests.analysis.synth import FIXTURES, effective_config, make_sweep, training_log, write_log
from tests.launchers.conftest import IN_CI

REPO = Path(__file__).resolve().parents[2]
RUN_KEYS = {"name", "variant", "attempt", "repeat", "status", "reason", "evidence", "flags", "iterations",
            "train_iters", "step_time_ms", "tflops_per_gpu", "tokens_per_s_per_gpu", "peak_mem_gb", "loss", "hosts",
            "files"}
CMP_KEYS = {"variant", "baseline", "group", "speedup", "verdict", "loss_parity", "notes"}
SWEEP_KEYS = {"sweep_id", "name", "git_sha", "created", "model", "cluster", "container"}


def check_schema(d: dict) -> None:
    """summary.json per CONTRACTS §7: every contract field present (unknown -> null), exact nested shapes."""
    assert d["schema_version"] == 1
    assert d["sweep"] is None or SWEEP_KEYS <= set(d["sweep"])
    for r in d["runs"]:
        assert RUN_KEYS <= set(r), RUN_KEYS - set(r)
        assert set(r["iterations"]) == {"total", "steady", "skipped"}
        assert set(r["step_time_ms"]) == {"median", "p90", "ci_low", "ci_high", "n"}
        for k in ("tflops_per_gpu", "tokens_per_s_per_gpu"):
            assert r[k] is None or set(r[k]) == {"median", "ci_low", "ci_high"}
        assert r["loss"] is None or set(r["loss"]) == {"first", "last"}
        assert isinstance(r["evidence"], list) and isinstance(r["flags"], list)
        assert r["status"] in {"ok", "ok_with_warning", "validated", "failed", "incomplete", "insufficient_iterations",
                               "invalid_variant", "pruned", "skipped"}
    for c in d["comparisons"]:
        assert CMP_KEYS <= set(c)
        assert set(c["speedup"]) == {"value", "ci_low", "ci_high"}
        assert set(c["loss_parity"]) == {"max_rel_diff", "ok"}
        assert c["verdict"] in {"faster", "slower", "no_significant_difference", "not_comparable"}


def steps(center: float, seed: int):
    rng = np.random.default_rng(seed)
    return lambda i: (3000.0 if i == 1 else center + float(rng.normal(0, 4)))


A2A0 = {"dispatcher": "alltoall", "overlap": False, "delay_wgrad": False}
A2A1 = {"dispatcher": "alltoall", "overlap": True, "delay_wgrad": False}
DEEP = {"dispatcher": "deepep", "overlap": True, "delay_wgrad": False}


def attempt(lines, requested, name, **kw):
    return {"lines": lines, "effective": effective_config(name, requested), **kw}


@pytest.fixture
def sweep(tmp_path):
    return make_sweep(tmp_path, [
        {"name": "a2a.ovl0.dw0", "dispatcher": "alltoall", "overlap": False, "delay_wgrad": False, "role": "baseline",
         "attempts": [attempt(training_log(30, step=steps(500, 1)), A2A0, "a2a.ovl0.dw0")]},
        {"name": "a2a.ovl1.dw0", "dispatcher": "alltoall", "overlap": True, "delay_wgrad": False,
         "attempts": [attempt(training_log(12, 30, done=False,
                                           tail=["[rank3]: RuntimeError: NCCL error: unhandled system error"]),
                              A2A1, "a2a.ovl1.dw0", status="failed", exit_code=1),
                      attempt(training_log(30, step=steps(420, 2)), A2A1, "a2a.ovl1.dw0")]},
        {"name": "deepep.ovl1.dw0", "dispatcher": "deepep", "overlap": True, "delay_wgrad": False,
         "attempts": [attempt(training_log(15, 30, done=False,
                                           tail=["[rank12]: RuntimeError: DeepEP error: timeout (dispatch CPU)"]),
                              DEEP, "deepep.ovl1.dw0", status="failed", exit_code=1)]},
        {"name": "a2a.ovl0.dw1", "dispatcher": "alltoall", "overlap": False, "delay_wgrad": True, "status": "pruned",
         "reasons": ["delay_wgrad_compute needs overlap_moe_expert_parallel_comm"]},
        {"name": "a2a.ovl1.dw1", "dispatcher": "alltoall", "overlap": True, "delay_wgrad": True, "status": "gated"},
    ])


def test_sweep_folder_report(sweep, capsys):
    assert main([str(sweep), "--quiet"]) == 3
    assert capsys.readouterr().out == ""
    out = sweep / "report"
    d = json.loads((out / "summary.json").read_text())
    check_schema(d)
    assert d["sweep"]["sweep_id"] == "20261129-160000Z-a1b2c3" and d["exit_code"] == 3
    runs = {r["name"]: r for r in d["runs"]}
    assert runs["a2a.ovl0.dw0"]["status"] == "ok" and runs["a2a.ovl1.dw0"]["attempt"] == 2
    assert runs["deepep.ovl1.dw0"]["status"] == "failed" and runs["deepep.ovl1.dw0"]["reason"] == "dispatcher_timeout"
    assert runs["a2a.ovl0.dw1"]["status"] == "pruned" and runs["a2a.ovl0.dw1"]["reason"] == "preflight_reject"
    assert runs["a2a.ovl0.dw1"]["evidence"] == ["delay_wgrad_compute needs overlap_moe_expert_parallel_comm"]
    assert runs["a2a.ovl1.dw1"]["status"] == "skipped"
    assert runs["a2a.ovl0.dw0"]["tokens_per_s_per_gpu"]["median"] > 0
    assert runs["a2a.ovl0.dw0"]["files"] == ["variants/a2a.ovl0.dw0/attempt-1/logs/log-a2a.ovl0.dw0_101_0.out"]
    cmp = {c["variant"]: c for c in d["comparisons"]}
    assert cmp["a2a.ovl1.dw0"]["verdict"] == "faster" and cmp["a2a.ovl1.dw0"]["speedup"]["value"] > 1.1
    assert cmp["deepep.ovl1.dw0"]["verdict"] == "not_comparable"
    assert {b["dispatcher"]: b["failure_rate"] for b in d["backends"]} == {"alltoall": 0.0, "deepep": 1.0}
    assert any("attempt-1 superseded" in n for n in d["notes"])
    for name in ("report.md", "report.html", "speedup.png", "throughput.png", "step_time.png", "loss.png"):
        assert (out / name).stat().st_size > 0
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 4 and "src=\"http" not in html and "<link" not in html
    md = (out / "report.md").read_text()
    assert "dispatcher_timeout" in md and "| deepep | 1 | 0 | 1 | 100% |" in md
    # run.json next to the logs of every attempt, superseded ones included
    first = json.loads((sweep / "variants/a2a.ovl1.dw0/attempt-1/run.json").read_text())
    assert first["status"] == "failed" and first["reason"] == "nccl_error"  # NCCL family (issue 14)
    second = json.loads((sweep / "variants/a2a.ovl1.dw0/attempt-2/run.json").read_text())
    assert len(second["step_times_ms"]) == second["iterations"]["steady"] == 27
    assert not list(sweep.rglob(".*.tmp"))


def test_python_api_round_trip(sweep, tmp_path):
    summary = analyze_sweep(sweep, warmup=5)
    assert summary.exit_code == 3
    assert next(r for r in summary.runs if r.variant == "a2a.ovl0.dw0").iterations_steady == 25
    paths = write_report(summary, tmp_path / "rep")
    assert {p.name for p in paths} >= {"summary.json", "report.md", "report.html"}
    back = Summary.from_json(json.loads((tmp_path / "rep" / "summary.json").read_text()))
    assert back.to_json() == summary.to_json()


def pair_sweep(root, variant_ms: float):
    """A baseline at 500 ms and an overlap variant at ``variant_ms``, both complete."""
    return make_sweep(root, [
        {"name": "a2a.ovl0.dw0", "dispatcher": "alltoall", "overlap": False, "delay_wgrad": False, "role": "baseline",
         "attempts": [attempt(training_log(30, step=steps(500, 1)), A2A0, "a2a.ovl0.dw0")]},
        {"name": "a2a.ovl1.dw0", "dispatcher": "alltoall", "overlap": True, "delay_wgrad": False,
         "attempts": [attempt(training_log(30, step=steps(variant_ms, 2)), A2A1, "a2a.ovl1.dw0")]}])


def test_exit_0_and_4(tmp_path):
    assert main([str(pair_sweep(tmp_path / "g", 450)), "--quiet"]) == 0
    slow = pair_sweep(tmp_path / "s", 560)
    assert main([str(slow), "--quiet"]) == 4
    assert json.loads((slow / "report" / "summary.json").read_text())["comparisons"][0]["verdict"] == "slower"


def test_validate_mode_sweep(tmp_path):
    sw = make_sweep(tmp_path, [
        {"name": "a2a.ovl0.dw0", "dispatcher": "alltoall", "overlap": False, "delay_wgrad": False, "role": "baseline",
         "attempts": [{"lines": ["validate mode"], "effective": effective_config("a2a.ovl0.dw0", A2A0, mode="validate")}]},
    ], mode="validate")
    assert main([str(sw), "--quiet"]) == 0
    assert json.loads((sw / "report" / "summary.json").read_text())["runs"][0]["status"] == "validated"


def test_loose_files_restarts_and_baseline(tmp_path, capsys):
    logs = tmp_path / "logs"
    write_log(logs / "log-base_55_0.out", training_log(30, step=steps(500, 1)))
    write_log(logs / "log-ovl_56_0.out", training_log(14, 30, step=steps(420, 2), done=False,
                                                      tail=["slurmstepd: error: *** JOB 56 ON n1 CANCELLED AT "
                                                            "2026-11-29T15:08:20 DUE TO TIME LIMIT ***"]))
    write_log(logs / "log-ovl_56_1.out", training_log(30, step=steps(420, 3)))
    out = tmp_path / "rep"
    assert main([str(logs), "--out", str(out), "--baseline", "log-base"]) == 0
    assert "log-ovl vs log-base" in capsys.readouterr().out
    d = json.loads((out / "summary.json").read_text())
    check_schema(d)
    assert d["sweep"] is None
    runs = {r["name"]: r for r in d["runs"]}
    assert set(runs) == {"log-base", "log-ovl"} and len(runs["log-ovl"]["files"]) == 2
    assert runs["log-ovl"]["files"][0].endswith("_56_0.out") and "restarted" in runs["log-ovl"]["flags"]
    assert d["comparisons"][0]["verdict"] == "faster"


def test_loose_files_baseline_from_effective_config(tmp_path):
    base, var = tmp_path / "base", tmp_path / "var"
    write_log(base / "run.log", training_log(30, step=steps(500, 1)))
    (base / "effective_config.json").write_text(json.dumps(effective_config("a2a.ovl0.dw0", A2A0)))
    write_log(var / "run.log", training_log(30, step=steps(400, 2)))
    (var / "effective_config.json").write_text(json.dumps(effective_config("a2a.ovl1.dw0", A2A1)))
    out = tmp_path / "rep"
    assert main([str(base / "run.log"), str(var / "run.log"), "--out", str(out), "--quiet"]) == 0
    d = json.loads((out / "summary.json").read_text())
    assert {r["name"] for r in d["runs"]} == {"base/run", "var/run"}
    assert d["comparisons"][0]["variant"] == "a2a.ovl1.dw0" and d["comparisons"][0]["baseline"] == "a2a.ovl0.dw0"


def test_loose_files_without_baseline_have_no_comparisons(tmp_path):
    out = tmp_path / "rep"
    assert main([str(FIXTURES), "--out", str(out), "--quiet"]) == 3  # the bridge-assert fixture failed
    d = json.loads((out / "summary.json").read_text())
    check_schema(d)
    assert d["comparisons"] == [] and "no baseline" in d["notes"][0]
    runs = {r["name"]: r for r in d["runs"]}
    assert runs["h200_mbridge_tiny_moe_baseline"]["status"] == "ok"
    assert runs["h200_mbridge_overlap_ep1_bridge_assert"]["reason"] == "assertion"


def test_bad_input_gets_a_note_and_the_rest_of_the_report(tmp_path):
    logs = tmp_path / "logs"
    write_log(logs / "good.log", training_log(30))
    (logs / "empty.log").write_bytes(b"")
    (logs / "garbage.log").write_bytes(os.urandom(20000))
    (logs / "other_tool.log").write_text("Epoch 1/3\nval_loss: 0.1\n")
    (logs / "interleaved.log").write_text("\n".join(
        line[:120] + "[rank3]: x" + line[120:] if "iteration" in line else line
        for line in training_log(30, bridge_step_lines=False)) + "\n")
    (logs / "huge.log").write_text("y" * (2 << 20) + "\n" + "\n".join(training_log(30)) + "\n")
    unreadable = logs / "unreadable.log"
    os.symlink(unreadable, unreadable)
    out = tmp_path / "rep"
    assert main([str(logs), "--out", str(out), "--quiet"]) == 3
    runs = {r["name"]: r for r in json.loads((out / "summary.json").read_text())["runs"]}
    assert runs["good"]["status"] == "ok" and runs["huge"]["status"] == "ok"
    assert any("longer than" in n for n in runs["huge"]["notes"])
    assert runs["empty"]["status"] == "incomplete" and any("empty file" in n for n in runs["empty"]["notes"])
    assert runs["garbage"]["status"] == "incomplete"
    assert runs["other_tool"]["reason"] == "unrecognized_log"
    assert runs["interleaved"]["iterations"]["total"] == 0 and runs["interleaved"]["status"] == "incomplete"
    assert any("30 damaged iteration line(s)" in n for n in runs["interleaved"]["notes"])
    assert runs["unreadable"]["reason"] == "logs_unavailable"


@pytest.mark.parametrize("args,message", [
    (["/no/such/path"], "no such file or folder"),
    (["{logs}", "--baseline", "nope"], "names no run"),
    (["{logs}", "--warmup", "-2"], "--warmup must be >= 0"),
    (["{logs}", "--warmup", "many"], "invalid int value"),
    (["{empty}"], "no log files under"),
    ([], "required"),
])
def test_usage_errors_exit_2(tmp_path, capsys, args, message):
    logs = tmp_path / "logs"
    write_log(logs / "a.log", training_log(30))
    (tmp_path / "empty").mkdir()
    argv = [a.format(logs=logs, empty=tmp_path / "empty") for a in args]
    assert main(argv + ["--out", str(tmp_path / "rep")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "rep").exists()


def test_module_entry_point(tmp_path):
    logs = tmp_path / "l"
    write_log(logs / "a.log", training_log(30))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    ok = subprocess.run([sys.executable, "-m", "analysis.report", str(logs), "--out", str(tmp_path / "r"), "--quiet"],
                        cwd=tmp_path, env=env, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run([sys.executable, "-m", "analysis.report", str(tmp_path / "missing")], cwd=tmp_path, env=env,
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "no such file or folder" in bad.stderr


def test_real_fixture_as_a_sweep_attempt(tmp_path):
    """The real H200 baseline log inside a sweep folder: ok, 27 steady iterations, peak 1.77 GB, training done."""
    sw = make_sweep(tmp_path, [{"name": "a2a.ovl0.dw0", "dispatcher": "alltoall", "overlap": False,
                                "delay_wgrad": False, "role": "baseline", "attempts": [{"lines": None, "effective": None}]}])
    shutil.copy(FIXTURES / "h200_mbridge_tiny_moe_baseline.log", sw / "variants/a2a.ovl0.dw0/attempt-1/logs/")
    summary = analyze_sweep(sw)
    r = summary.runs[0]
    assert (r.status, r.iterations_steady, r.train_iters) == ("ok", 27, 30)
    assert r.peak_mem_gb == pytest.approx(1.7664) and r.details.get("training_done")


def test_c05_fallback_run_is_kept_out_of_the_deepep_column_and_ceiling_from_profile(tmp_path):
    fallback = ("DeepEP is only applicable to Ampere, Hopper, and Blackwell (B200/B300) GPUs. Current GPU: "
                "NVIDIA GB200. Falling back to alltoall.")
    sw = make_sweep(tmp_path, [
        {"name": "a2a.ovl0.dw0", "dispatcher": "alltoall", "overlap": False, "delay_wgrad": False, "role": "baseline",
         "attempts": [attempt(training_log(30, step=steps(500, 1)), A2A0, "a2a.ovl0.dw0")]},
        {"name": "a2a.ovl1.dw0", "dispatcher": "alltoall", "overlap": True, "delay_wgrad": False,
         "attempts": [attempt(training_log(30, step=steps(400, 2)), A2A1, "a2a.ovl1.dw0")]},
        {"name": "deepep.ovl1.dw0", "dispatcher": "deepep", "overlap": True, "delay_wgrad": False,
         "attempts": [{"lines": training_log(30, step=steps(300, 3), setup=[fallback]), "effective": None}]}])
    (sw / "variants/a2a.ovl0.dw0/attempt-1/profile.json").write_text('{"a2a_ms": 200.0}')
    assert main([str(sw), "--quiet"]) == 3
    d = json.loads((sw / "report" / "summary.json").read_text())
    runs = {r["name"]: r for r in d["runs"]}
    deep = runs["deepep.ovl1.dw0"]
    assert (deep["status"], deep["reason"]) == ("invalid_variant", "dispatcher_fallback")
    assert deep["tflops_per_gpu"] is None and deep["step_time_ms"]["median"] is None
    assert deep["details"]["measured_not_as_labelled"]["step_time_ms"] == pytest.approx(300, abs=5)
    cmp = {c["variant"]: c for c in d["comparisons"]}
    assert cmp["deepep.ovl1.dw0"]["verdict"] == "not_comparable"
    ceiling = cmp["a2a.ovl1.dw0"]["overlap_ceiling"]
    assert ceiling["a2a_ms"] == 200.0 and ceiling["ceiling"] == pytest.approx(500 / 300, rel=0.02)
    assert 0 < ceiling["fraction_achieved"] < 1


def test_cli_option_validation(tmp_path, capsys):
    logs = tmp_path / "logs"
    write_log(logs / "a.log", training_log(30))
    assert main([str(logs), "--bootstrap", "5", "--out", str(tmp_path / "r")]) == 2
    assert "--bootstrap must be >= 100" in capsys.readouterr().err
    assert main([str(logs), "--tolerance", "2", "--out", str(tmp_path / "r")]) == 2


def test_out_writes_only_under_out_even_on_a_read_only_sweep(sweep, tmp_path):
    """Issue 13 item 7: a colleague's read-only sweep on shared storage: --out writes there and nothing inside."""
    import hashlib

    def digest(folder):
        return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(folder.rglob("*")) if p.is_file()}
    before = digest(sweep)
    ro = tmp_path / "ro"
    ro.mkdir()
    mounted = subprocess.run(["mount", "--bind", "-o", "ro", str(sweep), str(ro)], capture_output=True).returncode == 0
    src = ro if mounted else sweep
    try:
        out = tmp_path / "elsewhere"
        assert main([str(src), "--out", str(out), "--quiet"]) == 3
        assert (out / "summary.json").is_file() and (out / "report.md").is_file()
        assert digest(sweep) == before and not list(sweep.rglob("run.json"))
    finally:
        if mounted:
            subprocess.run(["umount", str(ro)], capture_output=True)


def test_failed_run_report_shows_the_causal_chain(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(FIXTURES / "timeline" / "exception_then_watchdogs_torchrun.log", logs / "crash.log")
    out = tmp_path / "rep"
    assert main([str(logs), "--out", str(out), "--quiet"]) == 3
    run = json.loads((out / "summary.json").read_text())["runs"][0]
    assert run["reason"] == "traceback" and run["timeline"]["cause"]["rank"] == 3
    assert {e["reason"] for e in run["timeline"]["consequences"]} >= {"nccl_timeout"}
    assert run["launch"]["launcher"] == "torchrun"
    md = (out / "report.md").read_text()
    assert "Causal chain (launcher: torchrun)" in md
    cause = next(line for line in md.splitlines() if line.startswith("| cause |"))
    assert "| traceback | 3 |" in cause and "ValueError" in cause
    assert any(line.startswith("| then | nccl_timeout |") and "10:10:4" in line for line in md.splitlines())
    assert "Causal chain" in (out / "report.html").read_text()


def test_a_read_only_sweep_without_out_exits_2_naming_it_and_writes_nothing(sweep, tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    if subprocess.run(["mount", "--bind", "-o", "ro", str(sweep), str(ro)], capture_output=True).returncode:
        why = "a read-only bind mount needs root (mount(2)); permissions do not stop root"
        if IN_CI:  # CI runs as root: a failed mount there is a real failure
            pytest.fail(why)
        pytest.skip(why)
    try:
        assert main([str(ro)]) == 2
        err = capsys.readouterr().err
        assert f"{ro} is not writable" in err and "pass --out DIR" in err and "Traceback" not in err
        assert not (sweep / "report").exists() and not list(sweep.rglob("run.json"))
    finally:
        subprocess.run(["umount", str(ro)], capture_output=True)


@pytest.mark.parametrize("kind", ["sweep", "logs"])
def test_out_naming_an_existing_file_exits_2_and_leaves_it(sweep, tmp_path, capsys, kind):
    target = tmp_path / "report.txt"
    target.write_text("mine")
    src = sweep if kind == "sweep" else sweep / "variants"
    assert main([str(src), "--out", str(target)]) == 2
    err = capsys.readouterr().err
    assert f"--out {target} is a file, not a folder" in err and "Traceback" not in err
    assert target.read_text() == "mine" and not list(sweep.rglob("run.json"))
