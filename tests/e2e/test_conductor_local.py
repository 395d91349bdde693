"""One conductor per sweep, adoption after any death and cancel from another shell, on the local executor for
real (NeMo-Run's LocalExecutor, the payload validating against Megatron-Core): two resumes at once, the conductor
SIGKILLed while its payload runs, SIGTERM/SIGHUP, ``action=cancel`` from a second process, a gate that reopens."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from contracts.procfs import process_alive
from tests.e2e.cli import run_sweep, spawn_sweep, tail

pytestmark = [pytest.mark.megatron, pytest.mark.slow]
HOLD = ["payload.hold_s=6", "payload.hold_at=start"]  # single local jobs that live long enough to be hit


def _m(d: Path) -> dict:
    return json.loads((d / "manifest.json").read_text())


def _attempts(d: Path) -> dict[str, list[dict]]:
    return {v["name"]: v["attempts"] for v in _m(d)["variants"] if v["status"] != "pruned"}


def _running(out: Path, timeout_s: float = 120) -> tuple[str, dict]:
    """The first attempt recorded running with its process (variant, attempt) once the payload has started."""
    end = time.time() + timeout_s
    while time.time() < end:
        try:
            for name, atts in _attempts(out).items():
                for a in atts:
                    if a.get("pid") and a["status"] in ("submitted", "running") and process_alive(a["pid"]):
                        return name, a
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    raise AssertionError(f"no attempt of {out} ran within {timeout_s} s")


def _resume(out: Path, *extra: str):
    return run_sweep(["action=run", f"sweep_id={_m(out)['sweep_id']}", f"output_dir={out}", "poll_s=0.2", *extra])


def _whole(out: Path) -> None:
    """Every kept run has exactly one attempt, succeeded, collected (logs and effective config)."""
    atts = _attempts(out)
    assert atts and all([a["attempt"] for a in v] == [1] and v[0]["status"] == "succeeded"
                        for v in atts.values()), atts
    for name in atts:
        adir = next((out / "variants" / name).glob("*attempt-1"))  # r<repeat>-attempt-1 past block 0
        assert (adir / "effective_config.json").is_file() and any((adir / "logs").iterdir()), adir


def test_two_resumes_at_once_never_submit_a_run_twice(tmp_path):
    out = tmp_path / "s"
    res = run_sweep([f"output_dir={out}", "action=plan"])
    assert res.returncode == 0, tail(res)
    sid = _m(out)["sweep_id"]
    procs = [spawn_sweep(["action=run", f"sweep_id={sid}", f"output_dir={out}", "poll_s=0.2"]) for _ in range(2)]
    res2 = [(p.wait(timeout=300), *p.communicate()) for p in procs]
    assert sorted(rc for rc, *_ in res2) == [0, 2], [(rc, err[-2000:]) for rc, _, err in res2]
    loser = next(err for rc, _, err in res2 if rc == 2)
    winner = next(p for p, (rc, *_) in zip(procs, res2, strict=True) if rc == 0)
    assert f"is being driven by pid {winner.pid} on " in loser and "(action=resume, since " in loser, loser
    _whole(out)


def test_sigkill_while_the_payload_runs_then_one_resume_adopts_it(tmp_path):
    out = tmp_path / "s"
    p = spawn_sweep([f"output_dir={out}", "poll_s=0.2", *HOLD])
    name, a = _running(out)
    p.kill()
    p.wait(timeout=30)
    assert process_alive(a["pid"], a.get("pid_start"))  # the payload outlives its conductor
    res = _resume(out)
    assert res.returncode == 0, tail(res)
    assert "took over the lease of pid" in res.stderr
    _whole(out)  # the killed conductor's run was adopted (attempt 1 succeeded), never started again
    assert _attempts(out)[name][0]["job_id"] == a["job_id"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_stop_the_conductor_as_ctrl_c_does(tmp_path, sig):
    out = tmp_path / "s"
    p = spawn_sweep([f"output_dir={out}", "poll_s=0.2", *HOLD])
    name, a = _running(out)
    os.kill(p.pid, sig)
    assert p.wait(timeout=60) == 130, p.communicate()[1][-3000:]
    assert not process_alive(a["pid"], a.get("pid_start"))  # locally the runs are cancelled, not left behind
    att = _attempts(out)[name][0]
    assert att["status"] == "cancelled" and "interrupted" in att["flags"], att
    res = _resume(out)
    assert res.returncode == 0, tail(res)


def test_cancel_from_another_shell_stops_a_local_sweep_and_nothing_launches_after_it(tmp_path):
    out = tmp_path / "s"
    p = spawn_sweep([f"output_dir={out}", "poll_s=0.2", *HOLD])
    name, a = _running(out)
    res = run_sweep(["action=cancel", f"sweep_id={_m(out)['sweep_id']}", f"output_dir={out}"])
    assert res.returncode == 0, tail(res)
    assert p.wait(timeout=60) == 130, p.communicate()[1][-3000:]
    assert f"stopped {name}.r0.a1 (job {a['job_id']}, was " in res.stdout, res.stdout
    assert "cancelled 1 unfinished run(s) of sweep" in res.stdout or "cancelled" in res.stdout.splitlines()[-1]
    assert not process_alive(a["pid"], a.get("pid_start"))
    time.sleep(1)
    atts = [x for v in _attempts(out).values() for x in v]
    assert all(x["status"] == "cancelled" for x in atts), atts  # no run launched after the cancel
    assert not (out / "cancel.json").exists()


def test_cancel_after_the_conductor_died_stops_its_payload(tmp_path):
    out = tmp_path / "s"
    p = spawn_sweep([f"output_dir={out}", "poll_s=0.2", *HOLD])
    name, a = _running(out)
    p.kill()
    p.wait(timeout=30)
    res = run_sweep(["action=cancel", f"sweep_id={_m(out)['sweep_id']}", f"output_dir={out}"])
    assert res.returncode == 0, tail(res)
    assert f"stopped {name}.r0.a1 (job {a['job_id']}, was " in res.stdout, res.stdout
    assert not process_alive(a["pid"], a.get("pid_start"))


def test_a_closed_gate_reopens_when_a_resume_makes_its_arm_pass(tmp_path):
    out = tmp_path / "s"
    p = spawn_sweep([f"output_dir={out}", "poll_s=0.2", *HOLD])
    # the overlap arm's job dies behind the tool's back: the arm fails, the gate closes, stage 3 is skipped
    end = time.time() + 120
    while time.time() < end:
        try:
            a = next((x for x in _attempts(out).get("a2a.ovl1.dw0", []) if x.get("pid")), None)
        except (OSError, ValueError):
            a = None
        if a and process_alive(a["pid"]):
            os.killpg(a["pid"], signal.SIGKILL)
            break
        time.sleep(0.1)
    assert p.wait(timeout=200) == 3, p.communicate()[1][-3000:]
    gated = {v["name"]: v for v in _m(out)["variants"]}["a2a.ovl1.dw1"]
    assert gated["status"] == "skipped", gated
    res = _resume(out)
    assert res.returncode == 0, tail(res)
    v = {x["name"]: x for x in _m(out)["variants"]}
    assert v["a2a.ovl1.dw1"]["status"] == "planned" and v["a2a.ovl1.dw1"]["attempts"][0]["status"] == "succeeded"
    assert [s["status"] for s in _m(out)["stages"] if s.get("gate")] == ["open"]
    gates = json.loads((out / "report" / "summary.json").read_text())["sweep"]["gates"]
    reason = next(g["reason"] for g in gates if g["variant"] == "a2a.ovl1.dw1")
    assert "opened" in reason and "closed" not in reason, reason
