"""The history on a real PostgreSQL server (scripts/pg_local/start.sh; URL from MOE_SWEEP_PG_URL)."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, inspect, text

from analysis.history import (
    HistoryLockedError,
    HistoryStore,
    judge_night,
    judge_sweep,
    load_summary,
    record_summary,
    write_trend_page,
)
from analysis.history.schema import SCHEMA_VERSION, metadata
from analysis.history.store import _PG_LOCK_KEY
from analysis.history.synthetic import SyntheticSeries, simulate_series
from tests.analysis.history.concurrent import record_concurrently, table_counts
from tests.analysis.history.helpers import GOLDEN_SWEEP, write_sweep_dir

pytestmark = pytest.mark.postgres


def test_round_trip(pg_url):
    res = record_summary(pg_url, GOLDEN_SWEEP)
    assert (res.runs, res.steps, res.speedups, res.replaced) == (6, 48, 2, False)
    assert "***" in res.url and "moe_sweep:moe_sweep@" not in res.url
    assert record_summary(pg_url, GOLDEN_SWEEP).replaced is True
    assert table_counts(pg_url)["runs"] == 6
    with HistoryStore(pg_url) as store:
        insp = inspect(store.engine)
        for name, table in metadata.tables.items():
            assert [c["name"] for c in insp.get_columns(name)] == [c.name for c in table.columns], name
        series = store.series()[0]
        row = next(r for r in store.run_rows(series) if r["variant"] == "deepep.ovl1.dw0" and r["repeat"] == 1)
        assert row["attempt"] == 3 and row["container"]["megatron_core"] == "0.19.2"
        assert store.step_times([row["id"]])[row["id"]][0] == 743.7
    night = load_summary(GOLDEN_SWEEP)
    report = judge_night(pg_url)
    assert report.night == night.sweep.night
    assert report.variant("a2a.ovl1.dw0").step_time.verdict == "new_variant"


def test_migration_v1_to_v2(pg_url):
    with HistoryStore(pg_url, migrate_to=1) as store:
        assert store.version() == 1
        assert "loss_last" not in {c["name"] for c in inspect(store.engine).get_columns("runs")}
    with HistoryStore(pg_url, migrate_to=2) as store:
        assert store.applied == (2,) and store.version() == 2
    with HistoryStore(pg_url) as store:
        assert store.applied == (3,) and store.version() == 3
    assert record_summary(pg_url, GOLDEN_SWEEP).runs == 6


@pytest.mark.slow
def test_concurrent_collect_steps(pg_url, tmp_path):
    inputs = simulate_series(SyntheticSeries(), 5, seed=4, tonight={"a2a.ovl1.dw0": 1.12})
    folders = [write_sweep_dir(tmp_path / "results", n) for n in inputs]
    record_concurrently(pg_url, folders, workers=3)  # three processes also race to create the schema
    assert table_counts(pg_url) == {"sweeps": 5, "runs": 5 * 12, "steps": 5 * 12 * 40, "speedups": 5 * 3,
                                    "duplicate_runs": 0, "orphan_steps": 0}
    with HistoryStore(pg_url) as store:
        assert store.version() == SCHEMA_VERSION
    assert judge_sweep(pg_url, inputs[-1].sweep.sweep_id).night == inputs[-1].sweep.night


def test_writer_waiting_on_the_lock_times_out_cleanly(pg_url):
    record_summary(pg_url, GOLDEN_SWEEP)
    holder = create_engine(pg_url)
    with holder.connect() as conn, conn.begin():
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOCK_KEY})  # a writer mid-transaction
        with pytest.raises(HistoryLockedError, match="locked by another writer .*nothing was written"):
            record_summary(pg_url, GOLDEN_SWEEP, timeout_s=1)
    holder.dispose()
    assert record_summary(pg_url, GOLDEN_SWEEP).replaced is True


def test_trend_page_from_postgres(pg_url, tmp_path):
    for n in simulate_series(SyntheticSeries(), 9, seed=8, tonight={"hybridep.ovl1.dw0": 1.15}):
        record_summary(pg_url, n)
    out = write_trend_page(pg_url, tmp_path / "trend.html")
    html = out.read_text()
    assert html.count("data:image/png;base64,") == 1 and 'class="regression"' in html


def test_first_open_reads_the_version_inside_the_lock(pg_url, monkeypatch):
    """Issue 13 item 9: under READ COMMITTED the unlocked read can see ``sweeps`` committed by another first
    collect but not ``schema_version`` (each catalogue query takes a new snapshot). That read must not decide:
    the version is read again under the advisory lock."""
    import analysis.history.store as store_mod
    from analysis.history.errors import HistorySchemaError

    record_summary(pg_url, GOLDEN_SWEEP)  # another collect created the schema
    calls = []
    real = store_mod.current_version

    def racing(conn):  # the first, unlocked read falls between two snapshots
        calls.append(1)
        if len(calls) == 1:
            raise HistorySchemaError("the database has table(s) sweeps but no schema_version table")
        return real(conn)

    monkeypatch.setattr(store_mod, "current_version", racing)
    with HistoryStore(pg_url) as store:
        assert store.applied == ()
    assert len(calls) == 1  # the locked re-read goes through migrations.migrate's own current_version
    monkeypatch.setattr(store_mod, "current_version", real)
    with HistoryStore(pg_url) as store:
        assert store.version() == SCHEMA_VERSION
