"""What one job runs: a run of a variant (the payload), or any command (smoke tests, preflight).

The payload's command line is binding (CONTRACTS §11):
``python -m experiments.train VARIANT_JSON OUT_DIR [--mode train|validate] [--attempt K] [--hold-s N]``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from contracts.records import RunRef
from launchers.errors import LaunchConfigError

PAYLOAD_MODULE = "experiments.train"
_TASK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}$")


def check_task_name(name: str) -> str:
    """Return ``name`` if it is a valid task / Slurm job name here: ``[A-Za-z0-9_.-]``, at most 80 characters.

    Raises:
        LaunchConfigError: naming the bad name (use ``contracts.records.safe_name`` to make one).
    """
    if not _TASK.match(name):
        raise LaunchConfigError(
            f"job name {name!r} is not safe: use letters, digits, '_', '.', '-' (at most 80, not starting with "
            "a symbol); contracts.records.safe_name() makes one"
        )
    return name


@dataclass(frozen=True, kw_only=True)
class RunSpec:
    """Attempt ``attempt`` (1, 2, ...) of variant ``variant``, its ``repeat``-th repetition (0-based).

    ``variant_json`` is the planner's ``variants/<variant>/variant.json``; the job gets a copy of it inside its
    NeMo-Run job folder (CONTRACTS §3). ``mode`` and ``hold_s`` (seconds) override the file when set.
    """

    variant: str
    variant_json: Path
    attempt: int = 1
    repeat: int = 0
    mode: str | None = None
    hold_s: float | None = None

    def __post_init__(self) -> None:
        check_task_name(self.variant)
        if self.attempt < 1:
            raise LaunchConfigError(f"attempt={self.attempt} must be >= 1 (attempts are numbered from 1)")
        if self.mode not in (None, "train", "validate"):
            raise LaunchConfigError(f"mode={self.mode!r} must be train, validate or null")

    @property
    def name(self) -> str:
        """Task name of this run in NeMo-Run and Slurm: the run's one name, :attr:`contracts.records.RunRef.task`
        (``<variant>.r<repeat>.a<attempt>``)."""
        return RunRef(self.variant, self.repeat, self.attempt).task

    def payload_args(self, variant_json: str, out_dir: str) -> list[str]:
        """Arguments after ``python`` for this run, given where the job sees its variant.json and output folder."""
        args = ["-m", PAYLOAD_MODULE, variant_json, out_dir, "--attempt", str(self.attempt)]
        if self.mode:
            args += ["--mode", self.mode]
        if self.hold_s:
            args += ["--hold-s", f"{self.hold_s:g}"]
        return args


@dataclass(frozen=True, kw_only=True)
class JobCommand:
    """Any command as one job: ``argv`` (``argv[0]`` is the program), run in the job's code folder. ``nodes``: 0
    runs it once on one node; 2 or more start it on that many nodes through torchrun (one agent per node, a worker
    per GPU: :func:`launchers.batch.torchrun_across_nodes`; ``argv`` must then be ``python -m module ...``), as the
    fabric probe is."""

    name: str
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    nodes: int = 0

    def __post_init__(self) -> None:
        check_task_name(self.name)
        if not self.argv:
            raise LaunchConfigError(f"job {self.name}: empty command")
