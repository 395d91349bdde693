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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from launchers import cluster as cl
from launchers.attempts import RunRef
from launchers.errors import SchedulerError
from launchers.shell import Shell
from launchers.spec import RunSpec

FINAL = ("succeeded", "failed", "cancelled", "timeout", "lost")


@dataclass(frozen=True)
class JobState:
    """Scheduler view of one run: manifest ``status``, job id (Slurm id or NeMo-Run experiment id), exit code."""

    status: str
    job_id: str | None = None
    exit_code: int | None = None
    detail: str = ""
    record: tuple[tuple[str, Any], ...] = ()  # extra attempt fields for the manifest (job_dir, packed step)

    @property
    def final(self) -> bool:
        return self.status in FINAL


class Backend(Protocol):
    """What the orchestrator needs from an executor backend.

    ``max_concurrent``: runs in flight at once (1 locally, so that variants never share a GPU; None = all).
    ``enforce_time_limit``: the orchestrator must enforce ``cluster.time_limit`` itself (Slurm does it there).
    """

    max_concurrent: int | None
    enforce_time_limit: bool

    def launch(self, refs: list[RunRef], mode: str, stage: int) -> dict[str, JobState]: ...

    def submit_item(self, key: str, item: Any, label: str, gpus: int = 0) -> JobState: ...

    def poll(self, refs: list[RunRef]) -> dict[str, JobState]: ...

    def cancel(self, ref: RunRef) -> None: ...

    def log_files(self, ref: RunRef) -> list[Path]: ...

    def payload_out(self, ref: RunRef) -> Path: ...

    def script(self, ref: RunRef) -> str | None: ...


def run_spec(sweep_dir: Path, ref: RunRef, mode: str, hold_s: float) -> RunSpec:
    """The launcher's RunSpec of one attempt (task name ``<variant>-a<k>``)."""
    return RunSpec(variant=ref.variant, variant_json=(Path(sweep_dir) / "variants" / ref.variant /
                                                      "variant.json").resolve(),
                   attempt=ref.attempt, repeat=ref.repeat, mode=mode, hold_s=hold_s or None)


class LocalBackend:
    """NeMo-Run ``LocalExecutor`` on this machine, one run at a time (validate mode: one process, no torchrun)."""

    max_concurrent = 1
    enforce_time_limit = True

    def __init__(self, sweep_dir: Path, cluster: dict[str, Any], gpus: int, title: str, hold_s: float = 0) -> None:
        self.sweep_dir = Path(sweep_dir).resolve()
        self.cluster = cluster
        self.gpus = gpus
        self.title = title
        self.hold_s = hold_s
        self._exps: dict[str, Any] = {}
        self._tasks: dict[str, Any] = {}
        self._scripts: dict[str, str] = {}

    def _home(self) -> Path:
        return self.sweep_dir / "nemo_run"

    def launch(self, refs: list[RunRef], mode: str, stage: int) -> dict[str, JobState]:
        gpus = self.gpus if mode == "train" else 0
        return {ref.task: self.submit_item(ref.task, run_spec(self.sweep_dir, ref, mode, self.hold_s), f"s{stage}",
                                           gpus) for ref in refs}

    def submit_item(self, key: str, item: Any, label: str, gpus: int = 0) -> JobState:
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
        with no_stdin():
            exp = run.Experiment(self.title, id=batch.exp_id, log_level="ERROR", clean_mode=True,
                                 enable_goodbye_message=False, skip_status_at_exit=True)
            exp.__enter__()  # kept open: leaving the block would wait for the job
            exp.add(task.script, executor=task.executor, name=task.name)
            exp.run(detach=False)
        self._exps[key], self._tasks[key] = exp, task
        return JobState("running", job_id=batch.exp_id, detail=str(task.job_dir))

    def poll(self, refs: list[RunRef]) -> dict[str, JobState]:
        out = {}
        for ref in refs:
            exp = self._exps.get(ref.task)
            if exp is None:
                out[ref.task] = JobState("lost", detail="not launched by this process")
                continue
            info = (exp.status(return_dict=True) or {}).get(self._tasks[ref.task].name, {})
            app = str(info.get("status", "UNKNOWN")).split()[0].split(".")[-1]
            status = {"SUCCEEDED": "succeeded", "FAILED": "failed", "CANCELLED": "cancelled",
                      "RUNNING": "running", "PENDING": "submitted", "SUBMITTED": "submitted"}.get(app, "running")
            out[ref.task] = JobState(status, job_id=exp._id, exit_code=0 if status == "succeeded" else None)
        return out

    def cancel(self, ref: RunRef) -> None:
        exp = self._exps.get(ref.task)
        if exp is not None:
            try:
                exp.cancel(self._tasks[ref.task].name)
            except Exception:  # noqa: BLE001 - cancelling a finished local job is harmless
                pass

    def log_files(self, ref: RunRef) -> list[Path]:
        task = self._tasks.get(ref.task)
        root = Path(task.job_dir) if task is not None else None
        files = sorted(root.rglob("*.log")) if root and root.exists() else []
        # torchx writes stdout.log, stderr.log and combined.log (both streams): keep only combined.log so that
        # no line is counted twice
        combined = [f for f in files if f.name == "combined.log"]
        return combined or files

    def payload_out(self, ref: RunRef) -> Path:
        task = self._tasks.get(ref.task)
        return Path(task.job_dir) / "out" if task is not None else self._home() / "missing"

    def script(self, ref: RunRef) -> str | None:
        return self._scripts.get(ref.task)


