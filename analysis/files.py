"""JSON reading of the analysis stage; every write goes through the one atomic writer, :mod:`contracts.atomic`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_json(path: Path) -> dict[str, Any]:
    """Parse a JSON file that holds an object (every file the analysis reads: variant.json, effective_config.json,
    profile.json). Raises OSError when unreadable and ValueError when it is not JSON or not an object (a list or
    a number where the object should be: read like a damaged file, never a traceback)."""
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    if not isinstance(doc, dict):
        raise ValueError(f"{path} holds {type(doc).__name__}, not a JSON object")
    return doc
