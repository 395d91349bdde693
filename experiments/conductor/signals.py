"""SIGTERM and SIGHUP end the conductor as SIGINT does (docs/CONTRACTS.md §5): each raises :class:`Stopped` (a
``KeyboardInterrupt``) in the main thread, so that the one Ctrl-C path runs: locally the runs are cancelled and
marked, on Slurm the conductor detaches and the jobs go on; exit 130 either way.

A signal that arrives inside :func:`deferred` (a launch: from marking attempts ``submitting`` to recording the job
ids) is held until the block ends, so that a job started by this process is always recorded before the process
stops. SIGKILL and an OOM kill cannot be caught: those are what adoption on resume is for (tracking.reattach).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_depth = 0
_pending: int | None = None


class Stopped(KeyboardInterrupt):
    """The conductor was asked to stop by ``signum`` (SIGINT, SIGTERM or SIGHUP)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _handler(signum: int, _frame: object) -> None:
    global _pending
    if _depth:
        _pending = signum
        return
    raise Stopped(signum)


def install() -> None:
    """Route SIGINT, SIGTERM and SIGHUP to :class:`Stopped` (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for s in HANDLED:
        signal.signal(s, _handler)


def restore() -> None:
    """Give the signals back their defaults (SIGINT: Python's KeyboardInterrupt)."""
    if threading.current_thread() is not threading.main_thread():
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold a stop signal while the block runs; raise it (:class:`Stopped`) once the outermost block has ended."""
    global _depth, _pending
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if not _depth and _pending is not None:
            signum, _pending = _pending, None
            raise Stopped(signum)
