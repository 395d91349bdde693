"""What an in-process sweep leaves running: the Python threads and the OS threads (``/proc/self/task``) that were
started while it ran and are still alive after it returned.

The analysis libraries start two OS threads of their own when they are imported (Arrow's ``jemalloc_bg_thd`` and
one more), once per process and for good; :func:`warm_libraries` starts them before a count, so that the count
holds only what the sweep itself left behind.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path


def warm_libraries(plots: bool = False) -> None:
    """Import what the sweep's analysis imports (the same call the conductor makes during its first poll)."""
    from analysis.api import preload

    preload(plots=plots)


def os_threads() -> dict[int, str]:
    """This process's OS threads: thread id -> its name (``comm``)."""
    out = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            out[int(task.name)] = (task / "comm").read_text().strip()
        except OSError:  # ended while we looked
            continue
    return out


def _describe(thread: threading.Thread) -> str:
    target = getattr(thread, "_target", None)
    owner = getattr(target, "__self__", None)
    what = f"{type(owner).__module__}.{type(owner).__qualname__}" if owner is not None else \
        f"{type(thread).__module__}.{type(thread).__qualname__}"
    return f"{thread.name} ({what})"


class Leftovers:
    """Snapshot at construction; :meth:`python` and :meth:`os` name what was started since and still runs."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.threads = set(threading.enumerate())
        self.tids = set(os_threads())

    def python(self) -> list[str]:
        """The Python threads started since the snapshot that are still alive, described (name and owner class:
        ``torchx.schedulers.streams.Tee`` for a local job's log copy, ``paramiko.transport.Transport`` for an SSH
        connection)."""
        return sorted(_describe(t) for t in set(threading.enumerate()) - self.threads if t.is_alive())

    def os(self) -> dict[int, str]:
        """The OS threads started since the snapshot that still run: thread id -> name."""
        return {tid: name for tid, name in os_threads().items() if tid not in self.tids}
