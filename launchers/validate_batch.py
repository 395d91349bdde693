"""One local validate-mode job for many runs: the runs of one launch validated by one process,
``python -m experiments.payload.validate_runs RUNS_JSON``, instead of one process each (each imports torch and
Megatron-Core, about 4 s).

Each run keeps what its own job would have had, in ``<root>/<task>/``: its log ``<task>.log`` (the lines
``experiments.train --mode validate`` prints, and what the libraries print while it is validated), ``out/``
with its effective_config.json, and ``exit.json`` with its exit code. Its state is the one a job of its own would
report: running while the shared job runs and its exit file is missing, ``succeeded`` (exit 0) or ``failed`` once the
file is there, and the shared job's final state when that ended first (cancelled, or failed before the run).

The process follows (``--follow FOLLOW_IDLE_S``): a later launch of the same sweep (a gated stage, opened once the
first stage was analysed) is handed to it with :meth:`ValidateBatch.hand_over` instead of starting a second process
(about 4 s of imports saved), and :meth:`ValidateBatch.finish` ends it. The protocol (``more-<n>.json``, ``done``,
``closed``, ``lock``) is described in :mod:`experiments.payload.validate_runs`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from contracts.atomic import write_json
from contracts.jobs import JobState
from contracts.locks import locked
from contracts.records import RunRef
from contracts.statuses import ManifestStatus
from contracts.sweepdir import SweepDir
from launchers.spec import JobCommand

RUNNER = "experiments.payload.validate_runs"
FOLLOW_IDLE_S = 20.0  # s a validate process waits for the next launch (a gate decision takes about 1 s)


class ValidateBatch:
    """The folders and the command of one validate batch rooted at ``root`` for ``refs`` of the sweep folder
    ``sweep_dir``."""

    def __init__(self, root: Path, sweep_dir: Path, refs: list[RunRef]) -> None:
        self.root = Path(root)
        self.sweep = SweepDir(Path(sweep_dir))
        self.refs = list(refs)
        self.handed = 0  # more-<n>.json files written

    def folder(self, ref: RunRef) -> Path:
        return self.root / ref.task

    def out_dir(self, ref: RunRef) -> Path:
        return self.folder(ref) / "out"

    def log_files(self, ref: RunRef) -> list[Path]:
        log = self.folder(ref) / f"{ref.task}.log"
        return [log] if log.exists() else []

    def _entries(self, refs: list[RunRef]) -> dict[str, list[dict[str, object]]]:
        return {"runs": [{"variant_json": str(self.sweep.variant_json(r.variant).resolve()),
                          "out_dir": str(self.out_dir(r)), "attempt": r.attempt,
                          "log": str(self.folder(r) / f"{r.task}.log"), "exit": str(self.folder(r) / "exit.json")}
                         for r in refs]}

    def command(self) -> JobCommand:
        """Write ``runs.json`` and return the job that validates every run of it, then follows (module docstring)."""
        path = self.root / "runs.json"
        write_json(path, self._entries(self.refs))
        return JobCommand(name="validate", argv=(sys.executable, "-m", RUNNER, str(path), "--follow",
                                                 str(FOLLOW_IDLE_S)))

    def hand_over(self, refs: list[RunRef]) -> bool:
        """Give ``refs`` to the running process as ``more-<n>.json``; False when it has closed (it waited
        ``FOLLOW_IDLE_S`` or was ended): then the caller starts a new batch. Under the batch's lock."""
        self.root.mkdir(parents=True, exist_ok=True)
        with locked(self.root / "lock"):
            if (self.root / "closed").exists() or (self.root / "done").exists():
                return False
            write_json(self.root / f"more-{self.handed + 1}.json", self._entries(refs))
        self.handed += 1
        self.refs += refs
        return True

    def finish(self) -> None:
        """End the process once it has validated what it was given (writes ``done``; harmless when it ended)."""
        if self.root.exists():
            write_json(self.root / "done", {"runs": len(self.refs)})

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
            return JobState(ManifestStatus.SUCCEEDED if ok else ManifestStatus.FAILED, job_id=shared.job_id,
                            state="SUCCEEDED" if ok else "FAILED", exit_code=0 if ok else None)
        if shared.final:
            status = ManifestStatus.CANCELLED if shared.status == ManifestStatus.CANCELLED else ManifestStatus.FAILED
            return JobState(status, job_id=shared.job_id, state=shared.state or "FAILED",
                            reason="the validate batch ended before this run finished")
        return JobState(shared.status, job_id=shared.job_id, state=shared.state)
