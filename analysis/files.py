"""JSON reading of the analysis stage; every write goes through the one atomic writer, :mod:`contracts.atomic`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_json(path: Path) -> Any:
    """Parse a JSON file; raises OSError when unreadable and ValueError when it is not JSON."""
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)
