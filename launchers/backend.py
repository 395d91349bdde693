"""Execution backends the orchestrator drives: one interface, a local one (NeMo-Run ``LocalExecutor``, torchrun
over the local GPUs) and a Slurm one (NeMo-Run ``SlurmExecutor``; one Slurm job per run, or one allocation per
stage with ``pack=true``).

Both build their NeMo-Run tasks with the same builders that render ``job.sh`` (:mod:`launchers.local`,
:mod:`launchers.batch`), so the script written next to each attempt is the one that ran. A backend reports the
scheduler's view as a manifest status (CONTRACTS §4); the orchestrator never takes it as the final word on a run
(CASES C08): the analysis stage reads the log as well.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any, Protocol

from contracts.cluster import ClusterConfig
from contracts.jobs import JobHandle, JobState
from contracts.records import RunRef
from contracts.sweepdir import SweepDir
from launchers import cluster as cl
from launchers.errors import SchedulerError
from launchers.exitwatch import ExitWatch, children
from launchers.procenv import environ
from launchers.shell import Shell
from launchers.spec import RunSpec
from launchers.validate_batch import ValidateBatch


class Backend(Protocol):
    """What the conductor needs from an executor backend. It never reads or writes the manifest: it takes typed
    requests (RunRef, mode, stage), returns typed :class:`JobHandle` and :class:`JobState` records, and learns of
    jobs submitted by another process through :meth:`adopt`.

    ``max_concurrent``: runs in flight at once (1 locally, so that variants never share a GPU; None = all).
    ``enforce_time_limit``: the conductor must enforce ``cluster.time_limit`` itself (Slurm does it there).
    """

    max_concurrent: int | None
    enforce_time_limit: bool

    def launch(self, refs: list[RunRef], mode: str, stage: int) -> dict[str, JobHandle]: ...

    def submit_item(self, key: str, item: Any, label: str, gpus: int = 0) -> JobHandle: ...

    def adopt(self, handles: list[JobHandle]) -> None: ...

    def find_submitted(self, refs: list[RunRef]) -> dict[str, JobHandle]: ...

    def poll(self, refs: list[RunRef]) -> dict[str, JobState]: ...

    def cancel(self, ref: RunRef) -> None: ...

    def log_files(self, ref: RunRef) -> list[Path]: ...

    def payload_out(self, ref: RunRef) -> Path: ...

    def script(self, ref: RunRef) -> str | None: ...

    def wait(self, timeout_s: float) -> bool:
        """Sleep until the next poll, ``timeout_s`` s at most; True when a job may have ended sooner."""
        ...

    def finish(self) -> None:
        """The sweep has launched everything: release what waits for more launches."""
        ...


def run_spec(sweep_dir: Path, ref: RunRef, mode: str, hold_s: float) -> RunSpec:
    """The launcher's RunSpec of one attempt (its task name is the run's :attr:`RunRef.task`)."""
    return RunSpec(variant=ref.variant, variant_json=SweepDir(Path(sweep_dir)).variant_json(ref.variant).resolve(),
                   attempt=ref.attempt, repeat=ref.repeat, mode=mode, hold_s=hold_s or None)


SHARED_POLL_S = 2.0  # seconds between NeMo-Run status queries of a local validate batch


class LocalBackend:
    """NeMo-Run ``LocalExecutor`` on this machine, one run at a time (validate mode: one process, no torchrun)."""

    max_concurrent = 1
    enforce_time_limit = True

    def __init__(self, sweep_dir: Path, cluster: ClusterConfig, gpus: int, title: str, hold_s: float = 0) -> None:
        self.sweep_dir = Path(sweep_dir).resolve()
        self.cluster = cluster
        self.gpus = gpus
        self.title = title
        self.hold_s = hold_s
        self._exps: dict[str, Any] = {}
        self._tasks: dict[str, Any] = {}
        self._scripts: dict[str, str] = {}
        # validate mode without a hold: the runs of one launch share one process (set by the conductor)
        self.batch_validate = False
        self._batch_of: dict[str, ValidateBatch] = {}
        self._batch_key: dict[int, str] = {}
        self._shared_seen: dict[str, JobState] = {}
        self._shared_at: dict[str, float] = {}
        self._follow: ValidateBatch | None = None  # the validate process that takes later launches
        self._watch = ExitWatch()  # pidfds of the running jobs' processes: wait() wakes when one exits

    def _home(self) -> Path:
        return self.sweep_dir / "nemo_run"

    def launch(self, refs: list[RunRef], mode: str, stage: int) -> dict[str, JobHandle]:
        if mode == "validate" and self.batch_validate and refs and not self.hold_s:
            return self._launch_batch(refs, stage)
        gpus = self.gpus if mode == "train" else 0
        return {ref.task: self.submit_item(ref.task, run_spec(self.sweep_dir, ref, mode, self.hold_s), f"s{stage}",
                                           gpus) for ref in refs}

    def _launch_batch(self, refs: list[RunRef], stage: int) -> dict[str, JobHandle]:
        """Every run of ``refs`` validated by one process (:mod:`experiments.payload.validate_runs`): the libraries
        are imported once, not once per run (about 4 s each); each run keeps its own log, effective_config.json
        and exit code (:class:`launchers.validate_batch.ValidateBatch`). A later launch (a gated stage) goes to
        the same process while it still follows, so one process validates the whole sweep."""
        live = self._follow
        if live is not None and not self._shared_seen[self._batch_key[id(live)]].final and live.hand_over(refs):
            batch, key = live, self._batch_key[id(live)]
            handle = JobHandle(key, self._shared_seen[key].job_id or "", script=self._scripts[key])
        else:
            key = f"validate-s{stage}-{time.time_ns()}"
            batch = ValidateBatch(self._home() / "validate" / key, self.sweep_dir, refs)
            handle = self.submit_item(key, batch.command(), f"s{stage}", 0)
            self._batch_key[id(batch)] = key
            self._shared_seen[key] = JobState("running", job_id=handle.job_id, state="RUNNING")
            self._shared_at[key] = time.monotonic()
            if live is not None:
                live.finish()
            self._follow = batch
        for ref in refs:
            self._batch_of[ref.task] = batch
        return {ref.task: JobHandle(ref.task, handle.job_id, job_dir=str(batch.folder(ref)), script=handle.script)
                for ref in refs}

    def finish(self) -> None:
        """End the local validate process that waits for more runs (the sweep has launched everything)."""
        if self._follow is not None:
            self._follow.finish()
            self._follow = None
        self._watch.close()

    def submit_item(self, key: str, item: Any, label: str, gpus: int = 0) -> JobHandle:
        """Start one RunSpec or JobCommand as its own NeMo-Run experiment; ``key`` names it for poll/cancel."""
        from launchers.home import nemo_run, nemorun_home_path, no_stdin
        from launchers.local import local_batch, render_local

        run = nemo_run(self._home())
        label = f"{label}-{time.time_ns()}"
        batch = local_batch(run, self.cluster, [item], home=nemorun_home_path(self._home()), title=self.title,
                            label=label, gpus=gpus)
        task = batch.tasks[0]
        self._scripts[key] = render_local(self.cluster, item, state_dir=self._home(), title=self.title,
                                          label=label, gpus=gpus)
        # secrets reach the local process through this process's environment, never a file (CONTRACTS §10)
        with no_stdin(), environ(batch.env.secrets):
            exp = run.Experiment(self.title, id=batch.exp_id, log_level="ERROR", clean_mode=True,
                                 enable_goodbye_message=False, skip_status_at_exit=True)
            exp.__enter__()  # kept open: leaving the block would wait for the job
            exp.add(task.script, executor=task.executor, name=task.name)
            before = children()
            exp.run(detach=False)
            self._watch.add(key, children() - before)  # the job's process, started by torchx's Popen here
        self._exps[key], self._tasks[key] = exp, task
        return JobHandle(key, batch.exp_id, job_dir=str(task.job_dir), script=self._scripts[key])

    def wait(self, timeout_s: float) -> bool:
        """Sleep up to ``timeout_s`` s between polls, less when a local job's process exits (True then)."""
        return self._watch.wait(timeout_s)

    def adopt(self, handles: list[JobHandle]) -> None:
        """Local jobs die with the process that started them: a job of another process is reported ``lost``."""

    def find_submitted(self, refs: list[RunRef]) -> dict[str, JobHandle]:
        """Local jobs of a process that died died with it: none is found, the runs are started again."""
        return {}

    def poll(self, refs: list[RunRef]) -> dict[str, JobState]:
        out = {}
        shared: dict[str, JobState] = {}
        for ref in refs:
            batch = self._batch_of.get(ref.task)
            if batch is not None:
                key = self._batch_key[id(batch)]
                if key not in shared:
                    shared[key] = self._shared_state(key, batch)
                out[ref.task] = batch.state(ref, shared[key])
            else:
                out[ref.task] = self._job_state(ref.task)
        return out

    def _shared_state(self, key: str, batch: ValidateBatch) -> JobState:
        """The validate batch's job state, asked of NeMo-Run (about 0.5 s a query here) at most every
        ``SHARED_POLL_S`` seconds while runs of it are unfinished, and not at all once every run has its exit file
        (each run's own file says how it ended)."""
        last = self._shared_seen[key]
        if last.final or batch.all_done():
            return last
        if time.monotonic() - self._shared_at[key] >= SHARED_POLL_S:
            last = self._job_state(key)
            self._shared_seen[key], self._shared_at[key] = last, time.monotonic()
        return last

    def _job_state(self, key: str) -> JobState:
        exp = self._exps.get(key)
        if exp is None:
            return JobState("lost", reason="not launched by this process")
        info = (exp.status(return_dict=True) or {}).get(self._tasks[key].name, {})
        app = str(info.get("status", "UNKNOWN")).split()[0].split(".")[-1]
        status = {"SUCCEEDED": "succeeded", "FAILED": "failed", "CANCELLED": "cancelled",
                  "RUNNING": "running", "PENDING": "submitted", "SUBMITTED": "submitted"}.get(app, "running")
        if status in ("succeeded", "failed", "cancelled"):
            self._watch.discard(key)
        return JobState(status, job_id=exp._id, state=app, exit_code=0 if status == "succeeded" else None)

    def cancel(self, ref: RunRef) -> None:
        """Cancel the run's job (a validate batch's one job: every unfinished run of it)."""
        batch = self._batch_of.get(ref.task)
        key = self._batch_key[id(batch)] if batch is not None else ref.task
        exp = self._exps.get(key)
        if exp is not None:
            try:
                exp.cancel(self._tasks[key].name)
            except Exception:  # noqa: BLE001 - cancelling a finished local job is harmless
                pass

    def log_files(self, ref: RunRef) -> list[Path]:
        if ref.task in self._batch_of:
            return self._batch_of[ref.task].log_files(ref)
        task = self._tasks.get(ref.task)
        root = Path(task.job_dir) if task is not None else None
        files = sorted(root.rglob("*.log")) if root and root.exists() else []
        # torchx writes stdout.log, stderr.log and combined.log (both streams): keep only combined.log so that
        # no line is counted twice
        combined = [f for f in files if f.name == "combined.log"]
        return combined or files

    def payload_out(self, ref: RunRef) -> Path:
        if ref.task in self._batch_of:
            return self._batch_of[ref.task].out_dir(ref)
        task = self._tasks.get(ref.task)
        return Path(task.job_dir) / "out" if task is not None else self._home() / "missing"

    def script(self, ref: RunRef) -> str | None:
        batch = self._batch_of.get(ref.task)
        return self._scripts.get(self._batch_key[id(batch)] if batch is not None else ref.task)


