"""Every status word of docs/CONTRACTS.md §4 as a ``StrEnum``.

A member *is* its string (``ManifestStatus.FAILED == "failed"``) and ``json.dumps`` writes the plain string, so
every JSON schema keeps today's values.
"""

from __future__ import annotations

from enum import StrEnum


class ManifestStatus(StrEnum):
    """Scheduling status of a variant or an attempt in manifest.json (§4)."""

    PLANNED = "planned"
    PRUNED = "pruned"
    GATED = "gated"
    SKIPPED = "skipped"
    SUBMITTED = "submitted"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMEOUT = "timeout"
    LOST = "lost"

    @property
    def final(self) -> bool:
        """True once a job can no longer change."""
        return self in FINAL_STATUSES

    @property
    def live(self) -> bool:
        """True while a job exists in the scheduler (submitted or running)."""
        return self in LIVE_STATUSES


PLAN_STATUSES = frozenset({ManifestStatus.PLANNED, ManifestStatus.PRUNED, ManifestStatus.GATED,
                           ManifestStatus.SKIPPED})
LIVE_STATUSES = frozenset({ManifestStatus.SUBMITTED, ManifestStatus.RUNNING})
FINAL_STATUSES = frozenset({ManifestStatus.SUCCEEDED, ManifestStatus.FAILED, ManifestStatus.CANCELLED,
                            ManifestStatus.TIMEOUT, ManifestStatus.LOST})
# a resume resubmits an attempt that ended in one of these
RESUBMIT_STATUSES = FINAL_STATUSES - {ManifestStatus.SUCCEEDED}


class RunOutcome(StrEnum):
    """Outcome of one run as the analysis reads it (``runs[].status`` of summary.json, §4)."""

    OK = "ok"
    OK_WITH_WARNING = "ok_with_warning"
    VALIDATED = "validated"
    FAILED = "failed"
    INCOMPLETE = "incomplete"
    INSUFFICIENT_ITERATIONS = "insufficient_iterations"
    INVALID_VARIANT = "invalid_variant"
    PRUNED = "pruned"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"  # cancelled (action=cancel, Ctrl-C) before it logged anything: no result, not a failure

    @property
    def good(self) -> bool:
        return self in GOOD_OUTCOMES

    @property
    def bad(self) -> bool:
        return self in BAD_OUTCOMES


GOOD_OUTCOMES = frozenset({RunOutcome.OK, RunOutcome.OK_WITH_WARNING, RunOutcome.VALIDATED})
BAD_OUTCOMES = frozenset({RunOutcome.FAILED, RunOutcome.INCOMPLETE, RunOutcome.INSUFFICIENT_ITERATIONS,
                          RunOutcome.INVALID_VARIANT, RunOutcome.CANCELLED})


class Verdict(StrEnum):
    """Verdict of a comparison against its group's baseline (``comparisons[].verdict``, §7)."""

    FASTER = "faster"
    SLOWER = "slower"
    EQUIVALENT = "equivalent"  # within +-practical_threshold by an equivalence test (TOST)
    NO_SIGNIFICANT_DIFFERENCE = "no_significant_difference"
    NOT_COMPARABLE = "not_comparable"


class Role(StrEnum):
    """A variant's role in its group (§2)."""

    BASELINE = "baseline"
    VARIANT = "variant"
    CONTROL = "control"  # a second copy of the baseline in every block (control=true): an A/A test of the sweep's noise


class Mode(StrEnum):
    """What the payload does (§1)."""

    TRAIN = "train"
    VALIDATE = "validate"


class Action(StrEnum):
    """``action=`` of the sweep command line (§1)."""

    RUN = "run"
    PLAN = "plan"
    STATUS = "status"
    COLLECT = "collect"
    CANCEL = "cancel"


class Preflight(StrEnum):
    """``preflight=`` of the sweep command line (§1)."""

    STATIC = "static"
    CONTAINER = "container"
    OFF = "off"


class StageStatus(StrEnum):
    """Status of a stage of a staged preset (manifest ``stages[].status``, §2)."""

    OPEN = "open"
    GATED = "gated"
    CLOSED = "closed"


def values(enum: type[StrEnum]) -> tuple[str, ...]:
    """The string values of ``enum`` in declaration order (for error messages and docs)."""
    return tuple(m.value for m in enum)
