"""Versioned schema migrations of the history database, written out by hand (no Alembic).

Each migration is frozen once released: it describes the tables *as they were* at its version, never
``schema.py``'s current tables, so that an old database always upgrades the same way. ``migrate`` applies the
missing ones in order inside the caller's transaction and records each in ``schema_version``. The caller holds the
database's write lock (SQLite ``BEGIN IMMEDIATE``, PostgreSQL advisory lock), so two processes opening an old
database at once migrate it once.

Versions:
  1. sweeps, runs, steps, speedups.
  2. runs.peak_mem_gb, runs.loss_first, runs.loss_last (the trend page shows them); an index on speedups by series
     and night.
  3. The series gains the container profile (``container_profile`` on sweeps, runs, speedups; filled for older
     rows from ``sweeps.container`` JSON's ``name``); runs.gpu_hours_estimate / gpu_hours_accounted /
     gpu_hours_note; table ``breakdowns`` (run_id, part, ms) of profiled runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    Connection,
    Date,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    func,
    inspect,
    select,
    text,
)

from analysis.history.errors import HistorySchemaError
from analysis.history.schema import DATA_TABLES, SCHEMA_VERSION, schema_version


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    apply: Callable[[Connection], None]


def _v1(conn: Connection) -> None:
    md = MetaData()

    def series() -> tuple[Column, ...]:
        return (Column("night", Date, nullable=False), Column("preset", String(128), nullable=False),
                Column("model", String(128), nullable=False), Column("cluster", String(128), nullable=False))

    Table("sweeps", md, Column("sweep_id", String(64), primary_key=True), *series(),
          Column("created", DateTime, nullable=False), Column("git_sha", String(64)), Column("dirty", Boolean),
          Column("container", JSON), Column("source", Text), Column("recorded_at", DateTime, nullable=False),
          Index("ix_sweeps_series_night", "preset", "model", "cluster", "night"))
    Table("runs", md, Column("id", Integer, primary_key=True, autoincrement=True),
          Column("sweep_id", String(64), ForeignKey("sweeps.sweep_id", ondelete="CASCADE"), nullable=False),
          *series(), Column("variant", String(64), nullable=False),
          Column("repeat", Integer, nullable=False), Column("attempt", Integer, nullable=False),
          Column("git_sha", String(64)), Column("container", JSON), Column("status", String(32), nullable=False),
          Column("reason", Text), Column("role", String(16)), Column("group_key", String(512), nullable=False),
          *(Column(n, Float) for n in ("step_time_ms", "step_time_p90_ms", "step_time_ci_low_ms",
                                       "step_time_ci_high_ms")),
          Column("n_steady", Integer), Column("tflops_per_gpu", Float), Column("tokens_per_s_per_gpu", Float),
          UniqueConstraint("sweep_id", "variant", "repeat", name="uq_runs_sweep_variant_repeat"),
          Index("ix_runs_series_night", "preset", "model", "cluster", "night"))
    Table("steps", md,
          Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True, autoincrement=False),
          Column("idx", Integer, primary_key=True, autoincrement=False),
          Column("step_time_ms", Float, nullable=False))
    Table("speedups", md, Column("id", Integer, primary_key=True, autoincrement=True),
          Column("sweep_id", String(64), ForeignKey("sweeps.sweep_id", ondelete="CASCADE"), nullable=False),
          *series(), Column("variant", String(64), nullable=False),
          Column("baseline", String(64), nullable=False), Column("group_key", String(512), nullable=False),
          Column("value", Float), Column("ci_low", Float), Column("ci_high", Float), Column("verdict", String(32)),
          Column("reason", Text), UniqueConstraint("sweep_id", "variant", name="uq_speedups_sweep_variant"))
    md.create_all(conn)


def _v2(conn: Connection) -> None:
    for name in ("peak_mem_gb", "loss_first", "loss_last"):
        conn.execute(text(f"ALTER TABLE runs ADD COLUMN {name} FLOAT"))
    conn.execute(text("CREATE INDEX ix_speedups_series_night ON speedups (preset, model, cluster, night)"))


def _v3(conn: Connection) -> None:
    for table in ("sweeps", "runs", "speedups"):
        conn.execute(text(f"ALTER TABLE {table} ADD COLUMN container_profile VARCHAR(128) NOT NULL DEFAULT ''"))
    for name, kind in (("gpu_hours_estimate", "FLOAT"), ("gpu_hours_accounted", "FLOAT"), ("gpu_hours_note", "TEXT")):
        conn.execute(text(f"ALTER TABLE runs ADD COLUMN {name} {kind}"))
    md = MetaData()
    old = Table("sweeps", md, Column("sweep_id", String(64), primary_key=True), Column("container", JSON))
    for sweep_id, container in conn.execute(select(old.c.sweep_id, old.c.container)).all():
        name = (container or {}).get("name") if isinstance(container, dict) else None
        if name:
            for table in ("sweeps", "runs", "speedups"):
                conn.execute(text(f"UPDATE {table} SET container_profile = :p WHERE sweep_id = :s"),
                             {"p": str(name)[:128], "s": sweep_id})
    md3 = MetaData()
    Table("runs", md3, Column("id", Integer, primary_key=True))  # only what the foreign key names
    Table("breakdowns", md3,
          Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True, autoincrement=False),
          Column("part", String(32), primary_key=True), Column("ms", Float, nullable=False))
    md3.tables["breakdowns"].create(conn)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "sweeps, runs, steps, speedups", _v1),
    Migration(2, "runs.peak_mem_gb, runs.loss_first, runs.loss_last; index speedups by series and night", _v2),
    Migration(3, "series container_profile; runs.gpu_hours_estimate/accounted/note; table breakdowns", _v3),
)


def current_version(conn: Connection) -> int:
    """The database's schema version: 0 for an empty database.

    Raises :class:`HistorySchemaError` when history tables exist without ``schema_version`` (a database that this
    tool did not create, or a damaged one).
    """
    insp = inspect(conn)
    if not insp.has_table("schema_version"):
        found = [t for t in DATA_TABLES if insp.has_table(t)]
        if found:
            raise HistorySchemaError(f"the database has table(s) {', '.join(found)} but no schema_version table: it "
                                     f"was not created by this tool; point history.url at another database")
        return 0
    return int(conn.execute(select(func.max(schema_version.c.version))).scalar() or 0)


def check_supported(version: int) -> int:
    """Return ``version``; raise :class:`HistorySchemaError` when it is newer than this tool (never downgraded)."""
    if version > SCHEMA_VERSION:
        raise HistorySchemaError(f"the database has schema version {version}, newer than this tool's "
                                 f"{SCHEMA_VERSION}; upgrade moe-overlap-sweep (the database is left untouched)")
    return version


def migrate(conn: Connection, target: int = SCHEMA_VERSION) -> tuple[int, ...]:
    """Apply the missing migrations up to ``target`` in the caller's transaction; return the versions applied.

    Raises :class:`HistorySchemaError` when the database is newer than this tool (it is never downgraded).
    """
    if not 0 <= target <= SCHEMA_VERSION:
        raise ValueError(f"target schema version {target} is not in 0..{SCHEMA_VERSION}")
    version = check_supported(current_version(conn))
    if version == 0 and target > 0:
        schema_version.create(conn)
    applied = []
    for m in MIGRATIONS:
        if version < m.version <= target:
            m.apply(conn)
            conn.execute(schema_version.insert().values(version=m.version, description=m.description,
                                                        applied_at=datetime.now(UTC).replace(tzinfo=None)))
            applied.append(m.version)
    return tuple(applied)
