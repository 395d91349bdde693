"""What an in-process sweep leaves running: the Python threads and the OS threads (``/proc/self/task``) that were
started while it ran and are still alive after it returned.

The analysis libraries start two OS threads of their own when they are imported (Arrow's ``jemalloc_bg_thd`` and
one more), once per process and for good; :func:`warm_libraries` starts them before a count, so that the count
holds only what the sweep itself left behind.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

SETTLE_S = 10.0
"""How long a count waits for threads that are already ending: a joined Python thread leaves ``threading`` before
its OS thread has exited, and on a loaded machine that last step can take a while."""


def warm_libraries(plots: bool = True) -> None:
    """Import what the sweep's analysis imports (the same call the conductor makes during its first poll; with
    ``plots`` scipy.stats and matplotlib too, which the report of a validate sweep also loads): a library that starts
    its thread pool when it is loaded (scipy's OpenBLAS) is no thread the sweep left behind."""
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
        """The Python threads started since the snapshot that are still alive after up to ``SETTLE_S`` seconds,
        described (name and owner class: ``torchx.schedulers.streams.Tee`` for a local job's log copy,
        ``paramiko.transport.Transport`` for an SSH connection)."""
        return _settled(lambda: sorted(_describe(t) for t in set(threading.enumerate()) - self.threads
                                       if t.is_alive()))

    def os(self) -> dict[int, str]:
        """The OS threads started since the snapshot that still run after up to ``SETTLE_S`` seconds: thread id ->
        name."""
        return _settled(lambda: {tid: name for tid, name in os_threads().items() if tid not in self.tids})


def _settled(count):
    """``count()`` once it is empty, or its last value after ``SETTLE_S`` seconds: a thread that still runs then was
    left behind, not caught ending."""
    deadline = time.monotonic() + SETTLE_S
    while (found := count()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return found
