"""This process's working folder and environment for the span of one launch.

NeMo-Run's packaging runs ``git rev-parse`` in the current folder, and a job started from here (sbatch with its
default ``--export=ALL``, or a local process) inherits this process's environment: that is how secrets reach a job
without being written into any file (CONTRACTS §10).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path


@contextlib.contextmanager
def in_dir(path: Path) -> Iterator[None]:
    """Work in ``path`` for the block."""
    previous = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)


@contextlib.contextmanager
def environ(values: Mapping[str, str]) -> Iterator[None]:
    """Put ``values`` into this process's environment for the block (a job started inside inherits them)."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
