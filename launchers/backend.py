"""Execution backends the orchestrator drives: one interface (:class:`Backend`), the local one here (NeMo-Run
``LocalExecutor``, torchrun over the local GPUs) and the Slurm one in :mod:`launchers.slurm_backend` (NeMo-Run
``SlurmExecutor``; one Slurm job per run, or one allocation per block with ``pack=true``).

Both build their NeMo-Run tasks with the same builders that render ``job.sh`` (:mod:`launchers.local`,
:mod:`launchers.batch`), so the script written next to each attempt is the one that ran. A backend reports the
scheduler's view as a manifest status (CONTRACTS §4); the orchestrator never takes it as the final word on a run
(CASES C08): the analysis stage reads the log as well.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from contracts.atomic import write_json
from contracts.cluster import ClusterConfig
from contracts.jobs import JobHandle, JobState
from contracts.procfs import children, process_start
from contracts.records import RunRef
from contracts.statuses import ManifestStatus
from contracts.sweepdir import SweepDir
from launchers import adopted
from launchers.exitwatch import ExitWatch
from launchers.procenv import environ
from launchers.spec import RunSpec
from launchers.validate_batch import ValidateBatch


class Backend(Protocol):
    """What the conductor needs from an executor backend. It never reads or writes the manifest: it takes typed
    requests (RunRef, mode, stage), returns typed :class:`JobHandle` and :class:`JobState` records, and learns of
    jobs submitted by another process through :meth:`adopt`.

    ``max_concurrent``: runs in flight at once (1 locally, so that variants never share a GPU; None = all).
    ``enforce_time_limit``: the conductor must enforce ``cluster.time_limit`` itself (Slurm does it there).
    ``detaches``: the jobs go on when the conductor exits, and another process can track them (Slurm); a local job
    belongs to the process that started it, so a local sweep always runs in the foreground.
    ``batch_validate``: validate-mode runs go to one process that checks them block after block (the local backend
    in validate mode; the conductor then launches every queued run at once and polls more often).
    ``chains_collect``: the backend can queue the sweep's collect behind its jobs (:meth:`submit_collect`) and
    cancel that job (:meth:`cancel_jobs`); where False, neither is called.
    """

    max_concurrent: int | None
    enforce_time_limit: bool
    detaches: bool
    batch_validate: bool
    chains_collect: bool

    def launch(self, refs: list[RunRef], mode: str, stage: int) -> dict[str, JobHandle]: ...

    def submit_item(self, key: str, item: Any, label: str, gpus: int = 0) -> JobHandle: ...

    def adopt(self, handles: list[JobHandle]) -> None: ...

    def find_submitted(self, refs: list[RunRef]) -> dict[str, JobHandle]: ...

    def find_items(self, names: Mapping[str, str]) -> dict[str, JobHandle]:
        """Jobs of this sweep by the name of the item each was submitted as (``key -> item name``: the jobs before
        the arms), adopted under their key; where the backend cannot look jobs up, none."""
        ...

    def poll(self, refs: list[RunRef]) -> dict[str, JobState]: ...

    def cancel(self, ref: RunRef) -> None:
        """Stop this one run (a suspected hang, the local time limit); a later run of its allocation may start."""
        ...

    def stop(self, refs: list[RunRef]) -> None:
        """Stop ``refs`` for good (``action=cancel``, Ctrl-C): none of them runs after this, even one queued in an
        allocation shared with others (``pack=true``: the whole allocation is cancelled)."""
        ...

    def submit_collect(self, sweep_id: str, after: list[str], secrets: Mapping[str, str] | None = None,
                       overrides: tuple[str, ...] = ()) -> JobHandle:
        """Queue the sweep's collect behind the jobs ``after`` (only where :attr:`chains_collect`); ``secrets``
        (name -> value) reach the job through its environment only; ``overrides`` are added to its command."""
        ...

    def cancel_jobs(self, job_ids: list[str]) -> None:
        """Cancel jobs of the sweep that are no run of it (its chained collect; only where :attr:`chains_collect`)."""
        ...

    def exclude_nodes(self, nodes: list[str]) -> None:
        """Keep every later job of the sweep off ``nodes`` (the fabric gate; Slurm ``--exclude``)."""
        ...

    def log_files(self, ref: RunRef) -> list[Path]: ...

    def payload_out(self, ref: RunRef) -> Path: ...

    def script(self, ref: RunRef) -> str | None: ...

    def wait(self, timeout_s: float) -> bool:
        """Sleep until the next poll, ``timeout_s`` s at most; True when a job may have ended sooner."""
        ...

    def finish(self) -> None:
        """The sweep has launched everything: release what waits for more launches."""
        ...

    def disconnect(self) -> None:
        """Close the connections to the cluster until the next call needs one (the sweep's analysis needs none)."""
        ...

    def close(self) -> None:
        """The sweep is over: end what the backend holds (NeMo-Run experiments, the jobs' log-copy threads, SSH
        connections). Idempotent; a later call of another method is not expected."""
        ...


def run_spec(sweep_dir: Path, ref: RunRef, mode: str, hold_s: float) -> RunSpec:
    """The launcher's RunSpec of one attempt (its task name is the run's :attr:`RunRef.task`)."""
    return RunSpec(variant=ref.variant, variant_json=SweepDir(Path(sweep_dir)).variant_json(ref.variant).resolve(),
                   attempt=ref.attempt, repeat=ref.repeat, mode=mode, hold_s=hold_s or None)


SHARED_POLL_S = 2.0  # seconds between NeMo-Run status queries of a local validate batch
END_WAIT_S = 60.0  # seconds a validate process told to finish may take to exit before it is cancelled


class LocalBackend:
    """NeMo-Run ``LocalExecutor`` on this machine, one run at a time (validate mode: one process, no torchrun).

    Each job is one NeMo-Run ``Experiment``, entered at launch and left in :meth:`close` (leaving it earlier would
    wait for the job). torchx copies a local job's output into its ``combined.log`` with a thread of its own
    (``torchx.schedulers.streams.Tee``) that ends only when torchx is asked the status of the finished job, so
    :meth:`close` asks each job's final status first, then leaves the experiments.
    """

    max_concurrent = 1
    enforce_time_limit = True
    detaches = False
    chains_collect = False

    def __init__(self, sweep_dir: Path, cluster: ClusterConfig, gpus: int, title: str, hold_s: float = 0) -> None:
        self.sweep_dir = Path(sweep_dir).resolve()
        self.cluster = cluster
        self.gpus = gpus
        self.title = title
        self.hold_s = hold_s
        self._exps: dict[str, Any] = {}
        self._entered = contextlib.ExitStack()  # the experiments of self._exps, left by close()
        self._final: set[str] = set()  # jobs whose final status NeMo-Run has reported
        self._tasks: dict[str, Any] = {}
        self._scripts: dict[str, str] = {}
        # validate mode without a hold: the runs of one launch share one process (set by the conductor)
        self.batch_validate = False
        self._batch_of: dict[str, ValidateBatch] = {}
        self._batch_key: dict[int, str] = {}
        self._pid: dict[str, tuple[int | None, int | None]] = {}
        self._shared_seen: dict[str, JobState] = {}
        self._shared_at: dict[str, float] = {}
        self._follow: ValidateBatch | None = None  # the validate process that takes later launches
        self._watch = ExitWatch()  # pidfds of the running jobs' processes: wait() wakes when one exits
        self._adopted: dict[str, JobHandle] = {}  # jobs of a conductor that died (launchers/adopted.py)

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
            self._pid[key] = (handle.pid, handle.pid_start)
            self._batch_key[id(batch)] = key
            self._shared_seen[key] = JobState(ManifestStatus.RUNNING, job_id=handle.job_id, state="RUNNING")
            self._shared_at[key] = time.monotonic()
            if live is not None:
                live.finish()
            self._follow = batch
        for ref in refs:
            self._batch_of[ref.task] = batch
        pid, start = self._pid.get(key, (None, None))
        return {ref.task: JobHandle(ref.task, handle.job_id, job_dir=str(batch.folder(ref)), script=handle.script,
                                    pid=pid, pid_start=start) for ref in refs}

    def finish(self) -> None:
        """End the local validate process that waits for more runs (the sweep has launched everything)."""
        if self._follow is not None:
            self._follow.finish()
            self._follow = None

    def disconnect(self) -> None:
        """Local jobs need no connection."""

    def close(self) -> None:
        """Ask NeMo-Run the final status of every job this backend started, then leave their experiments.

        A validate process told to finish (:meth:`finish`) is waited for, up to ``END_WAIT_S`` seconds, then
        cancelled; any other job still running (the sweep stopped on an error) is cancelled at once: a local job
        belongs to the process that started it. Asking the status of a finished job is what makes torchx end the
        job's log-copy thread and close its log files; leaving the experiment closes NeMo-Run's torchx runner.
        """
        self.finish()
        batches = set(self._batch_key.values())
        for key in list(self._exps):
            if key not in self._final:
                if key in batches:
                    self._watch.wait_exit(key, END_WAIT_S)
                if not self._job_state(key).final:
                    self._cancel_key(key)
                    self._job_state(key)
        self._entered.close()
        self._watch.close()

    def submit_item(self, key: str, item: Any, label: str, gpus: int = 0) -> JobHandle:
        """Start one RunSpec or JobCommand as its own NeMo-Run experiment; ``key`` names it for poll/cancel."""
        from launchers.batch import BatchRequest
        from launchers.home import nemo_run, nemorun_home_path, no_stdin
        from launchers.local import local_batch, render_local

        run = nemo_run(self._home())
        request = BatchRequest(cluster=self.cluster, items=(item,), title=self.title, label=f"{label}-{time.time_ns()}",
                               gpus=gpus)
        batch = local_batch(run, request, home=nemorun_home_path(self._home()))
        task = batch.tasks[0]
        self._scripts[key] = render_local(request, state_dir=self._home())
        # secrets reach the local process through this process's environment, never a file (CONTRACTS §10)
        with no_stdin(), environ(batch.env.secrets):
            exp = self._entered.enter_context(run.Experiment(  # left in close(): leaving it waits for the job
                self.title, id=batch.exp_id, log_level="ERROR", clean_mode=True, enable_goodbye_message=False,
                skip_status_at_exit=True))
            exp.add(task.script, executor=task.executor, name=task.name)
            before = children()
            exp.run(detach=False)
            started = children() - before  # the job's process, started by torchx's Popen here
            self._watch.add(key, started)
        self._exps[key], self._tasks[key] = exp, task
        pid = min(started) if started else None  # one replica: the session leader of the job
        return JobHandle(key, batch.exp_id, job_dir=str(task.job_dir), script=self._scripts[key], pid=pid,
                         pid_start=process_start(pid) if pid else None)

    def wait(self, timeout_s: float) -> bool:
        """Sleep up to ``timeout_s`` s between polls, less when a local job's process exits (True then)."""
        return self._watch.wait(timeout_s)

    def adopt(self, handles: list[JobHandle]) -> None:
        """Jobs of a conductor that died (recorded with their folder and process): polled, logged and cancelled
        through their process and exit records (:mod:`launchers.adopted`). A validate batch of such a job is told to
        end once it has validated what it was given (it takes no more runs from this process)."""
        for h in handles:
            if h.task in self._exps or h.task in self._batch_of or not h.job_dir:
                continue
            self._adopted[h.task] = h
            if adopted.is_batch(h):
                root = Path(h.job_dir).parent
                if not (root / "done").exists() and not (root / "closed").exists():
                    with contextlib.suppress(OSError):
                        write_json(root / "done", {"adopted": True})
            if h.pid and adopted.state(h).status == "running":
                self._watch.add(h.task, {int(h.pid)})

    def find_submitted(self, refs: list[RunRef]) -> dict[str, JobHandle]:
        """Local jobs started by a conductor that died before it recorded them: looked up among this host's
        processes by their command line (:func:`launchers.adopted_scan.find_local_jobs`)."""
        from launchers.adopted_scan import find_local_jobs

        found = find_local_jobs(self.sweep_dir, refs)
        self.adopt(list(found.values()))
        return found

    def find_items(self, names: Mapping[str, str]) -> dict[str, JobHandle]:
        """None: a local job before the arms is a child of the conductor that started it and ends with it."""
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
            elif ref.task in self._adopted and ref.task not in self._exps:
                out[ref.task] = adopted.state(self._adopted[ref.task])
                if out[ref.task].final:
                    self._watch.discard(ref.task)
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
            return JobState(ManifestStatus.LOST, reason="not launched by this process")
        info = (exp.status(return_dict=True) or {}).get(self._tasks[key].name, {})
        app = str(info.get("status", "UNKNOWN")).split()[0].split(".")[-1]
        status = {"SUCCEEDED": ManifestStatus.SUCCEEDED, "FAILED": ManifestStatus.FAILED,
                  "CANCELLED": ManifestStatus.CANCELLED, "RUNNING": ManifestStatus.RUNNING,
                  "PENDING": ManifestStatus.SUBMITTED, "SUBMITTED": ManifestStatus.SUBMITTED}.get(
            app, ManifestStatus.RUNNING)
        if status in (ManifestStatus.SUCCEEDED, ManifestStatus.FAILED, ManifestStatus.CANCELLED):
            self._watch.discard(key)
            self._final.add(key)
        return JobState(status, job_id=exp._id, state=app, exit_code=0 if status == "succeeded" else None)

    def cancel(self, ref: RunRef) -> None:
        """Cancel the run's job (a validate batch's one job: every unfinished run of it)."""
        if ref.task in self._adopted and ref.task not in self._exps and ref.task not in self._batch_of:
            adopted.cancel(self._adopted[ref.task])
            return
        batch = self._batch_of.get(ref.task)
        self._cancel_key(self._batch_key[id(batch)] if batch is not None else ref.task)

    def stop(self, refs: list[RunRef]) -> None:
        """Each local run is a process group of its own: stopping them one by one stops them all."""
        for ref in refs:
            self.cancel(ref)

    def submit_collect(self, sweep_id: str, after: list[str], secrets: Mapping[str, str] | None = None,
                       overrides: tuple[str, ...] = ()) -> JobHandle:
        """A local sweep runs in the foreground and queues no collect job (:attr:`chains_collect` is False).

        Raises:
            LaunchConfigError: always.
        """
        from launchers.errors import LaunchConfigError

        raise LaunchConfigError("a local sweep queues no collect job: it collects in the foreground")

    def cancel_jobs(self, job_ids: list[str]) -> None:
        """A local sweep queues no job besides its runs: nothing to cancel."""

    def exclude_nodes(self, nodes: list[str]) -> None:
        """A local sweep runs on this machine only.

        Raises:
            LaunchConfigError: always (the fabric gate runs on Slurm only).
        """
        from launchers.errors import LaunchConfigError

        raise LaunchConfigError(f"a local sweep cannot exclude nodes ({', '.join(nodes)}): it runs on this machine")

    def _cancel_key(self, key: str) -> None:
        exp = self._exps.get(key)
        if exp is not None:
            try:
                exp.cancel(self._tasks[key].name)
            except Exception:  # noqa: BLE001 - cancelling a finished local job is harmless
                pass

    def log_files(self, ref: RunRef) -> list[Path]:
        if ref.task in self._batch_of:
            return self._batch_of[ref.task].log_files(ref)
        if ref.task in self._adopted and ref.task not in self._tasks:
            return adopted.log_files(self._adopted[ref.task])
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
        if ref.task in self._adopted and ref.task not in self._tasks:
            return Path(self._adopted[ref.task].job_dir or self._home() / "missing") / "out"
        task = self._tasks.get(ref.task)
        return Path(task.job_dir) / "out" if task is not None else self._home() / "missing"

    def script(self, ref: RunRef) -> str | None:
        batch = self._batch_of.get(ref.task)
        return self._scripts.get(self._batch_key[id(batch)] if batch is not None else ref.task)
