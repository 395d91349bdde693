"""Fixtures for every test.

Each test gets an empty job-template cache of its own (launchers/templates.py), so that no test reads a template
another test stored and none writes into the user's ~/.cache; subprocesses inherit it through the environment.
"""

from __future__ import annotations

import fcntl
import os
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


# One local Slurm cluster for every xdist worker: its tests hold this lock while they run, so they never share its
# nodes and queue (side by side, the random-kill test's twenty sweeps kept another test's jobs pending past its
# 600 s wait). The xdist group below asks for the same, but pytest-xdist 3.8 was seen running slurm tests on both
# workers at once, so the lock is what guarantees it.
SLURM_TEST_LOCK = Path(os.environ.get("TMPDIR", "/tmp")) / "moe-sweep-slurm-tests.lock"


@pytest.fixture(autouse=True)
def _one_slurm_test_at_a_time(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.node.get_closest_marker("slurm") is None:
        yield
        return
    with open(SLURM_TEST_LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's worker reads the groups (--dist loadgroup)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests of the one local Slurm cluster run one after another, on one xdist worker.

    They share its two test GPUs and its queue, and one of them restarts slurmctld: run side by side, their jobs
    would wait for each other past the tests' time limits. ``xdist_group`` does nothing without xdist.
    """
    for item in items:
        if item.get_closest_marker("slurm"):
            item.add_marker(pytest.mark.xdist_group("slurm"))
