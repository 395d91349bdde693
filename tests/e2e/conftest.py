"""Fixtures of the end-to-end tests: the real local Slurm cluster (started when it is not up) and loopback HTTP
servers."""

from collections.abc import Iterator

import pytest

from tests.e2e.loopback import Trickle, Webhook
from tests.launchers.conftest import slurm_cluster  # noqa: F401  (re-exported fixture)


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    """A loopback webhook receiver (tests/e2e/loopback.py); ``.url`` to post to, ``.bodies`` what came."""
    hook = Webhook()
    yield hook
    hook.close()


@pytest.fixture
def trickle() -> Iterator[Trickle]:
    """A loopback HTTP server that answers one byte every 0.2 s (tests/e2e/loopback.py); ``.url``."""
    server = Trickle()
    yield server
    server.close()
