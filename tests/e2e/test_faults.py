"""Fault injection on the real local Slurm: each case ends with nothing lost (every completed run's logs
and metrics present), nothing submitted twice (each Slurm job name of the sweep once) and the right exit code.

Faults: two sweeps racing for one folder; two resumes of one sweep at once (the lease: one submits, the other exits
2); the conductor SIGKILLed between sbatch and the manifest write, then resumed; the conductor SIGKILLed at twenty
random points, each sweep ending whole after one resume; slurmctld restarted mid-sweep; a job cancelled behind the tool's back; the disk filling up while the report
is written (a small tmpfs); manifest.json truncated or not JSON."""

from __future__ import annotations

import collections
import hashlib
import json
import random
import subprocess
import time
from pathlib import Path

import pytest

from experiments.sweep import main
from tests.e2e.cli import REPO, run_sweep, spawn_faulty_sweep, spawn_sweep, tail

pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("slurm_cluster")]
# megatron where a job validates its run: the payload imports Megatron-Core inside the Slurm job
BASE = ["cluster=local_slurm", "allow_dirty=true", "poll_s=1", "sweep=full", "dispatcher=alltoall",
        "overlap=on,off", "delay_wgrad=off"]


def _m(d: Path) -> dict:
    return json.loads((d / "manifest.json").read_text())


def _attempts(d: Path) -> dict[str, list[dict]]:
    return {v["name"]: v["attempts"] for v in _m(d)["variants"] if v["status"] != "pruned"}


def jobs_of(out: Path) -> collections.Counter:
    """Slurm job name -> how many jobs of that name ran from this sweep folder (sacct and squeue)."""
    home = str(out.resolve()) + "/"
    rows = subprocess.run(["sacct", "-X", "-n", "-P", "-S", "now-2hours", "-o", "JobID,JobName,SubmitLine"],
                          capture_output=True, text=True).stdout.splitlines()
    rows += subprocess.run(["squeue", "-h", "-o", "%i|%j|%o"], capture_output=True, text=True).stdout.splitlines()
    seen = {}
    for line in rows:
        job, name, script = (line.split("|") + ["", "", ""])[:3]
        if home in script:
            seen[job.split("_")[0]] = name
    return collections.Counter(seen.values())


def assert_nothing_twice(out: Path) -> None:
    jobs = jobs_of(out)
    assert jobs and max(jobs.values()) == 1, jobs
    recorded = [a["job_id"] for atts in _attempts(out).values() for a in atts if a.get("job_id")]
    assert len(recorded) == len(set(recorded)) == sum(jobs.values()), (recorded, jobs)


def assert_nothing_lost(out: Path) -> None:
    runs = {(r["variant"], r["attempt"]): r for r in json.loads((out / "report" / "summary.json").read_text())["runs"]}
    done = 0
    for name, atts in _attempts(out).items():
        for a in atts:
            if a["status"] != "succeeded":
                continue
            done += 1
            prefix = f"r{a['repeat']}-" if a.get("repeat") else ""  # a stage-3 arm's block is repeat 1
            adir = out / "variants" / name / f"{prefix}attempt-{a['attempt']}"
            assert any(p.name.startswith("log-") for p in (adir / "logs").iterdir()), adir
            assert (adir / "effective_config.json").is_file() and (adir / "run.json").is_file()
            assert runs[(name, a["attempt"])]["status"] == "validated"
    assert done


def _digest(folder: Path, skip: str = "\0") -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and not str(p.relative_to(folder)).startswith(skip)}


def _wait_jobs_running(out: Path, n: int, timeout_s: float = 600) -> list[str]:
    """The first ``n`` running jobs of the sweep in ``out`` ("id|name"); the local cluster is shared by the other
    Slurm tests, so a job may wait minutes in the queue first (the queue is shown when it never starts)."""
    home = str(out.resolve()) + "/"
    end = time.time() + timeout_s
    while time.time() < end:
        rows = subprocess.run(["squeue", "-h", "-o", "%i|%T|%o|%j"], capture_output=True, text=True).stdout
        running = [r.split("|") for r in rows.splitlines() if f"|RUNNING|{home}" in r]
        if len(running) >= n:
            return [f"{r[0]}|{r[3]}" for r in running]
        time.sleep(1)
    queue = subprocess.run(["squeue", "-o", "%i %j %T %R"], capture_output=True, text=True).stdout
    raise AssertionError(f"{n} job(s) of {out} did not run within {timeout_s} s; the queue:\n{queue}")


