"""Fixtures for every test.

- Each test gets an empty job-template cache of its own (launchers/templates.py), so that no test reads a template
  another test stored and none writes into the user's ~/.cache; subprocesses inherit it through the environment.
- The log-copy threads that torchx's local scheduler starts for a job NeMo-Run's ``LocalExecutor`` launched in this
  process (``torchx.schedulers.streams.Tee``: one per job, polling every 0.1 s until its app is closed, which
  torchx does only when asked for the status of a finished app) are closed after the test that started them. A
  sweep run in-process by a test would otherwise leave them running for the rest of the session, and every later
  test that forks (``launchers.render_server``, ``analysis.plotproc``, ``analysis.split``: a fork only from a
  process of one thread) would take its no-fork path instead of the one it tests.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from launchers.templates import CACHE_ENV


@pytest.fixture(autouse=True)
def _own_template_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path_factory.mktemp("template-cache")
    monkeypatch.setenv(CACHE_ENV, str(folder))
    return folder


def _torchx_tee(thread: threading.Thread):
    """The torchx ``Tee`` whose copy loop ``thread`` runs, or None."""
    owner = getattr(getattr(thread, "_target", None), "__self__", None)
    cls = type(owner)
    return owner if cls.__name__ == "Tee" and cls.__module__.startswith("torchx.") else None


@pytest.fixture(autouse=True)
def _close_torchx_log_threads() -> Iterator[None]:
    before = set(threading.enumerate())
    yield
    for thread in set(threading.enumerate()) - before:
        tee = _torchx_tee(thread)
        if tee is not None:
            tee.close()  # copies what is left, then ends the thread and closes the files
