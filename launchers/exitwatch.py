"""Wake the conductor the moment a local job's process exits, instead of at its next poll.

NeMo-Run's ``LocalExecutor`` starts a job as a child process of the conductor (torchx's local scheduler calls
``subprocess.Popen`` in this process). :func:`contracts.procfs.children` lists this process's children before and after a launch;
the new ones are the job's. :class:`ExitWatch` holds a Linux pidfd (``os.pidfd_open``, Linux >= 5.3) for each and
:meth:`ExitWatch.wait` sleeps in ``select`` until one becomes readable (the process exited; it need not be reaped)
or the timeout passes. A fixed poll interval added up to ``poll_s`` (2 s by default) to every local run's wall;
with the watch, the exit is seen within milliseconds and the state is then asked of NeMo-Run as before (it stays
the one source of the job's state: this module only decides *when* to ask).

Without pidfds (not Linux, or the process was reaped already) :meth:`ExitWatch.wait` simply sleeps.
"""

from __future__ import annotations

import os
import select
import time


class ExitWatch:
    """pidfds of the processes of running local jobs, by job key; :meth:`wait` returns early when one exits."""

    def __init__(self) -> None:
        self._fds: dict[str, list[int]] = {}
        self._seen: set[int] = set()  # pidfds already reported exited (their job was polled since)

    def add(self, key: str, pids: set[int]) -> int:
        """Watch ``pids`` (the processes a launch started) under ``key``; returns how many could be watched."""
        fds = []
        for pid in sorted(pids):
            try:
                fds.append(os.pidfd_open(pid))
            except (AttributeError, OSError):  # no pidfd support, or the process is gone already
                continue
        if fds:
            self.discard(key)
            self._fds[key] = fds
        return len(fds)

    def discard(self, key: str) -> None:
        """Stop watching ``key`` (its job is final); closes its pidfds."""
        for fd in self._fds.pop(key, []):
            self._seen.discard(fd)  # the number can be reused by a later pidfd
            try:
                os.close(fd)
            except OSError:
                pass

    def wait(self, timeout_s: float) -> bool:
        """Sleep up to ``timeout_s`` seconds, less when a watched process exits; True when one has exited.

        Each exit is reported once: the caller then polls the job and discards its key once the job is final, and
        until then an exited process does not wake the wait again (no busy loop while NeMo-Run catches up)."""
        live = [fd for fds in self._fds.values() for fd in fds if fd not in self._seen]
        if not live:
            time.sleep(max(0.0, timeout_s))
            return False
        ready, _, _ = select.select(live, [], [], max(0.0, timeout_s))
        self._seen.update(ready)
        return bool(ready)

    def wait_exit(self, key: str, timeout_s: float) -> bool:
        """Sleep until every watched process of ``key`` has exited, ``timeout_s`` seconds at most; True when they
        have (also when ``key`` has none watched)."""
        pending = list(self._fds.get(key, []))
        deadline = time.monotonic() + max(0.0, timeout_s)
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            ready, _, _ = select.select(pending, [], [], left)
            pending = [fd for fd in pending if fd not in ready]
        return True

    def close(self) -> None:
        """Close every pidfd."""
        for key in list(self._fds):
            self.discard(key)
