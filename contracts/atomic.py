"""The one atomic writer: a temp file in the same folder, then ``os.replace`` (docs/CONTRACTS.md §3).

A reader never sees a half-written file, and a crash leaves the old file intact. New files get the mode a plain
``open()`` would give them under the process' umask (0666 & ~umask), so teammates on shared storage can read
reports and manifests whenever the user's umask lets them.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any


def _umask() -> int:
    # os.umask can only be read by setting it; set it back at once (called once per process)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_MODE = 0o666 & ~_umask()


def write_bytes(path: str | os.PathLike[str], data: bytes, *, durable: bool = False) -> Path:
    """Write ``data`` to ``path`` atomically, creating the parent folder. ``durable=True`` fsyncs first (the
    manifest: it must survive a power loss). Returns the path.

    Raises:
        OSError: the folder cannot be created or written (read-only, disk full); the old file is left intact and
            no temp file is left behind.
    """
    return write_stream(path, lambda f: f.write(data), durable=durable)


def write_stream(path: str | os.PathLike[str], fill: Callable[[IO[bytes]], object], *,
                 durable: bool = False) -> Path:
    """Write ``path`` atomically from ``fill(f)``, which writes into the open binary file ``f`` (a log copied a
    chunk at a time, never whole in memory). Returns the path; raises like :func:`write_bytes`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, _MODE)
        with os.fdopen(fd, "wb") as f:
            fill(f)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_text(path: str | os.PathLike[str], text: str, *, durable: bool = False) -> Path:
    """:func:`write_bytes` of UTF-8 text."""
    return write_bytes(path, text.encode("utf-8"), durable=durable)


def dumps(data: Any, *, strict: bool = False) -> str:
    """The JSON text every file of the sweep folder uses: indent 2, key order kept, a final newline.

    ``strict=True`` refuses NaN and infinities (ValueError) instead of writing JSON that other tools reject.
    """
    return json.dumps(data, indent=2, sort_keys=False, default=str, allow_nan=not strict) + "\n"


def write_json(path: str | os.PathLike[str], data: Any, *, durable: bool = False, strict: bool = False) -> Path:
    """:func:`write_bytes` of :func:`dumps` ``(data)``. Raises ValueError with ``strict`` for NaN/Infinity."""
    return write_text(path, dumps(data, strict=strict), durable=durable)


def read_json(path: str | os.PathLike[str]) -> Any:
    """The parsed JSON of ``path``.

    Raises:
        FileNotFoundError: no such file. ValueError: not valid JSON (e.g. truncated).
    """
    return json.loads(Path(path).read_text())


class BadTarget(ValueError):
    """An output path given on a command line that can never be written as asked (a usage error, exit 2)."""


def check_target(path: str | os.PathLike[str], option: str, *, folder: bool = False, example: str = "") -> Path:
    """Refuse, before anything is computed or written, an output path that names the wrong kind of thing:
    for a file (``folder=False``) an existing folder or a name ending in ``/``; for a folder an existing
    non-folder; for both, a path under an existing file. Whether the place can be written (a read-only file
    system, permissions) is left to the write itself, which raises OSError (see :func:`not_written`).
    ``example``: a file name the message suggests inside a folder given as a file. Returns ``path`` as a Path.

    Raises:
        BadTarget: names ``option``, the value and what to pass instead.
    """
    p = Path(path)
    text = os.fspath(path)
    if not folder and (p.is_dir() or text.endswith(os.sep) or not text):
        hint = f" (for example {p / example})" if example else ""
        raise BadTarget(f"{option} {text!r} is a folder, not a file: name the file to write{hint}")
    if folder and p.exists() and not p.is_dir():
        raise BadTarget(f"{option} {text} is a file, not a folder: name a folder (it is created), or remove the file")
    for above in p.absolute().parents:
        if above.exists():
            if not above.is_dir():
                raise BadTarget(f"{option} {text}: {above} is a file, not a folder")
            break
    return p


def not_written(what: str, path: str | os.PathLike[str], exc: OSError) -> str:
    """The message of a write that failed with ``exc``: ``<what> <path> was not written (<reason>)``, the reason
    in the system's words (``Read-only file system``, ``No space left on device``)."""
    return f"{what} {os.fspath(path)} was not written ({exc.strerror or exc})"
