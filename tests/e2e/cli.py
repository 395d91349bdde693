"""The sweep's command line as a user runs it: ``python -m experiments.sweep ARGS`` in a process of its own.

End-to-end tests drive the real CLI this way, so that what they check is what a user gets: the exit status of the
process, its stderr, and everything that the interpreter does at exit (atexit handlers, ``finally:`` blocks).
The child starts in the repository root, so ``-m`` imports this checkout's code.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

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


@contextmanager
def read_only_view(src: Path, mnt: Path) -> Iterator[Path]:
    """``src`` seen read-only at ``mnt`` through a bind mount for the block (root only: mount(2) needs
    CAP_SYS_ADMIN, and root ignores file modes, so a read-only file system is what makes a folder unwritable for
    it). Skips the test without root, fails it in CI (which runs as root)."""
    from tests.launchers.conftest import IN_CI

    mnt.mkdir()
    mounted = os.geteuid() == 0 and subprocess.run(["mount", "--bind", str(src), str(mnt)]).returncode == 0
    if mounted and subprocess.run(["mount", "-o", "remount,ro,bind", str(mnt)]).returncode != 0:
        subprocess.run(["umount", str(mnt)], check=False)
        mounted = False
    if not mounted:
        why = "a read-only bind mount needs root"
        if IN_CI:  # CI runs as root: a failed mount there is a real failure
            pytest.fail(why)
        pytest.skip(why)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
