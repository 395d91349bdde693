"""The job's side of the validate fork server (:mod:`experiments.payload.preload`, protocol there; issue 17):
``validate_runs`` hands its runs to a worker of the server and waits for it."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import struct
import sys
from pathlib import Path
from typing import Any

HEADER = struct.Struct("!Q")  # the request's length (bytes)


def pidfd(pid: int) -> int | None:
    """A pidfd of ``pid`` (Linux >= 5.3), or None when it cannot be had (gone, or no pidfd support)."""
    try:
        return os.pidfd_open(pid)
    except (OSError, AttributeError):
        return None


def delegate(path: str, argv: list[str]) -> int | None:
    """Run ``validate_runs argv`` in a worker of the server at ``path``; its exit code, or None when the job must
    validate in its own process (no server there, refused, or gone before it forked: nothing has run)."""
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(path)
    except OSError as e:
        print(f"[preload] validating in this process: {path}: {e.strerror or e}", file=sys.stderr, flush=True)
        return None
    with conn:
        body = json.dumps({"argv": [sys.argv[0], *argv], "cwd": os.getcwd(), "env": dict(os.environ),
                           "sys_path": sys.path, "executable": sys.executable}).encode()
        try:
            socket.send_fds(conn, [HEADER.pack(len(body))], [0, 1, 2])
            conn.sendall(body)
        except OSError:
            return None
        lines = conn.makefile("rb")
        first = _line(lines)
        if first is None or "pid" not in first:
            why = first.get("refused") if first else "the server ended before it forked"
            print(f"[preload] validating in this process: {why}", file=sys.stderr, flush=True)
            return None
        pid = int(first["pid"])
        previous = {sig: signal.signal(sig, lambda s, _f: _forward(pid, s))
                    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
        try:
            last = _line(lines)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if last is not None and "exit" in last:
            return int(last["exit"])
        return _orphan_exit(pid, argv)


def _line(lines: Any) -> dict[str, Any] | None:
    try:
        raw = lines.readline()
        return json.loads(raw) if raw else None
    except (OSError, ValueError):
        return None


def _forward(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def _orphan_exit(pid: int, argv: list[str]) -> int:
    """The server ended while its worker ran: wait for the worker, then take the batch's code from the runs'
    exit files (``validate_runs``: 0 when every run exited 0, else the first nonzero code; 1 when one is
    missing)."""
    fd = pidfd(pid)
    if fd is not None:
        select.select([fd], [], [])
        os.close(fd)
    try:
        runs = json.loads(Path(argv[0]).read_text())["runs"]
        codes = [json.loads(Path(r["exit"]).read_text())["exit_code"] for r in runs]
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return 1
    return next((c for c in codes if c), 0)