class SlurmBackend:
    """NeMo-Run ``SlurmExecutor`` through the launcher's submit/track modules: every run of a launch is one Slurm
    job of one NeMo-Run experiment (no ``afterok`` chains); state from squeue/sacct; a job that vanished is lost.

    Over an SSH tunnel (``cluster.tunnel.kind=ssh``) squeue/sacct/scancel run on the cluster through the tunnel,
    and the logs and ``out/effective_config.json``, written in the job folder on the cluster (``host_dir``,
    under ``cluster.tunnel.job_dir``), are copied back into the task folder on this machine when read.
    """

    max_concurrent = None
    enforce_time_limit = False

    def __init__(self, sweep_dir: Path, m: dict[str, Any], repo: Path, hold_s: float = 0) -> None:
        self.sweep_dir = Path(sweep_dir).resolve()
        self.cluster = m["config"]["cluster"]
        self.title = m["name"]
        self.repo = repo
        self.allow_dirty = bool(m.get("allow_dirty"))
        self.pack = bool(m["config"].get("pack"))
        self.hold_s = hold_s
        self._subs: dict[str, Any] = {}
        self._submitted_at: dict[str, float] = {}
        self._sh: Shell | None = None
        self.remote = cl.tunnel_field(self.cluster, "kind", "local") == "ssh"
        # only a real ``true`` opts in (an older manifest masked this switch to a truthy "***")
        self.allow_ssh_secrets = self.cluster.get("allow_ssh_secrets") is True
        self._load_known(m)

    def _shell(self) -> Shell:
        """Where squeue/sacct/scancel run: here on a login node, through the SSH tunnel otherwise (one connection,
        opened on first use)."""
        if self._sh is None:
            from launchers.shell import shell_for

            self._sh = shell_for(self.cluster)
        return self._sh

    def _load_known(self, m: dict[str, Any]) -> None:
        """Rebuild job ids and folders of earlier submissions from the manifest (status/collect/resume)."""
        for v in m["variants"]:
            for a in v.get("attempts", []):
                if a.get("job_id"):
                    ref = RunRef(v["name"], a["repeat"], a["attempt"])
                    self._subs[ref.task] = _Known(a["job_id"], Path(a["job_dir"]) if a.get("job_dir") else None,
                                                  a.get("pack_step"), host_dir=a.get("host_dir") or "")
                    self._submitted_at[ref.task] = time.time() - 3600

    def launch(self, refs: list[RunRef], mode: str, stage: int) -> dict[str, JobState]:
        from launchers.batch import batch_label

        specs = [run_spec(self.sweep_dir, r, mode, self.hold_s) for r in refs]
        if self.pack:
            return self._submit_packed(refs, specs, batch_label(stage))
        return self.submit_items([r.task for r in refs], specs, batch_label(stage))

    def _submit_packed(self, refs: list[RunRef], specs: list[RunSpec], label: str) -> dict[str, JobState]:
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
            self._subs[ref.task] = _Known(sub.job.job_id, pr.run_dir, pr.name, sub.job.script, pr.host_run_dir)
            self._submitted_at[ref.task] = time.time()
            out[ref.task] = JobState("submitted", job_id=sub.job.job_id, detail=str(pr.run_dir),
                                     record=(("pack_step", pr.name), *self._host_record(pr.host_run_dir)))
        return out

    def submit_item(self, key: str, item: Any, label: str, gpus: int = 0) -> JobState:
        """Queue one RunSpec or JobCommand (e.g. the container preflight) as a Slurm job."""
        return self.submit_items([key], [item], label)[key]

    def submit_items(self, keys: list[str], items: list[Any], label: str) -> dict[str, JobState]:
        from launchers.submit import submit_slurm

        subs = submit_slurm(self.cluster, items, state_dir=self.sweep_dir / "nemo_run", repo=self.repo,
                            title=self.title, label=f"{label}.{time.time_ns() % 10**9}", allow_dirty=self.allow_dirty,
                            allow_ssh_secrets=self.allow_ssh_secrets)
        by_name = {s.name: s for s in subs}
        out = {}
        for key, item in zip(keys, items, strict=True):
            s = by_name[item.name]
            self._subs[key] = s
            self._submitted_at[key] = time.time()
            out[key] = JobState("submitted", job_id=s.job_id, detail=str(s.job_dir),
                                record=self._host_record(s.host_dir))
        return out

    def _host_record(self, host_dir: str) -> tuple[tuple[str, Any], ...]:
        """The manifest field ``host_dir`` (the job folder on the cluster), recorded over SSH only, so that
        ``action=status|collect`` in another process can fetch the logs again."""
        return (("host_dir", host_dir),) if self.remote and host_dir else ()

    def poll(self, refs: list[RunRef]) -> dict[str, JobState]:
        from launchers.pack import PackedRun, pack_states
        from launchers.track import states

        plain = {self._subs[r.task].job_id: self._submitted_at[r.task] for r in refs
                 if r.task in self._subs and not getattr(self._subs[r.task], "pack_step", None)}
        st = states(plain, self._shell()) if plain else {}
        packs: dict[str, list[PackedRun]] = {}
        for r in refs:
            sub = self._subs.get(r.task)
            if sub is not None and getattr(sub, "pack_step", None):
                packs.setdefault(sub.job_id, []).append(PackedRun(sub.pack_step, None, Path(sub.job_dir)))
        packed = {(j, name): s for j, runs in packs.items() for name, s in pack_states(j, runs, self._shell()).items()}
        out = {}
        for r in refs:
            sub = self._subs.get(r.task)
            if sub is None:
                out[r.task] = JobState("lost", detail="no job id recorded")
                continue
            s = packed[(sub.job_id, sub.pack_step)] if getattr(sub, "pack_step", None) else st[sub.job_id]
            out[r.task] = JobState(s.status, job_id=sub.job_id, exit_code=s.exit_code, detail=s.reason)
        return out

    def cancel(self, ref: RunRef) -> None:
        from launchers.pack import cancel_packed_run
        from launchers.submit import cancel

        sub = self._subs.get(ref.task)
        if sub is not None and getattr(sub, "pack_step", None):
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
        if self.remote and getattr(sub, "host_dir", ""):
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
        if self.remote and getattr(sub, "host_dir", ""):
            with contextlib.suppress(SchedulerError):  # no out/ on the cluster: the job wrote nothing
                fetch_files(f"{sub.host_dir}/out", out, self._shell(), lambda n: n == "effective_config.json")
        return out

    def script(self, ref: RunRef) -> str | None:
        sub = self._subs.get(ref.task)
        return getattr(sub, "script", None)


@dataclass(frozen=True)
class _Known:
    """A job known from this process' submission or from the manifest (status/collect/resume)."""

    job_id: str
    job_dir: Path | None
    pack_step: str | None = None
    script: str | None = None
    host_dir: str = ""  # the job folder on the cluster (over SSH; empty on a login node)
