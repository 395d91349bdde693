"""The sweep CLI with a fault injected from outside the product: ``python -m tests.e2e.faulty_sweep <point> ARGS``
runs :func:`experiments.sweep.main` with ``ARGS`` after wrapping one launcher method so that this process SIGKILLs
itself at ``<point>``:

- ``after_submit``: right after a backend's ``launch`` returned (sbatch has queued the jobs, or the local jobs run)
  and before the conductor writes their job ids into the manifest.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

POINTS = ("after_submit",)


def _die_after(cls: type, name: str) -> None:
    original = getattr(cls, name)

    def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)
        return result

    setattr(cls, name, wrapped)


def install(point: str) -> None:
    """Arm ``point`` (one of :data:`POINTS`) in this process. Raises ValueError for another name."""
    if point not in POINTS:
        raise ValueError(f"unknown fault point {point!r}; valid: {', '.join(POINTS)}")
    from launchers.backend import LocalBackend
    from launchers.slurm_backend import SlurmBackend

    for cls in (LocalBackend, SlurmBackend):
        _die_after(cls, "launch")


if __name__ == "__main__":
    install(sys.argv[1])
    from experiments.sweep import main

    sys.exit(main(sys.argv[2:]))
