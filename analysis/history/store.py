"""The history database: connection, transactions, error translation, recording one sweep, reading a series.

Any SQLAlchemy URL works. SQLite (the default, ``sqlite:///results/history.db``) runs in WAL mode with a busy
timeout; every write is one ``BEGIN IMMEDIATE`` transaction, so concurrent collect steps queue instead of
failing or interleaving (https://www.sqlite.org/lang_transaction.html). On PostgreSQL each write transaction takes
one advisory transaction lock, so two writers serialise the same way. ``postgresql://`` selects psycopg 3 (the
driver this project installs) instead of SQLAlchemy's default psycopg2.

Recording is idempotent: a sweep recorded again replaces its own rows in the same transaction. Errors never leave
half a sweep behind: the transaction rolls back and the error says what to do.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, RowMapping, create_engine, delete, event, func, select, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, make_url

from analysis.history.errors import (
    HistoryCorruptError,
    HistoryError,
    HistoryInputError,
    HistoryLockedError,
    HistorySchemaError,
    HistoryStoreError,
)
from analysis.history.migrations import check_supported, current_version, migrate
from analysis.history.records import NightInput, RecordResult, Series
from analysis.history.schema import SCHEMA_VERSION, breakdowns, runs, speedups, steps, sweeps
from contracts.secrets import hide_password

DEFAULT_TIMEOUT_S = 30.0
_PG_LOCK_KEY = 7_243_917_001  # one PostgreSQL advisory lock shared by all history writers
_FUTURE_SLACK = timedelta(days=1)


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
    """Check a history URL without connecting: it parses, names SQLite or PostgreSQL, its driver is installed, and
    a SQLite file is neither an existing folder nor under an existing file.

    Raises:
        HistoryInputError: names the URL (password hidden) and the supported forms.
    """
    parsed = normalize_url(url)
    shown = hide_password(parsed.render_as_string(hide_password=False))
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
    _check_sqlite_file(parsed)
    return parsed


def _check_sqlite_file(parsed: URL) -> None:
    """Refuse a SQLite URL whose file is an existing folder or lies under an existing file (the URL is wrong, not
    the database: :class:`HistoryInputError`, exit 2, naming the path)."""
    from contracts.atomic import BadTarget, check_target

    db = parsed.database
    if parsed.get_backend_name() == "sqlite" and db and db != ":memory:" and not db.startswith("file:"):
        try:
            check_target(db, "history.url", example="history.db")
        except BadTarget as e:
            raise HistoryInputError(str(e)) from None


def _utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class HistoryStore:
    """An open history database, migrated to the current schema on open.

    ``timeout_s``: how long a writer waits for another (SQLite busy timeout; PostgreSQL ``connect_timeout``
    and ``lock_timeout``). ``create=False``: a missing SQLite file is an input error instead of a new database. Raises :class:`HistoryInputError` for a bad URL, :class:`HistoryStoreError`
    (:class:`HistoryLockedError`, :class:`HistoryCorruptError`, :class:`HistorySchemaError`) when the
    database cannot be used.
    """

    def __init__(self, url: str | URL, *, timeout_s: float = DEFAULT_TIMEOUT_S, migrate_to: int = SCHEMA_VERSION,
                 create: bool = True):
        self.url = normalize_url(url)
        db = self.url.database
        _check_sqlite_file(self.url)
        if not create and self.url.get_backend_name() == "sqlite" and db and db != ":memory:" and not Path(db).exists():
            raise HistoryInputError(f"no history database at {db} (history.url={self.url}); record a sweep first")
        self.display_url = hide_password(self.url.render_as_string(hide_password=False))
        self.timeout_s = float(timeout_s)
        self.is_sqlite = self.url.get_backend_name() == "sqlite"
        self.is_postgres = self.url.get_backend_name() == "postgresql"
        self.engine = self._make_engine()
        if self.is_sqlite:
            self._enable_wal()
        self.applied = self.ensure_schema(migrate_to)

    # -- connection -------------------------------------------------------------------------------------------
    def _make_engine(self) -> Engine:
        kw: dict[str, Any] = {}
        if self.is_sqlite:
            db = self.url.database
            if db and db != ":memory:" and not db.startswith("file:"):
                try:
                    Path(db).parent.mkdir(parents=True, exist_ok=True)
                except OSError as e:
                    raise HistoryStoreError(f"cannot create the folder of the history database {db}: {e}") from None
            kw["connect_args"] = {"timeout": self.timeout_s}
        elif self.is_postgres:
            ms = int(self.timeout_s * 1000)
            kw["connect_args"] = {"connect_timeout": max(1, math.ceil(self.timeout_s)),
                                  "options": f"-c lock_timeout={ms}"}
        try:
            engine = create_engine(self.url, **kw)
        except (sa_exc.ArgumentError, sa_exc.NoSuchModuleError, ImportError) as e:
            raise HistoryInputError(f"history.url={self.display_url!r}: {e}; the installed drivers are sqlite "
                                    f"and postgresql+psycopg") from None
        if self.is_sqlite:
            self._sqlite_events(engine)
        return engine

    def _sqlite_events(self, engine: Engine) -> None:
        busy_ms = int(self.timeout_s * 1000)

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None  # SQLAlchemy emits BEGIN itself (below)
            cur = dbapi_conn.cursor()
            cur.execute(f"PRAGMA busy_timeout={busy_ms}")
            cur.execute("PRAGMA synchronous=FULL")  # a recorded night survives power loss
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            mode = "IMMEDIATE" if conn.get_execution_options().get("history_write") else "DEFERRED"
            conn.exec_driver_sql(f"BEGIN {mode}")

    def _enable_wal(self) -> None:
        """Switch the SQLite file to WAL once, under a process-level file lock.

        Changing the journal mode needs an exclusive lock; done on every connect it raced with other processes'
        open read transactions on a fresh file and could wait the whole busy timeout (seen in a CI run with four
        concurrent collect steps). WAL is persistent in the file, so later connections need nothing.
        """
        db = self.url.database
        if not db or db == ":memory:" or db.startswith("file:"):
            return
        from contracts.locks import LockTimeout, locked

        try:
            with self._translated("switching the database to WAL"), locked(db + ".init.lock", self.timeout_s):
                self._wal()
        except LockTimeout as e:
            raise HistoryLockedError(f"history database {self.display_url} is being set up by another process ({e}); "
                                     "nothing was written. Run the same command again") from None
        except OSError as e:  # the lock file beside the database: a read-only file system, permissions
            raise HistoryStoreError(f"history database {self.display_url}: {db} cannot be created or written "
                                    f"({e.strerror or e}); nothing was written. Set history.url to a place this "
                                    "user can write") from None

    def _wal(self) -> None:
        """``PRAGMA journal_mode=WAL`` on a connection of its own (the caller holds the set-up lock)."""
        import sqlite3

        raw = None
        try:
            raw = self.engine.raw_connection()  # outside SQLAlchemy's BEGIN: no mode change inside a transaction
            cur = raw.cursor()
            if str(cur.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                cur.execute("PRAGMA journal_mode=WAL")
            cur.close()
        except sqlite3.Error as e:  # same messages as every other database error (corrupt, locked)
            raise self._translate(sa_exc.DatabaseError("PRAGMA journal_mode", None, e),
                                  "switching the database to WAL") from e
        finally:
            if raw is not None:
                raw.close()

    def close(self) -> None:
        """Release the connection pool."""
        self.engine.dispose()

    def __enter__(self) -> HistoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _translated(self, action: str) -> Iterator[None]:
        try:
            yield
        except HistoryError:
            raise
        except sa_exc.DBAPIError as e:
            raise self._translate(e, action) from e

    def _translate(self, e: sa_exc.DBAPIError, action: str) -> HistoryStoreError:
        orig = str(getattr(e, "orig", None) or e).strip()
        msg = orig.splitlines()[0] if orig else type(e).__name__
        low = msg.lower()
        where = f"history database {self.display_url}"
        if "locked" in low or "busy" in low or "lock timeout" in low:
            return HistoryLockedError(
                f"{where} is locked by another writer ({msg}; waited {self.timeout_s:g} s) while {action}; nothing "
                f"was written. Run the same command again when the other writer is done (recording a sweep twice "
                f"is safe), or raise the timeout.")
        if "not a database" in low or "malformed" in low or "file is encrypted" in low:
            return HistoryCorruptError(
                f"{where} is not a readable SQLite database ({msg}) while {action}. It was left untouched: move it "
                f"aside (mv {self.url.database} {self.url.database}.corrupt) or restore a backup, then run the "
                f"command again; or set history.url to another database.")
        if self.is_postgres and isinstance(e, sa_exc.OperationalError):
            return HistoryStoreError(f"cannot use {where} while {action}: {msg}. Is the server up and the URL "
                                     f"right? (local test server: bash scripts/pg_local/start.sh)")
        return HistoryStoreError(f"{where} failed while {action}: {msg}")

    @contextmanager
    def read(self, action: str = "reading") -> Iterator[Connection]:
        """A read transaction (SQLite ``BEGIN DEFERRED``)."""
        with self._translated(action), self.engine.connect() as conn, conn.begin():
            yield conn

    @contextmanager
    def write(self, action: str = "writing") -> Iterator[Connection]:
        """A write transaction holding the database's write lock; it commits on success, rolls back on error."""
        with self._translated(action), self.engine.connect() as raw:
            conn = raw.execution_options(history_write=True)
            with conn.begin():
                if self.is_postgres:
                    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOCK_KEY})
                yield conn

    # -- schema -----------------------------------------------------------------------------------------------
    def version(self) -> int:
        """The database's schema version."""
        with self.read("reading the schema version") as conn:
            return current_version(conn)

    def ensure_schema(self, target: int = SCHEMA_VERSION) -> tuple[int, ...]:
        """Migrate to ``target`` (default: current) under the write lock; return the versions applied.

        The version is read first without the lock (the common case: nothing to do). When it looks older, or the
        read saw a half-created schema (PostgreSQL READ COMMITTED: each catalogue query of the read takes a new
        snapshot, so a first migration committing in between shows ``sweeps`` without ``schema_version``), the
        version is read again inside the write lock, where no migration can be in flight, and only then migrated.
        """
        try:
            if check_supported(self.version()) >= target:
                return ()
        except HistorySchemaError:
            pass  # decided under the lock below; a real foreign database raises there again
        with self.write("migrating the schema") as conn:
            return migrate(conn, target)

    # -- writing ----------------------------------------------------------------------------------------------
    def record(self, night: NightInput) -> RecordResult:
        """Write one sweep (runs, per-iteration steps, speedups) in one transaction, replacing an earlier
        recording of the same sweep id. Returns what was written, with warnings for clock skew."""
        s = night.sweep
        ser = s.series
        created = s.created.astimezone(UTC).replace(tzinfo=None)
        container = dict(s.container)
        key = {"night": s.night, "preset": ser.preset, "model": ser.model, "cluster": ser.cluster,
               "container_profile": ser.container}
        warnings = list(night.warnings)
        n_steps = 0
        with self.write(f"recording sweep {s.sweep_id}") as conn:
            replaced = conn.execute(select(sweeps.c.sweep_id).where(sweeps.c.sweep_id == s.sweep_id)).first() is not None
            latest = conn.execute(select(func.max(sweeps.c.night)).where(
                *_series_filter(sweeps, ser), sweeps.c.sweep_id != s.sweep_id)).scalar()
            mine = select(runs.c.id).where(runs.c.sweep_id == s.sweep_id)
            conn.execute(delete(steps).where(steps.c.run_id.in_(mine)))
            conn.execute(delete(breakdowns).where(breakdowns.c.run_id.in_(mine)))
            for table in (runs, speedups, sweeps):
                conn.execute(delete(table).where(table.c.sweep_id == s.sweep_id))
            conn.execute(sweeps.insert().values(sweep_id=s.sweep_id, created=created, git_sha=s.git_sha, dirty=s.dirty,
                                                container=container, source=s.source, recorded_at=_utcnow(), **key))
            step_rows: list[dict[str, Any]] = []
            part_rows: list[dict[str, Any]] = []
            for r in night.runs:
                res = conn.execute(runs.insert().values(
                    sweep_id=s.sweep_id, **key, variant=r.variant, repeat=r.repeat, attempt=r.attempt,
                    git_sha=s.git_sha, container=container, status=r.status, reason=r.reason, role=r.role,
                    group_key=r.group_key, step_time_ms=r.step_time_ms, step_time_p90_ms=r.step_time_p90_ms,
                    step_time_ci_low_ms=r.step_time_ci_low_ms, step_time_ci_high_ms=r.step_time_ci_high_ms,
                    n_steady=r.n_steady, tflops_per_gpu=r.tflops_per_gpu, tokens_per_s_per_gpu=r.tokens_per_s_per_gpu,
                    peak_mem_gb=r.peak_mem_gb, loss_first=r.loss_first, loss_last=r.loss_last,
                    gpu_hours_estimate=r.gpu_hours_estimate, gpu_hours_accounted=r.gpu_hours_accounted,
                    gpu_hours_note=r.gpu_hours_note))
                run_id = res.inserted_primary_key[0]
                step_rows.extend({"run_id": run_id, "idx": i, "step_time_ms": v} for i, v in enumerate(r.step_times_ms))
                part_rows.extend({"run_id": run_id, "part": k, "ms": v} for k, v in r.breakdown_ms)
            if step_rows:
                conn.execute(steps.insert(), step_rows)
                n_steps = len(step_rows)
            if part_rows:
                conn.execute(breakdowns.insert(), part_rows)
            if night.speedups:
                conn.execute(speedups.insert(), [
                    dict(sweep_id=s.sweep_id, **key, variant=x.variant, baseline=x.baseline, group_key=x.group_key,
                         value=x.value, ci_low=x.ci_low, ci_high=x.ci_high, verdict=x.verdict, reason=x.reason)
                    for x in night.speedups])
        if latest is not None and s.night < latest:
            warnings.append(f"sweep {s.sweep_id}: its night {s.night} is earlier than the latest recorded night "
                            f"{latest} of {ser} (clock skew, or a late collect); recorded and ordered by night")
        if s.created.astimezone(UTC).replace(tzinfo=None) > _utcnow() + _FUTURE_SLACK:
            warnings.append(f"sweep {s.sweep_id}: created {s.created.isoformat()} is more than a day ahead of this "
                            f"host's clock ({_utcnow().isoformat()}Z); check the clocks")
        return RecordResult(sweep_id=s.sweep_id, night=s.night, series=ser, url=self.display_url,
                            runs=len(night.runs), steps=n_steps, speedups=len(night.speedups), replaced=replaced,
                            warnings=tuple(warnings))

    # -- reading ----------------------------------------------------------------------------------------------
    def series(self, night: date | None = None) -> list[Series]:
        """Every series recorded (on ``night`` when given), sorted."""
        q = select(sweeps.c.preset, sweeps.c.model, sweeps.c.cluster, sweeps.c.container_profile).distinct()
        if night is not None:
            q = q.where(sweeps.c.night == night)
        with self.read("listing series") as conn:
            return sorted(Series(preset=p, model=m, cluster=c, container=k or "") for p, m, c, k in conn.execute(q))

    def nights(self, series: Series) -> list[date]:
        """The recorded nights of ``series``, oldest first."""
        with self.read("listing nights") as conn:
            rows = conn.execute(select(sweeps.c.night).distinct().where(*_series_filter(sweeps, series)))
            return sorted(_as_date(r[0]) for r in rows)

    def sweep_rows(self, series: Series) -> list[RowMapping]:
        """``sweeps`` rows of ``series``, by night then creation time."""
        with self.read("reading sweeps") as conn:
            return list(conn.execute(select(sweeps).where(*_series_filter(sweeps, series))
                                     .order_by(sweeps.c.night, sweeps.c.created)).mappings())

    def sweep(self, sweep_id: str) -> RowMapping | None:
        """The ``sweeps`` row of ``sweep_id``, or None when it was never recorded."""
        with self.read(f"reading sweep {sweep_id}") as conn:
            return conn.execute(select(sweeps).where(sweeps.c.sweep_id == sweep_id)).mappings().first()

    def run_rows(self, series: Series, since: date | None = None, until: date | None = None) -> list[RowMapping]:
        """Run rows of ``series`` with night in [since, until], ordered by night, sweep, variant, repeat."""
        q = select(runs).where(*_series_filter(runs, series), *_night_range(runs, since, until))
        with self.read("reading runs") as conn:
            return list(conn.execute(q.order_by(runs.c.night, runs.c.sweep_id, runs.c.variant, runs.c.repeat))
                        .mappings())

    def speedup_rows(self, series: Series, since: date | None = None, until: date | None = None) -> list[RowMapping]:
        """``speedups`` rows of ``series`` with night in [since, until] (value None when none was computed)."""
        q = select(speedups).where(*_series_filter(speedups, series), *_night_range(speedups, since, until))
        with self.read("reading speedups") as conn:
            return list(conn.execute(q.order_by(speedups.c.night, speedups.c.sweep_id, speedups.c.variant)).mappings())

    def step_times(self, run_ids: Sequence[int]) -> dict[int, tuple[float, ...]]:
        """Per-iteration step times (ms) of the given runs, in iteration order."""
        out: dict[int, list[float]] = {}
        ids = list(run_ids)
        with self.read("reading step times") as conn:
            for i in range(0, len(ids), 500):
                q = (select(steps.c.run_id, steps.c.step_time_ms).where(steps.c.run_id.in_(ids[i:i + 500]))
                     .order_by(steps.c.run_id, steps.c.idx))
                for run_id, v in conn.execute(q):
                    out.setdefault(run_id, []).append(v)
        return {k: tuple(v) for k, v in out.items()}

    def breakdowns(self, run_ids: Sequence[int]) -> dict[int, dict[str, float]]:
        """Step-time breakdowns (part -> ms per profiled step) of the given runs that were profiled."""
        out: dict[int, dict[str, float]] = {}
        ids = list(run_ids)
        with self.read("reading step-time breakdowns") as conn:
            for i in range(0, len(ids), 500):
                q = select(breakdowns.c.run_id, breakdowns.c.part, breakdowns.c.ms).where(
                    breakdowns.c.run_id.in_(ids[i:i + 500]))
                for run_id, part, ms in conn.execute(q):
                    out.setdefault(run_id, {})[part] = ms
        return out


def _series_filter(table: Any, series: Series) -> tuple[Any, ...]:
    return (table.c.preset == series.preset, table.c.model == series.model, table.c.cluster == series.cluster,
            table.c.container_profile == series.container)


def _night_range(table: Any, since: date | None, until: date | None) -> tuple[Any, ...]:
    return tuple(c for c in ((table.c.night >= since) if since else None, (table.c.night <= until) if until else None)
                 if c is not None)


def _as_date(value: Any) -> date:
    return value if isinstance(value, date) and not isinstance(value, datetime) else date.fromisoformat(str(value)[:10])
