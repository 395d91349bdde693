"""The small exception hierarchy of the history stage.

Every error names the bad value, the valid ones where there are any, and what to do next. Nothing already
recorded is touched when one is raised: writes happen in one transaction that is rolled back.

Exit codes (CONTRACTS §5): :class:`HistoryInputError` is a usage/config error (2); :class:`HistoryStoreError`
and its subclasses are infrastructure errors (5). :func:`exit_code_for` maps an exception to its code.
"""

from __future__ import annotations


class HistoryError(Exception):
    """Base class of every error raised by ``analysis.history``."""

    exit_code = 1


class HistoryInputError(HistoryError, ValueError):
    """Bad input: an unreadable or malformed summary.json, a bad ``history.url``, a bad option value (exit 2)."""

    exit_code = 2


class HistoryStoreError(HistoryError):
    """The history database cannot be used right now (unreachable, refused, ...) (exit 5)."""

    exit_code = 5


class HistoryLockedError(HistoryStoreError):
    """Another writer held the database longer than the busy timeout; nothing was written (exit 5)."""


class HistoryCorruptError(HistoryStoreError):
    """The database file is not a readable SQLite database; it was left untouched (exit 5)."""


class HistorySchemaError(HistoryStoreError):
    """The database schema is newer than this tool, or the database was not created by this tool (exit 5)."""


def exit_code_for(exc: BaseException) -> int:
    """Exit code (CONTRACTS §5) for ``exc``: 2 for input errors, 5 for store errors, 1 for anything else."""
    return getattr(exc, "exit_code", 1) if isinstance(exc, HistoryError) else 1
