"""One conductor per sweep: the lease ``<sweep>/conductor.lease`` (docs/CONTRACTS.md §4).

A command that acts on a sweep (``run``, a resume, ``collect``, ``cancel``) holds the lease for as long as it acts:
an exclusive ``fcntl.flock`` on the file, whose content names the holder (host, pid, the pid's start time, action,
since when). A second command finds the lock taken and exits 2 naming the holder (:class:`LeaseHeld`);
``action=status`` only reads the record.

The OS frees the lock when its holder dies (any death: SIGKILL, an OOM kill), so a dead holder's lease is simply
taken, with a note naming it (the record was not cleared: its holder ended without releasing). The file is opened
close-on-exec, so a job the conductor starts never holds it. Should the lock still be held while its recorded holder
is on this host and dead (another process holds the file open), the file is replaced (unlinked and created
again) and that note names the dead holder; a holder on another host is never presumed dead. After taking the
lock the holder checks that the path still names the file it locked (another process may have replaced it in
between) and tries again if not: the pattern of ``filelock``'s ``UnixFileLock`` plus the inode check of
Debian's ``lockfile-progs``.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from contracts.errors import ContractError
from contracts.locks import open_lock, try_lock, unlock
from contracts.manifest import now_iso
from contracts.procfs import process_alive, process_start
from contracts.sweepdir import SweepDir

LEASE_FILE = "conductor.lease"
ACTIONS = ("run", "resume", "collect", "cancel")


class LeaseHeld(ContractError):
    """Another live conductor holds the sweep's lease (exit code 2); the message names it."""

    exit_code = 2


@dataclass(frozen=True)
class Holder:
    """Who holds (or last held) a sweep's lease: ``host`` (``socket.gethostname()``), ``pid``, ``start`` (the pid's
    start time in clock ticks since boot, ``/proc/<pid>/stat`` field 22, so that a reused pid is not taken for the
    holder; None where unknown), ``action`` (one of :data:`ACTIONS`), ``since`` (ISO 8601 UTC)."""

    host: str
    pid: int
    action: str
    since: str
    start: int | None = None

    @classmethod
    def me(cls, action: str) -> Holder:
        return cls(socket.gethostname(), os.getpid(), action, now_iso(), process_start(os.getpid()))

    @classmethod
    def from_text(cls, text: str) -> Holder | None:
        """The record in the lease file, or None when it is empty (released) or unreadable."""
        try:
            d = json.loads(text)
            return cls(str(d["host"]), int(d["pid"]), str(d["action"]), str(d["since"]),
                       None if d.get("start") is None else int(d["start"]))
        except (ValueError, KeyError, TypeError):
            return None

    @property
    def local(self) -> bool:
        return self.host == socket.gethostname()

    def dead(self) -> bool:
        """True only when the holder is known dead: on this host and its pid gone (or reused by another process)."""
        return self.local and not process_alive(self.pid, self.start)

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host} (action={self.action}, since {self.since})"


def lease_path(sd: SweepDir) -> Path:
    return sd.root / LEASE_FILE


def read_holder(sd: SweepDir) -> Holder | None:
    """The recorded holder of the sweep's lease (None: never taken or released). Read-only: status shows it."""
    try:
        return Holder.from_text(lease_path(sd).read_text())
    except OSError:
        return None


class Lease:
    """The held lease of one sweep (a context manager). :func:`acquire` makes one; ``note`` says whose stale
    lease it took over (None when the previous holder released it)."""

    def __init__(self, sd: SweepDir, fd: int, holder: Holder, note: str | None) -> None:
        self.sd, self.fd, self.holder, self.note = sd, fd, holder, note

    def release(self) -> None:
        """Clear the record and free the lock (idempotent)."""
        if self.fd < 0:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self.fd, 0)
        unlock(self.fd)
        os.close(self.fd)
        self.fd = -1

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def acquire(sd: SweepDir, action: str) -> Lease:
    """Take the sweep's lease for ``action`` without waiting.

    Raises:
        LeaseHeld: a live conductor holds it (the message names host, pid, action and since when, and how to
            stop it).
        OSError: the sweep folder cannot be written.
    """
    if action not in ACTIONS:
        raise ValueError(f"lease action {action!r}; valid: {', '.join(ACTIONS)}")
    path = lease_path(sd)
    note = None
    for _ in range(5):
        fd = open_lock(path)
        if not try_lock(fd):
            holder = _settled(fd)
            os.close(fd)
            if holder is not None and holder.dead():
                # the lock outlived its holder (another process holds the file open): replace the file
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                note = _stale_note(holder)
                continue
            who = holder.describe() if holder else "a conductor that has not written its record yet"
            raise LeaseHeld(f"sweep {sd.root} is being driven by {who}; one conductor acts on a sweep at a time. "
                            f"Wait for it, or stop it with: python -m experiments.sweep action=cancel "
                            f"output_dir={sd.root}") from None
        if not _same(fd, path):  # replaced between open and lock: lock the new file
            os.close(fd)
            continue
        previous = Holder.from_text(_read(fd))
        if previous is not None:
            note = _stale_note(previous)
        me = Holder.me(action)
        os.ftruncate(fd, 0)
        try:
            os.pwrite(fd, (json.dumps(asdict(me)) + "\n").encode(), 0)
            os.fsync(fd)
        except OSError as e:  # a full disk: the lock alone keeps other conductors out; only the record is missing
            note = "; ".join(filter(None, [note, f"the lease holder's record was not written ({e.strerror}); "
                                                 "the lease holds without it"]))
        if not _same(fd, path):  # replaced by a takeover while the record was written: lock the new file
            os.close(fd)
            continue
        return Lease(sd, fd, me, note)
    raise LeaseHeld(f"the lease file {path} kept changing while it was taken; try again")


SETTLE_S = 2.0  # s a new holder has to write its record once it has the lock


def _same(fd: int, path: Path) -> bool:
    try:
        return os.fstat(fd).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False


def _settled(fd: int) -> Holder | None:
    """The holder's record of a taken lock. A holder writes it right after it took the lock, so an empty record, or
    the dead previous holder's, is read again for up to ``SETTLE_S`` seconds before it is believed."""
    end = time.monotonic() + SETTLE_S
    while True:
        holder = Holder.from_text(_read(fd))
        if (holder is not None and not holder.dead()) or time.monotonic() > end:
            return holder
        time.sleep(0.02)


def _read(fd: int) -> str:
    try:
        return os.pread(fd, 4096, 0).decode(errors="replace")
    except OSError:
        return ""


def _stale_note(h: Holder) -> str:
    return f"took over the lease of {h.describe()}, which ended without releasing it"


__all__ = ["ACTIONS", "LEASE_FILE", "Holder", "Lease", "LeaseHeld", "acquire", "lease_path",
           "read_holder"]
