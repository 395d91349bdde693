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


def in_print_order() -> None:
    """Make this process' stdout line-buffered, as stderr is (Python >= 3.9), so that when both go to one file
    (cron's ``>> nightly.log 2>&1``, a Slurm job's output) the lines land in the order they were printed and the
    final ``exit code N: ...`` line on stderr is the last one. Without it stdout redirected to a file is
    block-buffered and is written only at exit, after every stderr line. Called first by each CLI's ``main``.
    A stream that cannot be reconfigured (a test's capture object) is left as it is."""
    import sys

    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(line_buffering=True)
            except (ValueError, OSError):  # a closed or detached stream
                pass
