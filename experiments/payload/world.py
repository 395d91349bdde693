"""The launched world of a payload job: its ranks, the nodes they run on and the node list Slurm gave.

A multi-node job starts through torchrun (launchers/batch.py ``torchrun_across_nodes``): every worker has ``RANK``,
``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``. Validate mode then joins the real world
with a gloo process group (the CPU backend; no GPU is needed) and gathers each rank's node name, so that the
effective config records what ran, not what was asked: ``nodelist`` (``SLURM_JOB_NODELIST``, else
``SLURM_NODELIST``, Slurm's compact form such as ``n[1-2]``), ``node_of_rank`` (one node name per rank, in rank
order), ``ranks_per_node`` and the world size. A world of one process, or ranks started by ``srun`` alone
(no ``MASTER_ADDR``), is read from the environment without a process group.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

JOIN_TIMEOUT_S = 300  # seconds for every rank to join the gloo group (a rank that never comes is an error)


@dataclass(frozen=True)
class World:
    """What one job launched. ``world_size``: ranks in the job; ``rank``: this process's; ``nodelist``: Slurm's node
    list (``None`` outside Slurm); ``node_of_rank``: node name of each rank (only this rank's without a group);
    ``joined``: a process group over every rank was created (and ``node_of_rank`` is complete)."""

    world_size: int
    rank: int
    nodelist: str | None
    node_of_rank: tuple[str, ...]
    joined: bool = False
    backend: str | None = None
    problems: tuple[str, ...] = field(default=())

    @property
    def ranks_per_node(self) -> dict[str, int]:
        """Ranks on each node, in the order the nodes first appear in rank order."""
        out: dict[str, int] = {}
        for node in self.node_of_rank:
            out[node] = out.get(node, 0) + 1
        return out

    def hardware(self) -> dict[str, Any]:
        """The CONTRACTS §6 ``hardware`` fields this world fills: ``nodelist``, ``node_of_rank``, ``ranks_per_node``
        and, when a group was joined, ``world_size`` and ``nodes`` as launched."""
        out: dict[str, Any] = {"nodelist": self.nodelist, "node_of_rank": list(self.node_of_rank),
                               "ranks_per_node": self.ranks_per_node}
        if self.joined:
            out["world_size"] = self.world_size
            out["nodes"] = len(self.ranks_per_node)
        return out


def node_name() -> str:
    """This process's node: ``SLURMD_NODENAME`` (the Slurm node, also when several emulated nodes share a host),
    else the host name."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


def nodelist() -> str | None:
    """Slurm's node list of the job (``SLURM_JOB_NODELIST``, else the older ``SLURM_NODELIST``), or None."""
    return os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST") or None


def _int_env(name: str, default: int) -> int:
    text = os.environ.get(name, "")
    return int(text) if text.isdigit() else default


def launched_by_torchrun() -> bool:
    """True when torchrun (or any env:// launcher) started this process as one of several ranks."""
    return _int_env("WORLD_SIZE", 1) > 1 and bool(os.environ.get("MASTER_ADDR")) and bool(os.environ.get("MASTER_PORT"))


def join(timeout_s: float = JOIN_TIMEOUT_S) -> World:
    """Join the launched world: a gloo process group over every rank when torchrun started several, else the
    environment's view. The group stays initialised (the caller ends it with :func:`leave`).

    Raises:
        RuntimeError: the group could not be formed within ``timeout_s`` (torch's own message).
    """
    rank = _int_env("RANK", _int_env("SLURM_PROCID", 0))
    me = node_name()
    if not launched_by_torchrun():
        size = _int_env("WORLD_SIZE", _int_env("SLURM_NTASKS", 1))
        return World(world_size=size, rank=rank, nodelist=nodelist(), node_of_rank=(me,))
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group(backend="gloo", init_method="env://", timeout=timedelta(seconds=timeout_s))
    size = dist.get_world_size()
    nodes: list[Any] = [None] * size
    dist.all_gather_object(nodes, me)
    problems = []
    expected = _int_env("WORLD_SIZE", size)
    if expected != size:
        problems.append(f"WORLD_SIZE={expected} but the process group has {size} ranks")
    return World(world_size=size, rank=dist.get_rank(), nodelist=nodelist(), node_of_rank=tuple(str(n) for n in nodes),
                 joined=True, backend=str(dist.get_backend()), problems=tuple(problems))


def leave() -> None:
    """End the process group :func:`join` created (after a last barrier, so no rank exits while another still
    talks to it); nothing when none exists."""
    try:
        import torch.distributed as dist
    except ImportError:
        return
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
