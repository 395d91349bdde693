"""Pickled messages over a pipe between a process and a child it forked (issue 17): the report's plot worker
(``analysis.plotproc``) and the plan's render child (``launchers.render_server``).

A message is an 8-byte little-endian length, then that many bytes of pickle; length 0 is ``None`` (a "stop"
message). Both ends are file descriptors of ``os.pipe()``, written and read whole (``os.write`` may write less
than asked; ``os.read`` may return less).
"""

from __future__ import annotations

import os
import pickle
import struct
from typing import Any

_LEN = struct.Struct("<Q")


def send(fd: int, obj: Any) -> None:
    """Write ``obj`` (``None``: the empty message) to ``fd``. Raises what ``pickle.dumps`` raises for an object
    that does not pickle (before anything is written) and OSError (EPIPE) when the reader is gone."""
    data = b"" if obj is None else pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_LEN.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


def _read_exact(fd: int, n: int) -> bytes:
    parts, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise EOFError(f"pipe closed after {got} of {n} bytes")
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def receive(fd: int) -> Any:
    """The next message's object; None for the empty message. Raises EOFError when the writer closed the pipe
    (also between two messages) and what ``pickle.loads`` raises for bytes that do not unpickle."""
    (n,) = _LEN.unpack(_read_exact(fd, _LEN.size))
    return pickle.loads(_read_exact(fd, n)) if n else None
