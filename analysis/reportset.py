"""The report folder written as a set (docs/CONTRACTS.md §3): every file into a temporary folder beside it, then
renamed into place, so that a reader sees the old report or the new one, never a mix, and a full disk leaves the
old report whole.

Files another stage owns in the folder (the conductor's ``history.json`` and ``history.html``) are carried into
the new folder (hard links where the file system allows) so the swap does not lose them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

from contracts.atomic import write_bytes

CARRIED = ("history.json", "history.html")  # the conductor's files in report/ (CONTRACTS §3)


class ReportWriteError(OSError):
    """The report could not be written (a full disk, a read-only folder); the previous report is left whole.
    An ``OSError``, so every caller that turns a failed write into exit code 5 handles it."""


def write_set(out_dir: Path, files: dict[str, bytes]) -> list[Path]:
    """Replace the folder ``out_dir`` by one holding exactly ``files`` (name -> bytes, in order: the last is written
    last) plus the :data:`CARRIED` files it had. Returns the paths of ``files`` in their final place.

    Raises:
        ReportWriteError: names the folder and the reason; ``out_dir`` is as it was and no temporary folder is
            left behind.
    """
    out_dir = Path(out_dir)
    parent = out_dir.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".tmp", dir=parent))
    except OSError as e:
        raise ReportWriteError(e.errno, f"the report {out_dir} was not written ({e.strerror or e})") from None
    try:
        os.chmod(tmp, 0o777 & ~_umask())
        for name, data in files.items():
            write_bytes(tmp / name, data)
        for name in CARRIED:
            _carry(out_dir / name, tmp / name)
        _swap(tmp, out_dir)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ReportWriteError(e.errno, f"the report {out_dir} was not replaced ({e.strerror or e}); the previous "
                               "report there is whole. Free space and write it again") from None
    return [out_dir / name for name in files]


def _carry(src: Path, dst: Path) -> None:
    if not src.is_file():
        return
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _swap(new: Path, out_dir: Path) -> None:
    """Put ``new`` at ``out_dir``: the old folder is renamed aside first and put back if the second rename fails,
    then removed."""
    if not out_dir.exists():
        os.rename(new, out_dir)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".old", dir=out_dir.parent))
    os.rmdir(old)
    os.rename(out_dir, old)
    try:
        os.rename(new, out_dir)
    except OSError:
        os.rename(old, out_dir)
        raise
    with contextlib.suppress(OSError):
        shutil.rmtree(old)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
