"""The plan-time check of a ``history`` group, light enough for the planner (no SQLAlchemy, no SciPy import for the
default SQLite URL: those imports take 1-1.5 s, which every plan would pay).

The planner calls :func:`check_settings` on every sweep (docs/CONTRACTS.md §1) so that a bad ``history.*`` value
fails with exit code 2 before any GPU time is spent. A plain SQLite file URL (``sqlite:///<path>`` or
``sqlite+pysqlite:///<path>``, no query string) parses in SQLAlchemy to the stdlib ``sqlite3`` driver whatever the
path, so it is checked by importing that driver; every other URL goes through
:func:`analysis.history.store.check_url` (SQLAlchemy parses it and loads its dialect's driver).
"""

from __future__ import annotations

import re
from typing import Any

from analysis.history.errors import HistoryInputError
from analysis.history.records import HistoryConfig

DEFAULT_URL = "sqlite:///results/history.db"

# what SQLAlchemy's make_url reads as backend sqlite, driver pysqlite, a file (or memory) database, no query
_PLAIN_SQLITE = re.compile(r"sqlite(\+pysqlite)?:///[^?\s]*")
# sqlite://results/history.db: SQLAlchemy reads "results" as a host and opens history.db in the working directory
_SQLITE_HOST = re.compile(r"(?P<scheme>sqlite(\+\w+)?)://(?P<host>[^/?]+)")


def check_history_url(url: str) -> None:
    """Check a history URL without connecting: it parses, names SQLite or PostgreSQL, its driver is installed, and
    a SQLite file is neither an existing folder nor under an existing file.

    Raises:
        HistoryInputError: names the URL (password hidden) and the supported forms (``store.check_url``'s message);
            a SQLite URL with a host (two slashes) names the three-slash form; a SQLite file that is a folder or
            under a file names the path.
    """
    m = _SQLITE_HOST.match(url)
    if m:
        raise HistoryInputError(f"history.url={url!r} names a host ({m['host']!r}) after sqlite://, which SQLite has "
                                f"not: a SQLite file URL has three slashes, sqlite:///{url[m.end('scheme') + 3:]} "
                                f"(relative to the working directory) or sqlite:////absolute/path.db")
    if _PLAIN_SQLITE.fullmatch(url):
        db = url.split(":///", 1)[1]
        if db and db != ":memory:":  # a folder as the file, or a path under a file (check_url's rule, here light)
            from contracts.atomic import BadTarget, check_target

            try:
                check_target(db, "history.url", example="history.db")
            except BadTarget as e:
                raise HistoryInputError(str(e)) from None
        try:
            import sqlite3  # noqa: F401  (the driver SQLAlchemy's pysqlite dialect loads)
            return
        except ImportError:
            pass  # let SQLAlchemy word the error
    from analysis.history.store import check_url

    check_url(url)


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
        check_history_url(values["url"])
    from analysis.history.outlets import Outlets

    Outlets.from_mapping(values)  # history.notify / notify_format / mlflow ...: raises HistoryInputError
    try:
        return HistoryConfig.from_mapping(values)
    except (TypeError, ValueError) as e:
        raise HistoryInputError(str(e)) from None


PASSWORD_ENV = "PGPASSWORD"


def password_from_env(url: str) -> str:
    """The URL to connect with: a password recorded as ``***`` (the sweep never stores one) is dropped, so that
    PostgreSQL's client library takes it from ``PGPASSWORD`` or ``~/.pgpass`` in this shell's environment; any
    other URL is returned as it is.

    Raises:
        HistoryInputError: the password was hidden and neither ``PGPASSWORD`` nor a ``~/.pgpass`` file is there.
    """
    import os
    from pathlib import Path

    if not isinstance(url, str) or "***@" not in url:
        return url
    from sqlalchemy.engine import URL, make_url

    parsed = make_url(url)
    if parsed.password != "***":
        return url
    if not os.environ.get(PASSWORD_ENV) and not Path(os.environ.get("PGPASSFILE", "~/.pgpass")).expanduser().is_file():
        raise HistoryInputError(f"history.url={url!r}: the sweep stores no password; export {PASSWORD_ENV} (or "
                                "write ~/.pgpass) in this shell, or give history.url with the password again")
    # URL.set(password=None) keeps the masked value on SQLAlchemy 2.1 (it renders as %2A%2A%2A): build the URL
    # again without a password, so that libpq reads PGPASSWORD or ~/.pgpass
    bare = URL.create(parsed.drivername, username=parsed.username, host=parsed.host, port=parsed.port,
                      database=parsed.database, query=parsed.query)
    return bare.render_as_string(hide_password=False)
