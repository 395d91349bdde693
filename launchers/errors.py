"""Errors raised by the launch layer, each with the exit code the sweep command returns (CONTRACTS §5).

- :class:`LaunchConfigError` (exit 2): the cluster profile or the request is wrong; nothing was submitted.
- :class:`SchedulerError` (exit 5): the scheduler or the transport refused or failed (sbatch rejected the job,
  sbatch missing, SSH down); whatever had been submitted in the same call was cancelled again.
"""

from __future__ import annotations

from contracts.errors import ConfigError, ContractError


class LaunchError(ContractError):
    """Base class of launch-layer errors. ``exit_code`` is the process exit code for it (CONTRACTS §5)."""

    exit_code = 1


class LaunchConfigError(LaunchError, ConfigError):
    """A usage or configuration error (exit code 2). The message names the bad value and the fix."""

    exit_code = 2


class SchedulerError(LaunchError, RuntimeError):
    """The scheduler or the transport failed (exit code 5). The message carries the scheduler's own words."""

    exit_code = 5
