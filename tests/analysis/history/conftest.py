"""Fixtures of the history tests: a fresh SQLite file, a fresh PostgreSQL database, the chromium binary."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from tests.analysis.history.helpers import need_service

# Default of scripts/pg_local/start.sh (see scripts/pg_local/env.sh).
DEFAULT_PG_URL = "postgresql+psycopg://moe_sweep:moe_sweep@127.0.0.1:54329/moe_sweep"


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'history.db'}"


@pytest.fixture(scope="session")
def pg_server_url() -> str:
    """The server's maintenance URL (MOE_SWEEP_PG_URL); fails in CI and skips elsewhere when it is down."""
    url = os.environ.get("MOE_SWEEP_PG_URL", DEFAULT_PG_URL)
    try:
        with create_engine(url, connect_args={"connect_timeout": 5}).connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:  # noqa: BLE001 - any failure means "no server"
        need_service("PostgreSQL", f"cannot connect to MOE_SWEEP_PG_URL ({exc.__class__.__name__}: "
                                   f"{str(exc).splitlines()[0]}); start it with: bash scripts/pg_local/start.sh")
    return url


@pytest.fixture
def pg_url(pg_server_url) -> Iterator[str]:
    """A brand-new database on the local server for one test, dropped afterwards."""
    name = f"moe_sweep_t_{uuid.uuid4().hex[:10]}"
    admin = create_engine(pg_server_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(pg_server_url).set(database=name).render_as_string(hide_password=False)
    try:
        yield url
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(scope="session")
def chromium_bin() -> str:
    """Path of headless chromium ($MOE_SWEEP_CHROMIUM, chromium, chromium-browser); scripts/chromium/install.sh."""
    for cand in (os.environ.get("MOE_SWEEP_CHROMIUM"), shutil.which("chromium"), shutil.which("chromium-browser")):
        if cand and os.access(cand, os.X_OK):
            return cand
    need_service("chromium", "no chromium binary; install it with: bash scripts/chromium/install.sh")
    raise AssertionError("unreachable")
