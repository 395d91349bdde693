"""The sweep's command line as a user runs it: ``python -m experiments.sweep ARGS`` in a process of its own.

End-to-end tests drive the real CLI this way, so that what they check is what a user gets: the exit status of the
process, its stderr, and everything that the interpreter does at exit (atexit handlers, ``finally:`` blocks).
The child starts in the repository root, so ``-m`` imports this checkout's code.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _command(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "experiments.sweep", *args]


def run_sweep(args: list[str], timeout: float = 900, **env: str) -> subprocess.CompletedProcess[str]:
    """Run the sweep CLI with ``args`` (Hydra overrides) and wait for it.

    ``env`` adds variables to this process's environment for the child. Returns the finished process:
    ``returncode`` is the CLI's exit status, ``stdout``/``stderr`` its output as text.
    Raises ``subprocess.TimeoutExpired`` (the child is killed) after ``timeout`` seconds.
    """
    return subprocess.run(_command(args), cwd=REPO, env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=timeout, check=False)


def spawn_sweep(args: list[str], **env: str) -> subprocess.Popen[str]:
    """Start the sweep CLI with ``args`` without waiting (stdout and stderr piped, as text); see ``run_sweep``."""
    return subprocess.Popen(_command(args), cwd=REPO, env={**os.environ, **env}, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def spawn_faulty_sweep(point: str, args: list[str], **env: str) -> subprocess.Popen[str]:
    """:func:`spawn_sweep` through ``tests/e2e/faulty_sweep.py``: the same CLI, SIGKILLed at fault ``point``."""
    return subprocess.Popen([sys.executable, "-m", "tests.e2e.faulty_sweep", point, *args], cwd=REPO,
                            env={**os.environ, **env}, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def tail(res: subprocess.CompletedProcess[str], chars: int = 3000) -> str:
    """The end of a finished CLI's stderr and stdout, for an assertion message."""
    return f"exit {res.returncode}\nstderr: {res.stderr[-chars:]}\nstdout: {res.stdout[-chars:]}"
