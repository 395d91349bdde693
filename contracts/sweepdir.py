"""SweepDir: the one owner of every path of a sweep folder (docs/CONTRACTS.md §3), as submitit's JobPaths owns a
job's. No stage builds a path of the sweep folder by hand.

    <root>/
      manifest.json, manifest.json.lock   the conductor/planner, through contracts.manifest
      nemo_run/                           NEMORUN_HOME of this sweep (launchers)
      preflight/                          the container preflight job's output (conductor)
      variants/<variant>/variant.json     planner
      variants/<variant>/job.sh           planner (as it would be submitted), conductor (as submitted, latest)
      variants/<variant>/attempt-<k>/     (r<repeat>-attempt-<k>/ for repeats > 0) conductor: job.sh, logs/, effective_config.json (copied); analysis: run.json
      report/                             analysis: summary.json, report.md, report.html, *.png;
                                          conductor: history.json, history.html
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from contracts.records import RunRef

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class SweepDir:
    """Paths of one sweep folder. ``root`` is kept as given (relative paths stay relative)."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    # the sweep
    @property
    def manifest(self) -> Path:
        return self.root / MANIFEST

    @property
    def lock(self) -> Path:
        return self.root / (MANIFEST + ".lock")

    @property
    def conductor_json(self) -> Path:
        """Where the conductor's own time went, one session per command (experiments/timeline.py, §3)."""
        return self.root / "conductor.json"

    @property
    def collect_job(self) -> Path:
        """A detached sweep's chained collect job: its Slurm job id, the run jobs it waits for, its log folder
        (experiments/conductor/chain.py, §3)."""
        return self.root / "collect_job.json"

    @property
    def nemo_run(self) -> Path:
        return self.root / "nemo_run"

    @property
    def preflight(self) -> Path:
        return self.root / "preflight"

    @property
    def variants(self) -> Path:
        return self.root / "variants"

    def exists(self) -> bool:
        """True when the folder holds a manifest (it is a sweep folder)."""
        return self.manifest.exists()

    # one variant
    def variant_dir(self, variant: str) -> Path:
        return self.variants / variant

    def variant_json(self, variant: str) -> Path:
        return self.variant_dir(variant) / "variant.json"

    def job_sh(self, variant: str) -> Path:
        """The variant's job script: as it would be submitted (plan), then as its latest attempt was."""
        return self.variant_dir(variant) / "job.sh"

    # one attempt
    def attempt_dir(self, ref: RunRef) -> Path:
        return self.variant_dir(ref.variant) / ref.folder

    def attempt_job_sh(self, ref: RunRef) -> Path:
        return self.attempt_dir(ref) / "job.sh"

    def logs(self, ref: RunRef) -> Path:
        return self.attempt_dir(ref) / "logs"

    def log_dir_rel(self, ref: RunRef) -> str:
        """``logs`` relative to the root, as the manifest's ``log_dir`` records it."""
        return f"variants/{ref.variant}/{ref.folder}/logs"

    def effective_config(self, ref: RunRef) -> Path:
        return self.attempt_dir(ref) / "effective_config.json"

    def run_json(self, ref: RunRef) -> Path:
        return self.attempt_dir(ref) / "run.json"

    def run_jsons(self) -> Iterator[Path]:
        """Every ``run.json`` written by the analysis so far."""
        return self.variants.glob("*/*attempt-*/run.json")

    # the report (analysis) and history (conductor)
    @property
    def report(self) -> Path:
        return self.root / "report"

    @property
    def summary_json(self) -> Path:
        return self.report / "summary.json"

    @property
    def history_json(self) -> Path:
        return self.report / "history.json"

    @property
    def history_html(self) -> Path:
        return self.report / "history.html"
