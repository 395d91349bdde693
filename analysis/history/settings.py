"""History settings checked without connecting and without the heavy part of the history stage (SQLAlchemy's
engine, scipy): what the planner calls for every sweep (docs/CONTRACTS.md §1), in about 0.2 s instead of the
1.2 s that importing the whole stage costs (issue 17)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine.url import URL, make_url

from analysis.history.errors import HistoryInputError
from analysis.history.records import HistoryConfig

DEFAULT_URL = "sqlite:///results/history.db"


def normalize_url(url: str | URL) -> URL:
    """Parse ``url``; ``postgresql://`` becomes ``postgresql+psycopg://``. Raises :class:`HistoryInputError`."""
    try:
        parsed = make_url(url)
    except (sa_exc.ArgumentError, ValueError, TypeError):
        raise HistoryInputError(f"history.url={str(url)!r} is not a SQLAlchemy URL; examples: "
                                f"sqlite:///results/history.db, postgresql://user:pass@host:5432/db") from None
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def check_url(url: str | URL) -> URL:
    """Check a history URL without connecting: it parses, names SQLite or PostgreSQL, and its driver is installed.

    Raises:
        HistoryInputError: names the URL (password hidden) and the supported forms.
    """
    parsed = normalize_url(url)
    shown = parsed.render_as_string(hide_password=True)
    forms = "sqlite:///results/history.db, postgresql+psycopg://user:pass@host:5432/db"
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        raise HistoryInputError(f"history.url={shown!r}: the database kind {parsed.get_backend_name()!r} is not "
                                f"supported; use SQLite or PostgreSQL, e.g. {forms}")
    try:
        parsed.get_dialect().import_dbapi()
    except (sa_exc.ArgumentError, sa_exc.NoSuchModuleError, ImportError) as e:
        raise HistoryInputError(f"history.url={shown!r}: its driver cannot be loaded ({e}); the installed drivers "
                                f"are sqlite and postgresql+psycopg, e.g. {forms}") from None
    if parsed.get_backend_name() == "postgresql" and not parsed.host:
        raise HistoryInputError(f"history.url={shown!r} names no host; e.g. {forms}")
    return parsed


def check_settings(values: dict[str, Any]) -> HistoryConfig:
    """Check a ``history`` group (``enabled``, ``url``, ``window``, ``threshold``, ...) without connecting: what the
    planner calls so that a bad value fails before any GPU time is spent (docs/CONTRACTS.md §1).

    Raises:
        HistoryInputError: the first bad key or value, named with what is allowed.
    """
    values = dict(values or {})
    enabled = values.get("enabled", False)
    if not isinstance(enabled, bool):
        raise HistoryInputError(f"history.enabled={enabled!r} must be true or false")
    if "url" in values:
        if not isinstance(values["url"], str) or not values["url"]:
            raise HistoryInputError(f"history.url={values['url']!r} must be a SQLAlchemy URL, e.g. {DEFAULT_URL}")
        check_url(values["url"])
    try:
        return HistoryConfig.from_mapping(values)
    except (TypeError, ValueError) as e:
        raise HistoryInputError(str(e)) from None
