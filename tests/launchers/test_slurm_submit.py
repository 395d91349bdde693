"""Real submissions to the local Slurm cluster (scripts/slurm_local/start.sh) through NeMo-Run, detached.

The cluster has one node with 2 CPUs and 2 fake GPUs. The profile here asks 1 GPU per job (1 task, 1 CPU) so two
jobs can run at once: the two slow ones (a job past its time limit, a packed allocation) run side by side at the end.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import time
from pathlib import Path

import pytest

from contracts.cluster import ClusterConfig
from launchers.batch import BatchRequest
from launchers.errors import SchedulerError
from launchers.pack import cancel_packed_run, pack_states
from launchers.render import render_slurm_batch
from launchers.spec import JobCommand
from launchers.submit import cancel, submit_packed, submit_slurm
from launchers.track import log_files, query, wait
from tests.launchers.conftest import make_repo, profile

pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("slurm_cluster")]
PLANTED = "planted-slurm-secret-7f3a"


def _profile(**over) -> ClusterConfig:
    return profile("local_slurm", **{"gpus_per_node": 1, **over})


def _submit(tmp: Path, repo: Path, *commands: JobCommand, label: str = "s1", prof: ClusterConfig | None = None,
            **fields):
    request = BatchRequest(cluster=prof or _profile(), items=commands, label=label, **fields)
    return submit_slurm(request, state_dir=tmp / "sweep" / "nemo_run", repo=repo)


@pytest.mark.slow
def test_submit_one_job_and_see_it_finish_with_its_log(tmp_path: Path, code_repo: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", PLANTED + "-env")
    prof = _profile(env_vars={"TAG": "a b", "WANDB_API_KEY": PLANTED}, secret_env=["HF_TOKEN"])
    cmd = JobCommand(name="smoke", argv=(
        "bash", "-c", 'python3 -c "print(1)"; echo "tag=[$TAG] code=$(cat tool.py)"; '
        'printf %s "$WANDB_API_KEY" | sha256sum; printf %s "$HF_TOKEN" | sha256sum'))
    t0 = time.time()
    [sub] = _submit(tmp_path, code_repo, cmd, prof=prof)
    submit_s = time.time() - t0
    assert sub.job_id.isdigit() and sub.name == "smoke"
    final = wait([sub.job_id], timeout_s=120, poll_s=0.5)[sub.job_id]
    assert (final.status, final.exit_code) == ("succeeded", 0), final
    logs = log_files(sub.job_dir, sub.job_id)
    sweep = tmp_path / "sweep"
    assert all(str(p.resolve()).startswith(str((sweep / "nemo_run").resolve())) for p in logs)
    rank_log = next(p for p in logs if p.name.startswith("log-")).read_text()
    assert "1\n" in rank_log and "tag=[a b] code=print('committed')" in rank_log
    # the secrets reached the job (their hashes are in the log) ...
    assert hashlib.sha256(PLANTED.encode()).hexdigest() in rank_log
    assert hashlib.sha256((PLANTED + "-env").encode()).hexdigest() in rank_log
    # ... and no file of the sweep folder holds them (CONTRACTS §10)
    for f in sweep.rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            assert PLANTED.encode() not in data, f
    # the rendered script is the one that was submitted
    rendered = render_slurm_batch(BatchRequest(cluster=prof, items=[cmd], label="s1"),
                                  state_dir=sweep / "nemo_run")["smoke"]
    assert rendered == sub.script
    assert submit_s < 30, f"submission took {submit_s:.1f} s"


def test_failing_job_is_failed_with_its_exit_code(tmp_path: Path, code_repo: Path) -> None:
    [sub] = _submit(tmp_path, code_repo, JobCommand(name="fails", argv=("bash", "-c", "echo bad; exit 3")))
    final = wait([sub.job_id], timeout_s=120, poll_s=0.5)[sub.job_id]
    assert (final.status, final.exit_code) == ("failed", 3)
    assert "job exited with code 3" in next(p for p in log_files(sub.job_dir, sub.job_id)
                                            if p.name.startswith("sbatch_")).read_text()


def test_cancelled_mid_run(tmp_path: Path, code_repo: Path) -> None:
    [sub] = _submit(tmp_path, code_repo, JobCommand(name="victim", argv=("sleep", "300")))
    deadline = time.time() + 60
    while query([sub.job_id]).get(sub.job_id) is None or query([sub.job_id])[sub.job_id].status != "running":
        assert time.time() < deadline, "job never started"
        time.sleep(0.5)
    cancel([sub.job_id])
    assert wait([sub.job_id], timeout_s=60, poll_s=0.5)[sub.job_id].status == "cancelled"


@pytest.mark.parametrize("field,value,message", [("partition", "no_such_partition", "invalid partition"),
                                                   ("account", "no_such_account", "Invalid account")])
def test_unknown_partition_or_account_shows_slurms_refusal_and_leaves_nothing(
        tmp_path: Path, code_repo: Path, field: str, value: str, message: str) -> None:
    with pytest.raises(SchedulerError, match=message) as err:
        _submit(tmp_path, code_repo, JobCommand(name="a", argv=("true",)), JobCommand(name="b", argv=("true",)),
                prof=_profile(**{field: value}))
    assert err.value.exit_code == 5
    assert queued_from(code_repo) == []


def test_a_refused_job_cancels_its_already_queued_siblings(tmp_path: Path, code_repo: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import launchers.submit as submit_mod

    real_batch = submit_mod.slurm_batch

    def one_bad(*args, **kwargs):  # the second job of the batch asks for a partition that does not exist
        batch = real_batch(*args, **kwargs)
        batch.tasks[1].executor.partition = "no_such_partition"
        return batch

    monkeypatch.setattr(submit_mod, "slurm_batch", one_bad)
    with pytest.raises(SchedulerError, match=r"(?s)invalid partition.*cancelled again: jobs (\d+)") as err:
        _submit(tmp_path, code_repo, JobCommand(name="good", argv=("sleep", "30")),
                JobCommand(name="bad", argv=("true",)))
    job = re.search(r"cancelled again: jobs (\d+)", str(err.value)).group(1)
    assert wait([job], timeout_s=60, poll_s=0.5)[job].status == "cancelled"


def test_sbatch_missing_is_a_scheduler_error(tmp_path: Path, code_repo: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = tmp_path / "bin"  # a PATH with git but no Slurm client
    bindir.mkdir()
    (bindir / "git").symlink_to(shutil.which("git"))
    monkeypatch.setenv("PATH", str(bindir))
    with pytest.raises(SchedulerError, match="sbatch is not on PATH"):
        _submit(tmp_path, code_repo, JobCommand(name="a", argv=("true",)))


# ---- slow part: a job past its 1-minute limit and a packed allocation run side by side (one CPU each) ----
@pytest.fixture(scope="module")
def long_jobs(tmp_path_factory: pytest.TempPathFactory):
    """Queue the time-limit job and a packed allocation (one run hangs past its 1-minute budget) together."""
    tmp = tmp_path_factory.mktemp("long")
    repo = make_repo(tmp / "code")
    [limited] = _submit(tmp, repo, JobCommand(name="sleeper", argv=("sleep", "600")), time_limit_s=60)
    runs = [JobCommand(name="ok1", argv=("bash", "-c", "echo first $SLURM_STEP_ID")),
            JobCommand(name="fails", argv=("bash", "-c", "echo second; exit 4")),
            JobCommand(name="hangs", argv=("bash", "-c", "echo third; sleep 600")),
            JobCommand(name="stopme", argv=("sleep", "600")),
            JobCommand(name="ok2", argv=("echo", "fourth", "a b"))]
    t0 = time.time()
    packed = submit_packed(BatchRequest(cluster=_profile(), items=runs, label="s1", run_time_s=60),
                           state_dir=tmp / "packed" / "nemo_run", repo=repo)
    return limited, packed, time.time() - t0, time.time()


@pytest.mark.slow
def test_time_limit_ends_as_timeout(long_jobs) -> None:
    limited, _, _, started = long_jobs
    final = wait([limited.job_id], timeout_s=max(10.0, started + 240 - time.time()), poll_s=1)[limited.job_id]
    assert final.status == "timeout", final
    assert any("DUE TO TIME LIMIT" in p.read_text() for p in log_files(limited.job_dir, limited.job_id))


@pytest.mark.slow
def test_packed_runs_go_in_order_each_with_its_log_and_budget(long_jobs) -> None:
    _, packed, submit_s, started = long_jobs
    job = packed.job
    deadline = started + 300
    while pack_states(job.job_id, packed.runs)["stopme"].status != "running":  # the hung run's budget ran out
        assert time.time() < deadline, pack_states(job.job_id, packed.runs)
        time.sleep(1)
    assert not cancel_packed_run(job.job_id, "ok1")  # finished: nothing to cancel
    assert cancel_packed_run(job.job_id, "stopme")  # e.g. a suspected hang: only this run stops
    final = wait([job.job_id], timeout_s=max(10.0, deadline - time.time()), poll_s=1)[job.job_id]
    assert final.status == "failed"  # the summary step fails because one run did
    runs = {r.name: r for r in packed.runs}
    got = pack_states(job.job_id, packed.runs)
    assert {n: (s.status, s.exit_code) for n, s in got.items() if n != "hangs"} == {
        "ok1": ("succeeded", 0), "fails": ("failed", 4), "stopme": ("cancelled", 0), "ok2": ("succeeded", 0)}
    assert got["hangs"].status == "timeout"  # its own budget stopped it, and ok2 still ran afterwards
    steps = [int(got[n].job_id.split(".")[1]) for n in ("ok1", "fails", "hangs", "stopme", "ok2")]
    assert steps == sorted(steps), "runs did not go in order"
    texts = {n: "".join(p.read_text() for p in log_files(r.run_dir, job.job_id)) for n, r in runs.items()}
    assert texts["ok1"].startswith("first ") and texts["fails"] == "second\n" and texts["ok2"] == "fourth a b\n"
    assert "DUE TO TIME LIMIT" in texts["hangs"]
    assert [(r.run_dir / "exit_code").read_text().strip() for r in packed.runs][:2] == ["0", "4"]
    assert "#SBATCH --time=00:08:15" in job.script  # 5 x (60 s + 15 s) + 120 s
    assert submit_s < 30


def queued_from(folder: Path) -> list[str]:
    """Jobs of the last 10 minutes submitted from ``folder``, finished ones included (sbatch runs in the shipped
    checkout, so other tests' jobs have other work folders)."""
    import subprocess

    out = subprocess.run(["sacct", "-X", "-n", "-P", "-S", "now-10minutes", "-o", "JobID,WorkDir"],
                         capture_output=True, text=True, check=True).stdout
    return [line.split("|")[0] for line in out.splitlines() if line.split("|")[-1].startswith(str(folder))]