@pytest.mark.megatron
@pytest.mark.slow
def test_two_sweeps_racing_for_one_folder(tmp_path):
    out = tmp_path / "s"
    procs = [spawn_sweep([*BASE, f"output_dir={out}", f"model.seq_length={seq}"]) for seq in (512, 2048)]
    res = [(p.wait(timeout=400), *p.communicate()) for p in procs]
    assert sorted(rc for rc, *_ in res) == [0, 2], res
    winner = (512, 2048)[[rc for rc, *_ in res].index(0)]
    loser_err = next(err for rc, _, err in res if rc == 2)
    assert f"held by sweep {_m(out)['sweep_id']}" in loser_err
    assert _m(out)["config"]["model"]["seq_length"] == winner
    assert {json.loads(p.read_text())["settings"]["seq_length"]
            for p in out.glob("variants/*/variant.json")} == {winner}
    assert_nothing_twice(out)
    assert_nothing_lost(out)


@pytest.mark.megatron
@pytest.mark.slow
def test_sigkill_between_submit_and_manifest_write_then_resume(tmp_path):
    out = tmp_path / "s"
    p = spawn_faulty_sweep("after_submit", [*BASE, f"output_dir={out}"])
    assert p.wait(timeout=300) == -9, p.communicate()
    atts = _attempts(out)
    assert all(a["status"] == "planned" and a.get("submitting") and not a.get("job_id")
               for v in atts.values() for a in v), atts
    assert sum(jobs_of(out).values()) == 2  # sbatch ran: the jobs exist although the manifest does not say so
    sid = _m(out)["sweep_id"]
    res = run_sweep(["cluster=local_slurm", "allow_dirty=true", "poll_s=1", "action=run", f"sweep_id={sid}",
                     f"output_dir={out}"])
    assert res.returncode == 0, tail(res)
    atts = _attempts(out)
    assert all([a["attempt"] for a in v] == [1] and v[0]["status"] == "succeeded" for v in atts.values()), atts
    assert_nothing_twice(out)
    assert_nothing_lost(out)


def _job_states(out: Path) -> dict[str, str]:
    """Slurm job name -> State (sacct) of this sweep's jobs."""
    home = str(out.resolve()) + "/"
    rows = subprocess.run(["sacct", "-X", "-n", "-P", "-S", "now-2hours", "-o", "JobName,State,SubmitLine"],
                          capture_output=True, text=True).stdout.splitlines()
    return {r.split("|")[0]: r.split("|")[1] for r in rows if home in r}


@pytest.mark.megatron
@pytest.mark.slow
def test_resume_after_a_kill_past_submit_leaves_the_running_jobs_on_this_host_alone(tmp_path):
    """The local Slurm runs the jobs on this host, and every process of a job inherits the submitter marker (sbatch
    exports the environment): the resume must neither wait for them nor kill them."""
    out = tmp_path / "s"
    p = spawn_faulty_sweep("after_submit", [*BASE, f"output_dir={out}", "payload.hold_s=45"])
    assert p.wait(timeout=300) == -9, p.communicate()
    _wait_jobs_running(out, 2)
    sid = _m(out)["sweep_id"]
    t0 = time.time()
    res = run_sweep(["cluster=local_slurm", "allow_dirty=true", "poll_s=1", "action=run", f"sweep_id={sid}",
                     f"output_dir={out}"])
    assert res.returncode == 0, tail(res)
    assert "sbatch process(es)" not in res.stderr, tail(res)  # it waited for nothing: no sbatch was left
    assert res.stderr.count("adopted, not resubmitted") == 2, tail(res)
    assert time.time() - t0 < 300
    assert set(_job_states(out).values()) == {"COMPLETED"}, _job_states(out)  # not FAILED 0:9
    atts = _attempts(out)
    assert all([a["attempt"] for a in v] == [1] and v[0]["status"] == "succeeded" for v in atts.values()), atts
    assert_nothing_twice(out)
    assert_nothing_lost(out)


