"""One local validate-mode job for many runs (issue 17): the runs of one launch validated by one process,
``python -m experiments.payload.validate_runs RUNS_JSON``, instead of one process each (each imports torch and
Megatron-Core, about 4 s).

Each run keeps what its own job would have had, in ``<root>/<task>/``: its log ``<task>.log`` (the lines
``experiments.train --mode validate`` prints, and what the libraries print while it is validated), ``out/``
with its effective_config.json, and ``exit.json`` with its exit code. Its state is the one a job of its own would
report: running while the shared job runs and its exit file is missing, ``succeeded`` (exit 0) or ``failed`` once the
file is there, and the shared job's final state when that ended first (cancelled, or failed before the run).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from contracts.atomic import write_json
from contracts.jobs import JobState
from contracts.records import RunRef
from contracts.sweepdir import SweepDir
from launchers.spec import JobCommand

RUNNER = "experiments.payload.validate_runs"


class ValidateBatch:
    """The folders and the command of one validate batch rooted at ``root`` for ``refs`` of the sweep folder
    ``sweep_dir``."""

    def __init__(self, root: Path, sweep_dir: Path, refs: list[RunRef]) -> None:
        self.root = Path(root)
        self.sweep = SweepDir(Path(sweep_dir))
        self.refs = list(refs)

    def folder(self, ref: RunRef) -> Path:
        return self.root / ref.task

    def out_dir(self, ref: RunRef) -> Path:
        return self.folder(ref) / "out"

    def log_files(self, ref: RunRef) -> list[Path]:
        log = self.folder(ref) / f"{ref.task}.log"
        return [log] if log.exists() else []

    def command(self) -> JobCommand:
        """Write ``runs.json`` and return the job that validates every run of it."""
        runs = [{"variant_json": str(self.sweep.variant_json(r.variant).resolve()), "out_dir": str(self.out_dir(r)),
                 "attempt": r.attempt, "log": str(self.folder(r) / f"{r.task}.log"),
                 "exit": str(self.folder(r) / "exit.json")} for r in self.refs]
        path = self.root / "runs.json"
        write_json(path, {"runs": runs})
        return JobCommand(name="validate", argv=(sys.executable, "-m", RUNNER, str(path)))

    def all_done(self) -> bool:
        """True once every run has its exit file."""
        return all((self.folder(r) / "exit.json").exists() for r in self.refs)

    def state(self, ref: RunRef, shared: JobState) -> JobState:
        """The run's state given the shared job's (see the module docstring); exit codes as a run's own local
        job reports them (0 when it succeeded, unknown otherwise)."""
        try:
            code = json.loads((self.folder(ref) / "exit.json").read_text())["exit_code"]
        except (OSError, ValueError, KeyError, TypeError):
            code = None
        if code is not None:
            ok = code == 0
            return JobState("succeeded" if ok else "failed", job_id=shared.job_id,
                            state="SUCCEEDED" if ok else "FAILED", exit_code=0 if ok else None)
        if shared.final:
            status = "cancelled" if str(shared.status) == "cancelled" else "failed"
            return JobState(status, job_id=shared.job_id, state=shared.state or "FAILED",
                            reason="the validate batch ended before this run finished")
        return JobState(shared.status, job_id=shared.job_id, state=shared.state)