class SlurmBackend:
    """NeMo-Run ``SlurmExecutor`` through the launcher's submit/track modules: every run of a launch is one Slurm
    job of one NeMo-Run experiment (no ``afterok`` chains); state from squeue/sacct; a job that vanished is lost.

    Over an SSH tunnel (``cluster.tunnel.kind=ssh``) squeue/sacct/scancel run on the cluster through the tunnel,
    and the logs and ``out/effective_config.json``, written in the job folder on the cluster (``host_dir``,
    under ``cluster.tunnel.job_dir``), are copied back into the task folder on this machine when read.
    """

    max_concurrent = None
    enforce_time_limit = False

    def __init__(self, sweep_dir: Path, cluster: ClusterConfig, *, title: str, repo: Path, allow_dirty: bool = False,
                 pack: bool = False, hold_s: float = 0) -> None:
        self.sweep_dir = Path(sweep_dir).resolve()
        self.cluster = cluster
        self.title = title
        self.repo = repo
        self.allow_dirty = allow_dirty
        self.pack = pack
        self.hold_s = hold_s
        self._subs: dict[str, JobHandle] = {}
        self._submitted_at: dict[str, float] = {}
        self._sh: Shell | None = None
        self.remote = cl.tunnel_field(self.cluster, "kind", "local") == "ssh"
        # only a real ``true`` opts in (an older manifest masked this switch to a truthy "***")
        self.allow_ssh_secrets = cl.get(self.cluster, "allow_ssh_secrets") is True

    def _shell(self) -> Shell:
        """Where squeue/sacct/scancel run: here on a login node, through the SSH tunnel otherwise (one connection,
        opened on first use)."""
        if self._sh is None:
            from launchers.shell import shell_for

            self._sh = shell_for(self.cluster)
        return self._sh

    def adopt(self, handles: list[JobHandle]) -> None:
        """Know jobs submitted earlier, by this or another process (status, collect, resume): their handles come
        from the attempts the conductor recorded. They are past the ``lost`` grace period at once."""
        for h in handles:
            self._subs[h.task] = h
            self._submitted_at[h.task] = time.time() - 3600

    def find_submitted(self, refs: list[RunRef]) -> dict[str, JobHandle]:
        """Jobs of ``refs`` that the scheduler has although the caller never recorded them (the conductor died
        between sbatch and its manifest write): looked up by Slurm job name (``moe.`` + :attr:`RunRef.task`) in
        squeue and sacct, and kept only when the job's working folder lies inside this sweep's ``nemo_run/`` (other
        sweeps use the same names): the batch script sbatch was given lies inside this sweep folder (NeMo-Run's home
        is in it). One squeue and one sacct call. Found jobs are adopted. Login node only: over
        SSH the cluster's folders are not this sweep's, so nothing is found (the run is submitted again).

        Raises:
            SchedulerError: squeue or sacct failed.
        """
        from launchers.slurm import JOB_NAME_PREFIX
        from launchers.track import find_by_name

        if self.remote or self.pack or not refs:  # packed steps share one allocation's name: not looked up
            return {}
        names = {f"{JOB_NAME_PREFIX}{run_spec(self.sweep_dir, r, 'train', 0).name}": r for r in refs}
        out: dict[str, JobHandle] = {}
        for name, (job_id, script_path) in find_by_name(list(names), self._shell()).items():
            sbatch = Path(script_path)
            if self.sweep_dir not in sbatch.parents:
                continue
            ref = names[name]
            job_dir = sbatch.parent / sbatch.name.removesuffix("_sbatch.sh")  # the task folder beside its script
            script = sbatch.read_text() if sbatch.is_file() else None
            self._subs[ref.task] = out[ref.task] = JobHandle(ref.task, job_id, job_dir=str(job_dir), script=script)
            self._submitted_at[ref.task] = time.time() - 3600
        return out

    def launch(self, refs: list[RunRef], mode: str, stage: int) -> dict[str, JobHandle]:
        from launchers.batch import batch_label

        specs = [run_spec(self.sweep_dir, r, mode, self.hold_s) for r in refs]
        if self.pack:
            return self._submit_packed(refs, specs, pack_label(stage, refs))
        return self.submit_items([r.task for r in refs], specs, batch_label(stage))

    def _submit_packed(self, refs: list[RunRef], specs: list[RunSpec], label: str) -> dict[str, JobHandle]:
        """``pack=true``: the runs go one after another in ONE allocation, each as its own srun step with its own
        log, output folder and time budget (launchers/pack.py); one queue wait for the stage."""
        from launchers.submit import submit_packed

        sub = submit_packed(self.cluster, specs, state_dir=self.sweep_dir / "nemo_run", repo=self.repo,
                            title=self.title, label=f"{label}.{time.time_ns() % 10**9}", allow_dirty=self.allow_dirty,
                            allow_ssh_secrets=self.allow_ssh_secrets)
        by_name = {r.name: r for r in sub.runs}
        out = {}
        for ref, spec in zip(refs, specs, strict=True):
            pr = by_name[spec.name]
            self._subs[ref.task] = out[ref.task] = JobHandle(
                ref.task, sub.job.job_id, job_dir=str(pr.run_dir), pack_step=pr.name, script=sub.job.script,
                host_dir=pr.host_run_dir if self.remote else "")
            self._submitted_at[ref.task] = time.time()
        return out

    def submit_item(self, key: str, item: Any, label: str, gpus: int = 0) -> JobHandle:
        """Queue one RunSpec or JobCommand (e.g. the container preflight) as a Slurm job."""
        return self.submit_items([key], [item], label)[key]

    def submit_items(self, keys: list[str], items: list[Any], label: str) -> dict[str, JobHandle]:
        from launchers.submit import submit_slurm

        subs = submit_slurm(self.cluster, items, state_dir=self.sweep_dir / "nemo_run", repo=self.repo,
                            title=self.title, label=f"{label}.{time.time_ns() % 10**9}", allow_dirty=self.allow_dirty,
                            allow_ssh_secrets=self.allow_ssh_secrets)
        by_name = {s.name: s for s in subs}
        out = {}
        for key, item in zip(keys, items, strict=True):
            s = by_name[item.name]
            # host_dir (the job folder on the cluster) is kept over SSH only, so that action=status|collect in
            # another process can fetch the logs again
            self._subs[key] = out[key] = JobHandle(key, s.job_id, job_dir=str(s.job_dir), script=s.script,
                                                   host_dir=s.host_dir if self.remote else "")
            self._submitted_at[key] = time.time()
        return out

    def poll(self, refs: list[RunRef]) -> dict[str, JobState]:
        from launchers.pack import PackedRun, pack_states
        from launchers.track import states

        plain = {self._subs[r.task].job_id: self._submitted_at[r.task] for r in refs
                 if r.task in self._subs and not self._subs[r.task].pack_step}
        st = states(plain, self._shell()) if plain else {}
        packs: dict[str, list[PackedRun]] = {}
        for r in refs:
            sub = self._subs.get(r.task)
            if sub is not None and sub.pack_step:
                packs.setdefault(sub.job_id, []).append(PackedRun(sub.pack_step, None, Path(sub.job_dir or ".")))
        packed = {(j, name): s for j, runs in packs.items() for name, s in pack_states(j, runs, self._shell()).items()}
        out = {}
        for r in refs:
            sub = self._subs.get(r.task)
            if sub is None:
                out[r.task] = JobState("lost", reason="no job id recorded")
                continue
            out[r.task] = packed[(sub.job_id, sub.pack_step)] if sub.pack_step else st[sub.job_id]
        return out

    def cancel(self, ref: RunRef) -> None:
        from launchers.pack import cancel_packed_run
        from launchers.submit import cancel

        sub = self._subs.get(ref.task)
        if sub is not None and sub.pack_step:
            cancel_packed_run(sub.job_id, sub.pack_step, self._shell())
        elif sub is not None:
            cancel([sub.job_id], self._shell())

    def log_files(self, ref: RunRef) -> list[Path]:
        """The job's log files on this machine (over SSH: fetched from the cluster first; when the cluster cannot
        be reached, the copies fetched before)."""
        from launchers.track import fetch_log_files, log_files

        sub = self._subs.get(ref.task)
        if sub is None or sub.job_dir is None:
            return []
        if self.remote and sub.host_dir:
            with contextlib.suppress(SchedulerError):
                return fetch_log_files(sub.host_dir, sub.job_id, sub.job_dir, self._shell())
        return log_files(sub.job_dir, sub.job_id)

    def payload_out(self, ref: RunRef) -> Path:
        """The payload's output folder on this machine (over SSH: its ``effective_config.json`` fetched first,
        when the job wrote one)."""
        from launchers.track import fetch_files

        sub = self._subs.get(ref.task)
        if sub is None or not sub.job_dir:
            return self.sweep_dir / "missing"
        out = Path(sub.job_dir) / "out"
        if self.remote and sub.host_dir:
            with contextlib.suppress(SchedulerError):  # no out/ on the cluster: the job wrote nothing
                fetch_files(f"{sub.host_dir}/out", out, self._shell(), lambda n: n == "effective_config.json")
        return out

    def script(self, ref: RunRef) -> str | None:
        sub = self._subs.get(ref.task)
        return sub.script if sub is not None else None

    def wait(self, timeout_s: float) -> bool:
        """Sleep ``timeout_s`` s: Slurm jobs are not this process's children; squeue/sacct tell their end."""
        time.sleep(max(0.0, timeout_s))
        return False

    def finish(self) -> None:
        """Nothing waits for more launches on Slurm."""


def pack_label(stage: int, refs: list[RunRef]) -> str:
    """The batch label of one packed allocation: ``s<stage>.b<block>.<6 hex>``; the conductor packs one block per
    allocation (its runs share the nodes); a hash of the runs' task names keeps two allocations of a stage apart (an
    attempt is never submitted twice), so their ``pack-<label>`` folders never collide."""
    import hashlib

    digest = hashlib.sha256(",".join(sorted(r.task for r in refs)).encode()).hexdigest()[:6]
    return f"s{stage}.b{min(r.repeat for r in refs)}.{digest}"
