"""Run scheduler commands (sbatch, sacct, squeue, scancel) where the cluster is: here, or over SSH.

A login node runs them as local processes (the same place NeMo-Run's LocalTunnel runs them). Over SSH they go
through NeMo-Run's ``SSHTunnel`` (Fabric), so a laptop uses the one connection NeMo-Run already uses.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from contracts.cluster import ClusterConfig
from launchers.errors import SchedulerError


@dataclass(frozen=True)
class Result:
    """A finished command: ``rc`` (exit status), ``out`` and ``err`` (text)."""

    rc: int
    out: str
    err: str


class Shell(Protocol):
    """Runs one command (an argv list) on the cluster side and returns its :class:`Result`."""

    def __call__(self, argv: Sequence[str], timeout_s: float = 60) -> Result: ...


def local_shell(argv: Sequence[str], timeout_s: float = 60) -> Result:
    """Run ``argv`` here.

    Raises:
        SchedulerError: the program is not on PATH (e.g. ``sbatch``: not a Slurm login node), or it hangs past
        ``timeout_s`` seconds.
    """
    if shutil.which(argv[0]) is None:
        raise SchedulerError(
            f"{argv[0]} is not on PATH: run on a Slurm login node, start the local test cluster "
            "(bash scripts/slurm_local/start.sh), or reach the cluster over SSH (cluster.tunnel.kind=ssh)"
        )
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise SchedulerError(f"{shlex.join(argv)} did not answer within {timeout_s:g} s") from exc
    return Result(proc.returncode, proc.stdout, proc.stderr)


JOIN_S = 10.0
"""How long closing an SSH connection waits for its transport thread to end."""


@dataclass
class TunnelShell:
    """Runs commands through a NeMo-Run tunnel object (``SSHTunnel``); connects on first use and again on the first
    use after :meth:`close`."""

    tunnel: Any

    def __call__(self, argv: Sequence[str], timeout_s: float = 60) -> Result:
        try:
            self.tunnel.connect()
            res = self.tunnel.run(shlex.join(argv), hide=True, warn=True, timeout=timeout_s)
        except (Exception, SystemExit) as exc:  # NeMo-Run exits on failed auth; Fabric/paramiko raise many types
            why = "authentication failed (key refused)" if isinstance(exc, SystemExit) else str(exc)
            raise SchedulerError(f"could not run {argv[0]} over SSH on {self.tunnel.user}@{self.tunnel.host}: "
                                 f"{why}") from exc
        return Result(res.return_code, res.stdout, res.stderr)

    def get(self, remote: str, local: str) -> None:
        """Copy one file from the cluster to this machine.

        Raises:
            SchedulerError: the copy failed (names both paths).
        """
        try:
            self.tunnel.connect()
            self.tunnel.get(remote, local)
        except (Exception, SystemExit) as exc:  # paramiko/Fabric errors; NeMo-Run exits on failed auth
            raise SchedulerError(f"could not copy {remote} from {self.tunnel.host} to {local}: {exc}") from exc

    def close(self) -> None:
        """End the SSH connection and wait, up to ``JOIN_S`` seconds, for its paramiko transport thread to stop
        (harmless when it is not open): paramiko's close asks the thread to stop but does not wait for it."""
        close_tunnel(self.tunnel)


def close_tunnel(tunnel: Any) -> None:
    """Close a NeMo-Run ``SSHTunnel``'s connection and wait, up to ``JOIN_S`` seconds, for its paramiko transport
    thread to end (paramiko asks the thread to stop and returns without waiting)."""
    transport = getattr(getattr(tunnel, "session", None), "transport", None)
    tunnel.cleanup()
    if transport is not None:
        transport.join(JOIN_S)


def close_shell(shell: Shell | None) -> None:
    """Close ``shell``'s connection to the cluster when it has one (a :class:`TunnelShell`); a local shell holds
    nothing."""
    if isinstance(shell, TunnelShell):
        shell.close()


def shell_for(cluster: ClusterConfig) -> Shell:
    """The shell for ``cluster``: :func:`local_shell` on a login node, a :class:`TunnelShell` over SSH.

    Raises:
        LaunchConfigError: the SSH settings cannot make a tunnel (:func:`launchers.slurm.make_tunnel`).
    """
    if not cluster.remote:
        return local_shell
    from launchers.home import nemo_run
    from launchers.slurm import make_tunnel

    return TunnelShell(make_tunnel(nemo_run(), cluster, home=None))