@pytest.mark.megatron
@pytest.mark.slow
def test_cancel_after_a_kill_past_submit_looks_its_jobs_up_without_waiting_for_them(tmp_path):
    """``action=cancel`` finds the unrecorded jobs as a resume does: it neither waits for the jobs' processes on this
    host (they inherit the submitter marker) nor kills them itself; it cancels them through Slurm at once."""
    out = tmp_path / "s"
    p = spawn_faulty_sweep("after_submit", [*BASE, f"output_dir={out}", "payload.hold_s=300", "payload.hold_at=start"])
    assert p.wait(timeout=300) == -9, p.communicate()
    _wait_jobs_running(out, 2)
    t0 = time.time()
    res = run_sweep(["cluster=local_slurm", "allow_dirty=true", "action=cancel", f"sweep_id={_m(out)['sweep_id']}",
                     f"output_dir={out}"])
    assert res.returncode == 0, tail(res)
    assert "sbatch process(es)" not in res.stderr, tail(res)
    assert time.time() - t0 < 100, tail(res)  # the old look-up waited 120 s, then SIGKILLed the jobs' processes
    assert "cancelled 2 unfinished run(s)" in res.stdout, tail(res)
    attempts = [a for v in _attempts(out).values() for a in v]
    assert {a["status"] for a in attempts} == {"cancelled"}
    assert all(a.get("job_id") for a in attempts)  # found, recorded, then cancelled
    assert not any(a.get("submitting") for a in attempts), attempts  # the recorded state says what happened
    stopped = sorted(line for line in res.stdout.splitlines() if line.startswith("stopped "))
    assert stopped == sorted(f"stopped {a['task']} (job {a['job_id']}, was submitting)" for a in attempts), tail(res)


@pytest.mark.megatron
@pytest.mark.slow
def test_two_resumes_at_once_submit_each_run_once(tmp_path):
    out = tmp_path / "s"
    assert main([*BASE, "action=plan", f"output_dir={out}"]) == 0
    sid = _m(out)["sweep_id"]
    procs = [spawn_sweep([*BASE[:3], "action=run", f"sweep_id={sid}", f"output_dir={out}"]) for _ in range(2)]
    res = [(p.wait(timeout=400), *p.communicate()) for p in procs]
    assert sorted(rc for rc, *_ in res) == [0, 2], [(rc, err[-2000:]) for rc, _, err in res]
    loser = next(err for rc, _, err in res if rc == 2)
    assert "is being driven by pid " in loser and "(action=resume, since " in loser, loser
    assert_nothing_twice(out)
    assert_nothing_lost(out)


KILLS = 20  # SIGKILLs of the conductor at random points, one sweep each
AT_ONCE = 10  # sweeps run side by side (the local cluster's 4 nodes take their jobs as they can)
DEFAULT = ["cluster=local_slurm", "allow_dirty=true", "poll_s=0.2"]  # the isolation preset, validate mode


def _planned(out: Path, timeout_s: float = 120) -> None:
    end = time.time() + timeout_s
    while time.time() < end:
        try:
            if _m(out).get("plan_state", "complete") == "complete":
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    raise AssertionError(f"{out}: the plan was not written within {timeout_s} s")


def _ended_whole(out: Path) -> None:
    m = _m(out)
    for v in m["variants"]:
        if v["status"] == "pruned":
            continue
        assert v["status"] == "planned" and v["attempts"] and v["attempts"][-1]["status"] == "succeeded", v
        # no job was killed: every attempt that got a job ended succeeded (an attempt killed before its sbatch
        # has no job, and the resume runs the next one)
        assert all(a["status"] == "succeeded" for a in v["attempts"] if a.get("job_id")), v
    assert [s["status"] for s in m["stages"] if s.get("gate")] == ["open"], m["stages"]
    states = _job_states(out)
    assert states and set(states.values()) == {"COMPLETED"}, states  # the resume killed none of its jobs
    assert_nothing_twice(out)
    assert_nothing_lost(out)


@pytest.mark.megatron
@pytest.mark.slow
def test_sigkill_at_random_points_then_one_resume_ends_every_sweep_whole(tmp_path):
    rng = random.Random(25)
    delays = [rng.uniform(0.0, 30.0) for _ in range(KILLS)]  # s after the plan is written
    for first in range(0, KILLS, AT_ONCE):
        batch = [(tmp_path / f"s{i}", delays[i]) for i in range(first, min(first + AT_ONCE, KILLS))]
        procs = [(out, delay, spawn_sweep([*DEFAULT, f"output_dir={out}"])) for out, delay in batch]
        for out, _, _ in procs:
            _planned(out)
        t0 = time.time()
        for _, delay, p in sorted(procs, key=lambda x: x[1]):
            time.sleep(max(0.0, t0 + delay - time.time()))
            p.kill()
        for _, _, p in procs:
            p.wait(timeout=60)
            p.communicate()
        resumes = [(out, delay, spawn_sweep([*DEFAULT, "action=run", f"sweep_id={_m(out)['sweep_id']}",
                                             f"output_dir={out}"])) for out, delay, _ in procs]
        ended = [(out, delay, p.wait(timeout=600), p.communicate()[1]) for out, delay, p in resumes]
        for out, delay, rc, err in ended:  # every resume has ended: a failure leaves no job behind for later tests
            assert rc == 0, (out, f"killed {delay:.1f} s after the plan", err[-3000:])
            _ended_whole(out)


