"""Fixtures for every test.

- Each test gets an empty job-template cache of its own (launchers/templates.py), so that no test reads a template
  another test stored and none writes into the user's ~/.cache; subprocesses inherit it through the environment.
- The I/O threads that libraries start for a sweep run in-process by a test are closed after that test: torchx's
  log-copy threads (``torchx.schedulers.streams.Tee``, one per job that NeMo-Run's ``LocalExecutor`` launched,
  polling every 0.1 s until torchx is asked the status of the finished app) and paramiko's SSH transports (the
  connections of NeMo-Run's ``SSHTunnel``, open until closed). Left running, they would stay for the rest of the
  session, and every later test that forks (``launchers.render_server``, ``analysis.plotproc``,
  ``analysis.split``: a fork only from a process of one thread) would take its no-fork path instead of the one
  it tests.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from launchers.templates import CACHE_ENV

# Property tests: a few dozen examples each in a plain run; scripts/test.sh asks for many more
# (--hypothesis-profile=thorough). No deadline: a machine shared with other work times examples unevenly.
settings.register_profile("fast", max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=300, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("fast")


@pytest.fixture(autouse=True)
def _own_template_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path_factory.mktemp("template-cache")
    monkeypatch.setenv(CACHE_ENV, str(folder))
    return folder


def _closer(thread: threading.Thread):
    """How to end ``thread`` if a library started it for a job or a tunnel (see the module doc), else None."""
    owner = getattr(getattr(thread, "_target", None), "__self__", None)
    if type(owner).__name__ == "Tee" and type(owner).__module__.startswith("torchx."):
        return owner.close  # copies what is left, then ends the thread and closes the files
    if type(thread).__name__ == "Transport" and type(thread).__module__.startswith("paramiko."):
        return thread.close  # ends the SSH session and its thread
    return None


@pytest.fixture(autouse=True)
def _close_library_io_threads() -> Iterator[None]:
    before = set(threading.enumerate())
    yield
    for thread in set(threading.enumerate()) - before:
        close = _closer(thread)
        if close is not None:
            close()
            thread.join(5)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's worker reads the groups (--dist loadgroup)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests of the one local Slurm cluster run one after another, on one xdist worker.

    They share its two test GPUs and its queue, and one of them restarts slurmctld: run side by side, their jobs
    would wait for each other past the tests' time limits. ``xdist_group`` does nothing without xdist.
    """
    for item in items:
        if item.get_closest_marker("slurm"):
            item.add_marker(pytest.mark.xdist_group("slurm"))
