"""Small file helpers of the analysis stage: atomic writes (temp file in the same folder + os.replace) and JSON."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: readers see the old file or the new one, never a partial one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """UTF-8 text, written atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: Path, data: Any) -> None:
    """JSON (indent 2, NaN refused), written atomically. Raises ValueError for NaN/Infinity values."""
    atomic_write_text(path, json.dumps(data, indent=2, allow_nan=False) + "\n")


def read_json(path: Path) -> Any:
    """Parse a JSON file; raises OSError when unreadable and ValueError when it is not JSON."""
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)
