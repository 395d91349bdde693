"""The one module that writes ``manifest.json`` (CONTRACTS §3): a file lock plus atomic replace.

Readers may call :func:`load` at any time; writers go through :func:`create` or :func:`update`, which hold
``manifest.json.lock`` while they read-modify-write and replace the file atomically (temp file + ``os.replace``),
so a crash never leaves a half-written manifest and two writers never lose each other's changes.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
LOCK_TIMEOUT_S = 60.0


class ManifestError(RuntimeError):
    """The manifest is missing, unreadable or of an unknown schema; the message says which and how to fix it."""


def write_json_atomic(path: Path, data: Any, durable: bool = True) -> None:
    """Write ``data`` as indented JSON to ``path`` atomically (temp file in the same folder + ``os.replace``).

    ``durable=False`` skips the fsync: still atomic for readers and process crashes, not across a power loss
    (used for files that can be regenerated from the manifest, such as ``variant.json``).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o644)  # mkstemp makes 0600; compute nodes and other users read these files
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2, sort_keys=False, default=str)
            f.write("\n")
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _lock(sweep_dir: Path):
    from filelock import FileLock

    return FileLock(str(sweep_dir / (MANIFEST + ".lock")), timeout=LOCK_TIMEOUT_S)


def load(sweep_dir: Path) -> dict[str, Any]:
    """Read ``<sweep_dir>/manifest.json``.

    Raises:
        ManifestError: missing file, invalid JSON (e.g. a half-copied folder), or a schema_version other than 1.
    """
    path = Path(sweep_dir) / MANIFEST
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ManifestError(f"{path} does not exist: is {sweep_dir} a sweep folder?") from None
    except (OSError, ValueError) as e:
        raise ManifestError(f"{path} cannot be read ({e}); restore it from a backup or re-plan the sweep") from None
    if data.get("schema_version") != 1:
        raise ManifestError(f"{path} has schema_version {data.get('schema_version')!r}; this tool reads 1")
    return data


def create(sweep_dir: Path, data: dict[str, Any]) -> None:
    """Write a new manifest. Raises ManifestError if one already exists (a sweep is never re-created)."""
    sweep_dir = Path(sweep_dir)
    sweep_dir.mkdir(parents=True, exist_ok=True)
    with _lock(sweep_dir):
        if (sweep_dir / MANIFEST).exists():
            raise ManifestError(f"{sweep_dir / MANIFEST} already exists; resume it with sweep_id=")
        write_json_atomic(sweep_dir / MANIFEST, data)


def update(sweep_dir: Path, change: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    """Apply ``change(manifest_dict)`` (mutating in place) under the lock and write the result atomically.

    Returns the new manifest. Raises ManifestError like :func:`load`.
    """
    sweep_dir = Path(sweep_dir)
    with _lock(sweep_dir):
        data = load(sweep_dir)
        change(data)
        write_json_atomic(sweep_dir / MANIFEST, data)
        return data


def find_variant(manifest: dict[str, Any], name: str) -> dict[str, Any]:
    """The manifest entry of variant ``name``. Raises KeyError listing the variants of the sweep."""
    for v in manifest["variants"]:
        if v["name"] == name:
            return v
    raise KeyError(f"variant {name!r} is not in sweep {manifest.get('sweep_id')}; variants: "
                   + ", ".join(v["name"] for v in manifest["variants"]))
