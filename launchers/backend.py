"""Execution backends the orchestrator drives: one interface, a local one (NeMo-Run LocalExecutor + torchrun)
and a Slurm one (NeMo-Run SlurmExecutor, launchers/slurm_backend.py).

A backend launches one run (:class:`~launchers.attempts.RunRef`) as its own NeMo-Run task, reports the job's
scheduler state, cancels it, and lists its log files. States use NeMo-Run/torchx AppState names
(PENDING, SUBMITTED, RUNNING, SUCCEEDED, FAILED, CANCELLED, UNKNOWN); the orchestrator maps them onto the manifest
statuses and never takes them as the final word (CASES C08).
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from launchers.attempts import RunRef

TERMINAL_APPSTATES = ("SUCCEEDED", "FAILED", "CANCELLED")


@dataclass(frozen=True)
class JobState:
    """Scheduler view of one job: AppState name, Slurm job id (if any), exit code (if known)."""

    state: str
    job_id: str | None = None
    exit_code: int | None = None
    detail: str = ""


class Backend(Protocol):
    """What the orchestrator needs from an executor backend."""

    max_concurrent: int | None

    def launch(self, ref: RunRef, variant_json: Path, mode: str) -> JobState: ...

    def launch_module(self, ref: RunRef, module: str, args: list[str], distributed: bool = False) -> JobState: ...

    def poll(self, ref: RunRef) -> JobState: ...

    def cancel(self, ref: RunRef) -> None: ...

    def log_files(self, ref: RunRef) -> list[Path]: ...

    def payload_out(self, ref: RunRef) -> Path: ...


def payload_command(variant_json: Path, out_dir: Path, ref: RunRef, mode: str, hold_s: float = 0) -> list[str]:
    """Arguments of ``python -m experiments.train`` for one run (the payload CLI, docs/HELPERS_BRIEF.md)."""
    args = [str(variant_json), str(out_dir), "--attempt", str(ref.attempt), "--mode", mode]
    if hold_s:
        args += ["--hold-s", str(hold_s)]
    return args


class LocalBackend:
    """NeMo-Run ``LocalExecutor`` on this machine: torchrun over the local GPUs, one run at a time.

    Runs go one after another (``max_concurrent = 1``) so that variants never share a GPU. Validate mode (no GPU,
    or ``mode=validate``) starts a single process without torchrun: it needs no distributed launch.
    """

    max_concurrent = 1

    def __init__(self, sweep_dir: Path, gpus: int, env: dict[str, str], hold_s: float = 0) -> None:
        from launchers.home import nemo_run

        self.sweep_dir = Path(sweep_dir)
        self.run = nemo_run(self.sweep_dir / "nemo_run")
        self.gpus = gpus
        self.env = env
        self.hold_s = hold_s
        self._exps: dict[str, object] = {}

    def payload_out(self, ref: RunRef) -> Path:
        return self.sweep_dir / "nemo_run" / "payload" / ref.task

    def launch(self, ref: RunRef, variant_json: Path, mode: str) -> JobState:
        out = self.payload_out(ref)
        out.mkdir(parents=True, exist_ok=True)
        job_variant = out / "variant.json"
        shutil.copyfile(variant_json, job_variant)
        args = payload_command(job_variant, out, ref, mode, self.hold_s)
        return self.launch_module(ref, "experiments.train", args, distributed=mode == "train" and self.gpus > 0)

    def launch_module(self, ref: RunRef, module: str, args: list[str], distributed: bool = False) -> JobState:
        """Start ``python -m module args`` as NeMo-Run task ``ref.task`` (torchrun over the GPUs if distributed)."""
        run = self.run
        env = dict(self.env)
        env.setdefault("PYTHONUNBUFFERED", "1")
        if distributed:
            ex = run.LocalExecutor(ntasks_per_node=self.gpus, launcher="torchrun", env_vars=env)
            script = run.Script(path=module, m=True, args=args, entrypoint="python")
        else:
            ex = run.LocalExecutor(ntasks_per_node=1, env_vars=env)
            script = run.Script(path=module, m=True, args=args, entrypoint=sys.executable)
        exp = run.Experiment(_title(self.sweep_dir), log_level="WARN")
        exp.__enter__()  # keep it open: exiting would block until the job ends
        exp.add(script, executor=ex, name=ref.task)
        exp.run(detach=False)
        self._exps[ref.task] = exp
        return JobState("RUNNING", job_id=exp._id)

    def poll(self, ref: RunRef) -> JobState:
        exp = self._exps.get(ref.task)
        if exp is None:
            return JobState("UNKNOWN", detail="not launched in this process")
        st = exp.status(return_dict=True) or {}
        info = st.get(ref.task, {})
        state = str(info.get("status", "UNKNOWN")).split()[0].split(".")[-1]
        exit_code = 0 if state == "SUCCEEDED" else None
        return JobState(state, job_id=exp._id, exit_code=exit_code)

    def cancel(self, ref: RunRef) -> None:
        exp = self._exps.get(ref.task)
        if exp is not None:
            try:
                exp.cancel(ref.task)
            except Exception:  # noqa: BLE001 - cancelling a finished local job is harmless
                pass

    def log_files(self, ref: RunRef) -> list[Path]:
        exp = self._exps.get(ref.task)
        root = Path(exp._exp_dir) / ref.task if exp is not None else None
        files = sorted(root.rglob("*.log")) if root and root.exists() else []
        # torchx writes stdout.log, stderr.log and combined.log (both streams): keep only combined.log so that
        # no line is counted twice
        combined = [f for f in files if f.name == "combined.log"]
        files = combined or files
        out = self.payload_out(ref)
        return files + sorted(p for p in out.glob("*.log") if p.is_file())


def _title(sweep_dir: Path) -> str:
    return Path(sweep_dir).name.replace("-", "_")
