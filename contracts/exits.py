"""The one exit-code table (docs/CONTRACTS.md §5), shared by the sweep, the analysis and the history CLI."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit codes a scheduler (cron, CI) can act on."""

    OK = 0
    BUG = 1
    USAGE = 2
    RUN_FAILED = 3
    REGRESSION = 4
    INFRA = 5
    INTERRUPTED = 130


MEANING: dict[ExitCode, str] = {
    ExitCode.OK: "every kept run is good",
    ExitCode.BUG: "an unexpected internal error (a bug)",
    ExitCode.USAGE: "usage or config error; nothing was written or submitted",
    ExitCode.RUN_FAILED: "a run failed, is incomplete, has too few iterations or is not the variant it claims",
    ExitCode.REGRESSION: "no failures, but a regression or a loss divergence was flagged, or the reference gate "
                         "stopped the arms",
    ExitCode.INFRA: "scheduler or infrastructure error",
    ExitCode.INTERRUPTED: "interrupted",
}

# When several outcomes meet, the most actionable wins: failed runs, then infrastructure, then a regression,
# then a usage error, then a bug.
_PRIORITY = (ExitCode.RUN_FAILED, ExitCode.INFRA, ExitCode.REGRESSION, ExitCode.USAGE, ExitCode.BUG,
             ExitCode.INTERRUPTED)


def combine(*codes: int) -> ExitCode:
    """One exit code for several outcomes: 3 > 5 > 4 > 2 > 1 > 130 > 0.

    Raises:
        ValueError: a code that is not in the table.
    """
    known = {ExitCode(int(c)) for c in codes}
    for c in _PRIORITY:
        if c in known:
            return c
    return ExitCode.OK


def meaning(code: int) -> str:
    """The one-line meaning of ``code`` (``"unknown exit code N"`` for a code outside the table)."""
    try:
        return MEANING[ExitCode(int(code))]
    except ValueError:
        return f"unknown exit code {code}"
