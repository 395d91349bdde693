"""The small exception hierarchy shared by every stage (docs/CONTRACTS.md §5 maps each to an exit code)."""

from __future__ import annotations


class ContractError(Exception):
    """Base class of the errors below."""

    exit_code = 1


class ConfigError(ContractError, ValueError):
    """A user-facing configuration error (exit code 2). The message names the bad value and the valid ones."""

    exit_code = 2


class ManifestError(ContractError, RuntimeError):
    """``manifest.json`` is missing, unreadable or of an unknown schema (exit code 2); the message says which file
    and how to recover."""

    exit_code = 2


class SweepExistsError(ManifestError):
    """The sweep folder is already held by another sweep (exit code 2): nothing was written."""
