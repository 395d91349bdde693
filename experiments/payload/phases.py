"""Phase stamps: where a run's wall time goes before and after its steps (docs/CONTRACTS.md §6).

Rank 0 prints one line per phase, ``[payload] phase <name> at <epoch s>`` (seconds since the epoch, ms
resolution, so the analysis can line them up with the conductor's launch and end of the job):

- ``launcher_start``: the start of the payload's parent when it is torchrun (its rendezvous and worker spawn count
  as launch, not as the payload's);
- ``start``: the payload process's own start (``/proc/self/stat`` field 22), so the interpreter's start counts;
- ``imported``: the training stack is imported (Megatron-Bridge, Transformer Engine, Megatron-Core);
- ``checked``: the payload's own pre-check of the config is done;
- ``initialized``: Megatron's initialisation and the model build are done (the train-start callback);
- ``trained``: ``pretrain`` returned;
- ``exit``: the payload is about to exit.

Reading ``/proc`` never fails a run: a phase whose time is unknown is not printed.
"""

from __future__ import annotations

import os
import time

from contracts import procfs
from experiments.payload.runtime_info import rank, say

PHASES = ("launcher_start", "start", "imported", "checked", "initialized", "trained", "exit")


def process_start(pid: int | str = "self") -> float | None:
    """Epoch seconds at which process ``pid`` started (:mod:`contracts.procfs`: ``/proc/<pid>/stat`` field 22 and
    the boot time); None where that cannot be read."""
    ticks = procfs.process_start(pid)
    return procfs.epoch_of(ticks) if ticks is not None else None


def _parent_is_torchrun() -> bool:
    cmd = " ".join(procfs.cmdline(os.getppid()) or ())
    return "torchrun" in cmd or "torch.distributed.run" in cmd


def stamp(name: str, at: float | None = None) -> None:
    """Print the stamp of phase ``name`` (one of :data:`PHASES`) on rank 0; ``at``: epoch s, default now."""
    if rank() == 0:
        say(f"[payload] phase {name} at {time.time() if at is None else at:.3f}")


def stamp_start() -> None:
    """The stamps of the launcher's and this process's start (the first lines the payload prints)."""
    if _parent_is_torchrun() and (t := process_start(os.getppid())) is not None:
        stamp("launcher_start", t)
    if (t := process_start()) is not None:
        stamp("start", t)
