"""The SQLite store: round trip, idempotent re-recording, migrations, and every bad-database case (issue 6)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text

from analysis.history import (
    HistoryCorruptError,
    HistoryInputError,
    HistoryLockedError,
    HistorySchemaError,
    HistoryStore,
    HistoryStoreError,
    judge_night,
    load_summary,
    record_summary,
)
from analysis.history.schema import SCHEMA_VERSION, metadata
from analysis.history.store import normalize_url
from tests.analysis.history.helpers import GOLDEN_SWEEP


def _counts(url: str) -> dict[str, int]:
    eng = create_engine(url)
    with eng.connect() as c:
        out = {t: c.execute(text(f"SELECT count(*) FROM {t}")).scalar() for t in ("sweeps", "runs", "steps", "speedups")}
    eng.dispose()
    return out


def _with_sweep_id(sweep_id: str, created: str):
    night = load_summary(GOLDEN_SWEEP)
    from dataclasses import replace

    return replace(night, sweep=replace(night.sweep, sweep_id=sweep_id,
                                        created=datetime.fromisoformat(created).replace(tzinfo=UTC)))


def test_round_trip_and_idempotent_rerecord(sqlite_url):
    first = record_summary(sqlite_url, GOLDEN_SWEEP)
    assert (first.runs, first.steps, first.speedups, first.replaced) == (6, 48, 2, False)
    assert _counts(sqlite_url) == {"sweeps": 1, "runs": 6, "steps": 48, "speedups": 2}
    again = record_summary(sqlite_url, GOLDEN_SWEEP)
    assert again.replaced is True
    assert _counts(sqlite_url) == {"sweeps": 1, "runs": 6, "steps": 48, "speedups": 2}
    with HistoryStore(sqlite_url) as store:
        series = store.series()
        assert [str(s) for s in series] == ["nightly/tiny_moe/local_slurm/ci_cpu"]
        rows = store.run_rows(series[0])
        row = next(r for r in rows if (r["variant"], r["repeat"]) == ("a2a.ovl0.dw0", 0))
        assert row["git_sha"].startswith("0123") and row["container"]["torch"] == "2.14.1"
        assert store.step_times([row["id"]])[row["id"]][:2] == (1012.4, 998.1)
        journal = store.engine.connect().exec_driver_sql("PRAGMA journal_mode").scalar()
        assert journal == "wal"


def test_fresh_database_matches_schema_py(sqlite_url):
    with HistoryStore(sqlite_url) as store:
        assert store.applied == tuple(range(1, SCHEMA_VERSION + 1)) and store.version() == SCHEMA_VERSION
        insp = inspect(store.engine)
        for name, table in metadata.tables.items():
            assert [c["name"] for c in insp.get_columns(name)] == [c.name for c in table.columns], name
            assert {i["name"] for i in insp.get_indexes(name)} == {i.name for i in table.indexes}, name


def test_migration_v1_to_v2_keeps_the_data(sqlite_url):
    with HistoryStore(sqlite_url, migrate_to=1) as store:
        assert store.version() == 1
        with store.write() as conn:  # a v1 database with one sweep in it, written with v1 columns only
            conn.execute(text("INSERT INTO sweeps (sweep_id, night, preset, model, cluster, created, recorded_at) "
                              "VALUES ('old-1', '2026-11-20', 'nightly', 'tiny_moe', 'local_slurm', "
                              "'2026-11-20 01:00:00', '2026-11-20 02:00:00')"))
            conn.execute(text("INSERT INTO runs (sweep_id, night, preset, model, cluster, variant, repeat, attempt, "
                              "status, group_key, step_time_ms) VALUES ('old-1', '2026-11-20', 'nightly', 'tiny_moe', "
                              "'local_slurm', 'a2a.ovl0.dw0', 0, 1, 'ok', '', 1001.5)"))
        assert "peak_mem_gb" not in {c["name"] for c in inspect(store.engine).get_columns("runs")}
    with HistoryStore(sqlite_url, migrate_to=2) as store:  # opening with the current tool migrates
        assert store.applied == (2,) and store.version() == 2
        with store.read() as conn:
            row = conn.execute(text("SELECT step_time_ms, peak_mem_gb FROM runs WHERE sweep_id='old-1'")).one()
            versions = [r[0] for r in conn.execute(text("SELECT version FROM schema_version ORDER BY version"))]
        assert tuple(row) == (1001.5, None) and versions == [1, 2]
    with HistoryStore(sqlite_url) as store:
        assert store.applied == (3,) and store.version() == 3
    record_summary(sqlite_url, GOLDEN_SWEEP)
    assert _counts(sqlite_url)["runs"] == 7


def test_newer_schema_is_refused_untouched(sqlite_url):
    HistoryStore(sqlite_url).close()
    eng = create_engine(sqlite_url)
    with eng.begin() as c:
        c.execute(text("INSERT INTO schema_version VALUES (4, '2030-01-01', 'from the future')"))
    eng.dispose()
    with pytest.raises(HistorySchemaError, match="schema version 4, newer than this tool's 3; upgrade"):
        record_summary(sqlite_url, GOLDEN_SWEEP)


def test_foreign_database_is_refused(tmp_path):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as c:
        c.execute("CREATE TABLE runs (x INTEGER)")
    with pytest.raises(HistorySchemaError, match="table\\(s\\) runs but no schema_version table"):
        record_summary(f"sqlite:///{path}", GOLDEN_SWEEP)


def test_garbage_file_is_reported_and_left_untouched(tmp_path):
    path = tmp_path / "history.db"
    garbage = b"this is not a database at all\n" * 200
    path.write_bytes(garbage)
    with pytest.raises(HistoryCorruptError, match=r"is not a readable SQLite database .*left untouched.*\.corrupt"):
        record_summary(f"sqlite:///{path}", GOLDEN_SWEEP)
    assert path.read_bytes() == garbage


def test_malformed_pages_are_reported_and_left_untouched(tmp_path):
    path = tmp_path / "history.db"
    url = f"sqlite:///{path}"
    record_summary(url, GOLDEN_SWEEP)
    data = bytearray(path.read_bytes())
    assert len(data) > 8192
    data[4096:] = b"\xa5" * (len(data) - 4096)  # every page but the schema page
    path.write_bytes(bytes(data))
    with pytest.raises(HistoryCorruptError, match="malformed"):
        record_summary(url, _with_sweep_id("20261130-010000Z-000001", "2026-11-30T01:00:00"))
    assert path.read_bytes() == bytes(data)


def test_locked_database_times_out_cleanly_then_records(sqlite_url, tmp_path):
    record_summary(sqlite_url, GOLDEN_SWEEP)
    holder = sqlite3.connect(tmp_path / "history.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another collect step in the middle of its write
    try:
        with pytest.raises(HistoryLockedError, match=r"locked by another writer .*nothing was written"):
            record_summary(sqlite_url, _with_sweep_id("20261130-010000Z-000001", "2026-11-30T01:00:00"),
                           timeout_s=0.3)
        # readers are not blocked in WAL mode
        assert judge_night(sqlite_url).night.isoformat() == "2026-11-29"
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert _counts(sqlite_url)["sweeps"] == 1  # the earlier night is intact, nothing half-written
    record_summary(sqlite_url, _with_sweep_id("20261130-010000Z-000001", "2026-11-30T01:00:00"))
    assert _counts(sqlite_url) == {"sweeps": 2, "runs": 12, "steps": 96, "speedups": 4}


def test_clock_skew_is_recorded_in_night_order_with_a_warning(sqlite_url):
    record_summary(sqlite_url, GOLDEN_SWEEP)  # night 2026-11-29
    late = record_summary(sqlite_url, _with_sweep_id("20261127-230000Z-000002", "2026-11-27T23:00:00"))
    assert any("night 2026-11-27 is earlier than the latest recorded night 2026-11-29" in w for w in late.warnings)
    with HistoryStore(sqlite_url) as store:
        assert [n.isoformat() for n in store.nights(store.series()[0])] == ["2026-11-27", "2026-11-29"]
    report = judge_night(sqlite_url, "2026-11-27")
    assert any("earlier than the latest recorded night 2026-11-29" in w for w in report.warnings)
    future = record_summary(sqlite_url, _with_sweep_id("20991231-010000Z-000003", "2099-12-31T01:00:00"))
    assert any("more than a day ahead of this host's clock" in w for w in future.warnings)


def test_bad_urls():
    with pytest.raises(HistoryInputError, match="is not a SQLAlchemy URL"):
        HistoryStore("not a url")
    with pytest.raises(HistoryInputError, match="installed drivers are sqlite and postgresql"):
        HistoryStore("mysql://u:p@127.0.0.1/db")
    assert normalize_url("postgresql://u:p@h/db").drivername == "postgresql+psycopg"


def test_unreachable_postgres_is_a_store_error():
    with pytest.raises(HistoryStoreError, match=r"cannot use history database postgresql\+psycopg://u:\*\*\*@127"):
        HistoryStore("postgresql://u:secret@127.0.0.1:1/db", timeout_s=2)


def test_unwritable_location_is_a_store_error(tmp_path):
    with pytest.raises(HistoryStoreError, match="cannot create the folder of the history database"):
        HistoryStore("sqlite:////proc/no-such-folder/h.db")  # /proc takes no new folder, even for root


def test_a_path_under_a_file_or_a_folder_as_the_database_is_a_bad_url(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(HistoryInputError, match=f"history.url {blocker / 'sub' / 'h.db'}: {blocker} is a file"):
        HistoryStore(f"sqlite:///{Path(blocker) / 'sub' / 'h.db'}")
    with pytest.raises(HistoryInputError, match="is a folder, not a file"):
        HistoryStore(f"sqlite:///{tmp_path}")


def test_judging_a_missing_database_creates_nothing(tmp_path):
    path = tmp_path / "none" / "history.db"
    with pytest.raises(HistoryInputError, match="no history database at .*record a sweep first"):
        judge_night(f"sqlite:///{path}")
    assert not path.exists()