@pytest.mark.megatron
@pytest.mark.slow
def test_slurmctld_restarted_mid_sweep(tmp_path):
    out = tmp_path / "s"
    p = spawn_sweep([*BASE, f"output_dir={out}", "payload.hold_s=25"])
    _wait_jobs_running(out, 1)
    subprocess.run(["bash", str(REPO / "scripts" / "slurm_local" / "restart_ctld.sh"), "5"], check=True, timeout=120)
    rc = p.wait(timeout=400)
    _, err = p.communicate()
    assert rc == 0, err[-3000:]
    assert_nothing_twice(out)
    assert_nothing_lost(out)


@pytest.mark.megatron
@pytest.mark.slow
def test_job_cancelled_behind_the_tools_back_then_resumed(tmp_path):
    out = tmp_path / "s"
    p = spawn_sweep([*BASE, f"output_dir={out}", "payload.hold_s=20", "payload.hold_at=start"])
    victim = _wait_jobs_running(out, 1)[0]
    subprocess.run(["scancel", victim.split("|")[0]], check=True)
    assert p.wait(timeout=400) == 3, p.communicate()[1][-3000:]
    atts = _attempts(out)
    gone = victim.split("|")[1]
    assert any(a["status"] == "cancelled" for v in atts.values() for a in v)
    sid = _m(out)["sweep_id"]
    # the resume resubmits only the cancelled run (as attempt 2; the plan's hold still applies)
    res = run_sweep(["cluster=local_slurm", "allow_dirty=true", "poll_s=1", "action=run", f"sweep_id={sid}",
                     f"output_dir={out}"])
    assert res.returncode == 0, tail(res)
    atts = _attempts(out)
    latest = {n: v[-1]["status"] for n, v in atts.items()}
    assert set(latest.values()) == {"succeeded"}, (gone, atts)
    assert_nothing_twice(out)
    assert_nothing_lost(out)


@pytest.mark.megatron
@pytest.mark.slow
def test_disk_full_while_the_report_is_written(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(mnt)]).returncode != 0:
        pytest.fail("mounting a tmpfs needs root (the e2e tests run as root on the test machine)")
    try:
        out = mnt / "s"
        res = run_sweep([*BASE, f"output_dir={out}"])
        assert res.returncode == 0, tail(res)
        sid = _m(out)["sweep_id"]
        before = _digest(out, skip="report")
        report_before = _digest(out / "report")
        filler = mnt / "filler"
        subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=64k"], capture_output=True)  # until ENOSPC
        res = run_sweep(["cluster=local_slurm", "allow_dirty=true", "action=collect", f"sweep_id={sid}",
                         f"output_dir={out}"])
        err = res.stderr
        assert res.returncode == 5 and "No space left" in err and "Free space" in err and "Traceback" not in err, tail(res)
        assert _digest(out, skip="report") == before  # nothing lost: manifest, logs, effective configs
        assert _digest(out / "report") == report_before  # the atomic writer left the old report whole
        assert not list(out.rglob(".*.tmp"))
        filler.unlink()
        res = run_sweep(["cluster=local_slurm", "allow_dirty=true", "action=collect", f"sweep_id={sid}",
                         f"output_dir={out}"])
        assert res.returncode == 0, tail(res)
        assert_nothing_lost(out)
        assert_nothing_twice(out)
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


@pytest.mark.parametrize("damage", [lambda t: t[: len(t) // 2], lambda t: "{not json"])
def test_damaged_manifest_exits_2_names_the_file_and_touches_nothing(tmp_path, capsys, damage):
    out = tmp_path / "s"
    assert main([*BASE[:3], "action=plan", "sweep=full", f"output_dir={out}"]) == 0
    sid = _m(out)["sweep_id"]
    man = out / "manifest.json"
    man.write_text(damage(man.read_text()))
    before = _digest(out)
    for action in ("status", "collect", "run", "cancel"):
        capsys.readouterr()
        assert main(["cluster=local_slurm", f"action={action}", f"sweep_id={sid}", f"output_dir={out}"]) == 2
        err = capsys.readouterr().err
        assert str(man) in err and "Restore it from a backup" in err and "Traceback" not in err
        assert _digest(out) == before
