"""The one file-lock helper: an exclusive ``fcntl.flock`` on a lock file (flock(2)), standard library only.

A flock belongs to the open file description: it is freed when the holder closes the file or dies, and a child
started after the open does not keep it (the descriptor is opened close-on-exec). Users: the manifest's
``manifest.json.lock`` (:func:`contracts.manifest.lock`), the conductor's lease (``experiments/conductor/lease.py``,
which keeps the descriptor for as long as it drives the sweep) and the local validate batch's hand-over
(``launchers/validate_batch.py`` and the payload's ``experiments/payload/validate_runs.py``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["LockTimeout", "locked", "open_lock", "try_lock", "unlock"]

POLL_S = 0.05  # s between tries while waiting for a held lock


class LockTimeout(TimeoutError):
    """The lock was not free within the time given; ``path`` names the lock file."""

    def __init__(self, path: Path, timeout_s: float) -> None:
        super().__init__(f"{path} is held by another process for over {timeout_s:.0f} s")
        self.path, self.timeout_s = path, timeout_s


def open_lock(path: str | os.PathLike[str]) -> int:
    """Open (create, mode 0666 less the umask) the lock file ``path``, close-on-exec; returns the descriptor.
    Raises OSError when it cannot be created."""
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)


def try_lock(fd: int) -> bool:
    """Take the exclusive lock on ``fd`` without waiting; False when another open file holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def unlock(fd: int) -> None:
    """Free the lock on ``fd`` (the descriptor stays open)."""
    with contextlib.suppress(OSError):
        fcntl.flock(fd, fcntl.LOCK_UN)


@contextlib.contextmanager
def locked(path: str | os.PathLike[str], timeout_s: float | None = None) -> Iterator[int]:
    """Hold the exclusive lock of ``path`` for the block (yields the descriptor). ``timeout_s``: how long to wait
    for a held lock, None for as long as it takes.

    Raises:
        LockTimeout: the lock was not free within ``timeout_s`` seconds.
        OSError: the lock file cannot be created.
    """
    fd = open_lock(path)
    try:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not try_lock(fd):
            if deadline is not None and time.monotonic() > deadline:
                raise LockTimeout(Path(path), timeout_s or 0.0)
            time.sleep(POLL_S)
        try:
            yield fd
        finally:
            unlock(fd)
    finally:
        os.close(fd)
