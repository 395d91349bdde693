"""The current (version 3) tables of the history database, SQLAlchemy Core.

``migrations.py`` builds this schema step by step from an empty database; a test holds the two together. All
times are naive UTC. A series is (preset, model, cluster, container_profile); a run's key is (night, series,
variant, repeat): the sweep id identifies it, and the series columns are copied onto each row so that a team
database reads without joins. Columns added by a migration come last in their table (``ALTER TABLE ... ADD``
appends), so their order here is the order a migrated database has.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
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
)

SCHEMA_VERSION = 3

metadata = MetaData()


def _series_key() -> tuple[Column, ...]:
    """night + series (preset, model, cluster): copied onto every row so that a team database reads easily."""
    return (Column("night", Date, nullable=False), Column("preset", String(128), nullable=False),
            Column("model", String(128), nullable=False), Column("cluster", String(128), nullable=False))


def _container_profile() -> Column:
    """The container profile of the series (``conf/container/<name>.yaml``); ``''`` on rows older than v3."""
    return Column("container_profile", String(128), nullable=False, server_default="")


def _child_of_sweep() -> tuple[Column, ...]:
    return (Column("id", Integer, primary_key=True, autoincrement=True),
            Column("sweep_id", String(64), ForeignKey("sweeps.sweep_id", ondelete="CASCADE"), nullable=False),
            *_series_key())


schema_version = Table(
    "schema_version", metadata,
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("applied_at", DateTime, nullable=False),
    Column("description", Text, nullable=False),
)

sweeps = Table(
    "sweeps", metadata,
    Column("sweep_id", String(64), primary_key=True),
    *_series_key(),
    Column("created", DateTime, nullable=False),
    Column("git_sha", String(64)),
    Column("dirty", Boolean),
    Column("container", JSON),
    Column("source", Text),
    Column("recorded_at", DateTime, nullable=False),
    # version 3
    _container_profile(),
    Index("ix_sweeps_series_night", "preset", "model", "cluster", "night"),
)

runs = Table(
    "runs", metadata,
    *_child_of_sweep(),
    Column("variant", String(64), nullable=False),
    Column("repeat", Integer, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("git_sha", String(64)),
    Column("container", JSON),
    Column("status", String(32), nullable=False),
    Column("reason", Text),
    Column("role", String(16)),
    Column("group_key", String(512), nullable=False),
    Column("step_time_ms", Float),
    Column("step_time_p90_ms", Float),
    Column("step_time_ci_low_ms", Float),
    Column("step_time_ci_high_ms", Float),
    Column("n_steady", Integer),
    Column("tflops_per_gpu", Float),
    Column("tokens_per_s_per_gpu", Float),
    # version 2
    Column("peak_mem_gb", Float),
    Column("loss_first", Float),
    Column("loss_last", Float),
    # version 3
    _container_profile(),
    Column("gpu_hours_estimate", Float),  # nodes x GPUs x time limit: what the plan reserved for this run (GPU-h)
    Column("gpu_hours_accounted", Float),  # Slurm accounting: sum over the run's jobs of ElapsedRaw x gres/gpu (GPU-h)
    Column("gpu_hours_note", Text),  # why gpu_hours_accounted is missing, or its source (e.g. "sacct job 1234")
    UniqueConstraint("sweep_id", "variant", "repeat", name="uq_runs_sweep_variant_repeat"),
    Index("ix_runs_series_night", "preset", "model", "cluster", "night"),
)

steps = Table(
    "steps", metadata,
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True, autoincrement=False),
    Column("idx", Integer, primary_key=True, autoincrement=False),
    Column("step_time_ms", Float, nullable=False),
)

speedups = Table(
    "speedups", metadata,
    *_child_of_sweep(),
    Column("variant", String(64), nullable=False),
    Column("baseline", String(64), nullable=False),
    Column("group_key", String(512), nullable=False),
    Column("value", Float),
    Column("ci_low", Float),
    Column("ci_high", Float),
    Column("verdict", String(32)),
    Column("reason", Text),
    # version 3
    _container_profile(),
    UniqueConstraint("sweep_id", "variant", name="uq_speedups_sweep_variant"),
    # version 2
    Index("ix_speedups_series_night", "preset", "model", "cluster", "night"),
)

# version 3: where a profiled run's step time went (analysis/measure/profile_breakdown.py PARTS, ms per profiled step)
breakdowns = Table(
    "breakdowns", metadata,
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True, autoincrement=False),
    Column("part", String(32), primary_key=True),
    Column("ms", Float, nullable=False),
)

DATA_TABLES = ("sweeps", "runs", "steps", "speedups", "breakdowns")
