"""Many series in one history database: the nightly step of each keeps its true exit code and writes its page."""

from __future__ import annotations

from dataclasses import replace

import pytest

from analysis.history import judge_sweep, record_summary, write_trend_page
from analysis.history.records import Series
from analysis.history.synthetic import SyntheticSeries, simulate_series
from contracts.sweepdir import SweepDir
from tests.analysis.history.helpers import write_sweep_dir

THREE = (Series(preset="nightly", model="tiny_moe", cluster="synthetic", container="ci_cpu"),
         Series(preset="nightly", model="qwen3_30b_a3b", cluster="synthetic", container="ci_cpu"),
         Series(preset="nightly", model="tiny_moe", cluster="b200_slurm", container="nemo_26_04"))


def three_series(root, seed: int = 5, nights: int = 6, tonight: dict | None = None):
    """Sweep folders of three series on the same nights; the first series' last night slows deepep by 10%."""
    out = {}
    for k, series in enumerate(THREE):
        inputs = simulate_series(replace(SyntheticSeries(), series=series), nights, seed=seed + k,
                                 tonight=(tonight or {"deepep.ovl1.dw0": 1.10}) if k == 0 else None)
        out[series] = [write_sweep_dir(root, replace(n, sweep=replace(n.sweep, sweep_id=f"{n.sweep.sweep_id}-{k}")))
                       for n in inputs]
    return out


def test_conductor_history_step_keeps_exit_4_with_two_series_recorded(tmp_path, sqlite_url):
    from experiments.conductor.analyse import record_history

    folders = three_series(tmp_path / "results")
    for series in THREE[1:]:
        for d in folders[series]:
            record_summary(sqlite_url, d)
    mine = folders[THREE[0]]
    for d in mine[:-1]:
        record_summary(sqlite_url, d)
    sd = SweepDir(mine[-1])
    rc, said = record_history(sd, None, {"enabled": True, "url": sqlite_url})
    assert rc == 4 and "a regression was flagged" in said  # the regression, not "usage or config error"
    page = sd.history_html.read_text()
    for series in THREE:  # a section per series
        assert f"id='series-{series.slug}'" in page, series
    assert sd.history_json.is_file()


def test_trend_page_of_one_series_and_of_all(tmp_path, sqlite_url):
    folders = three_series(tmp_path / "results")
    for ds in folders.values():
        for d in ds:
            record_summary(sqlite_url, d)
    everything = write_trend_page(sqlite_url, tmp_path / "all.html").read_text()
    assert all(f"id='series-{s.slug}'" in everything for s in THREE)
    one = write_trend_page(sqlite_url, tmp_path / "one.html", series=str(THREE[2])).read_text()
    assert f"id='series-{THREE[2].slug}'" in one and f"id='series-{THREE[0].slug}'" not in one
    report = judge_sweep(sqlite_url, folders[THREE[0]][-1].name)
    assert report.series == THREE[0] and report.exit_code == 4
    assert judge_sweep(sqlite_url, folders[THREE[1]][-1].name).exit_code == 0


def test_series_text_round_trips_and_bad_text_names_the_form():
    for s in THREE:
        assert Series.parse(str(s)) == s
    assert Series.parse("nightly/tiny_moe/local") == Series(preset="nightly", model="tiny_moe", cluster="local")
    with pytest.raises(ValueError, match="preset/model/cluster"):
        Series.parse("nightly/tiny_moe")


def v2_database_with_two_series(url: str) -> None:
    """A version-2 history holding two series that differ only in their container (one sweep each)."""
    from sqlalchemy import text

    from analysis.history import HistoryStore

    with HistoryStore(url, migrate_to=2) as store, store.write() as conn:
        for sid, name in (("old-a", "nemo_26_02"), ("old-b", "nemo_26_04")):
            conn.execute(text("INSERT INTO sweeps (sweep_id, night, preset, model, cluster, created, recorded_at, "
                              "container) VALUES (:s, '2026-11-20', 'nightly', 'tiny_moe', 'h100_slurm', "
                              "'2026-11-20 01:00:00', '2026-11-20 02:00:00', :c)"),
                         {"s": sid, "c": f'{{"name": "{name}", "torch": "2.14.1"}}'})
            conn.execute(text("INSERT INTO runs (sweep_id, night, preset, model, cluster, variant, repeat, attempt, "
                              "status, group_key, step_time_ms) VALUES (:s, '2026-11-20', 'nightly', 'tiny_moe', "
                              "'h100_slurm', 'a2a.ovl0.dw0', 0, 1, 'ok', '', 1001.5)"), {"s": sid})


def check_v3_split_the_series(url: str) -> None:
    from analysis.history import HistoryStore

    with HistoryStore(url) as store:
        assert store.applied == (3,)
        assert [s.container for s in store.series()] == ["nemo_26_02", "nemo_26_04"]
        rows = {r["sweep_id"]: r["container_profile"] for s in store.series() for r in store.run_rows(s)}
    assert rows == {"old-a": "nemo_26_02", "old-b": "nemo_26_04"}


def test_migration_to_v3_fills_the_container_profile(sqlite_url):
    v2_database_with_two_series(sqlite_url)
    check_v3_split_the_series(sqlite_url)


@pytest.mark.postgres
def test_migration_to_v3_fills_the_container_profile_on_postgres(pg_url):
    v2_database_with_two_series(pg_url)
    check_v3_split_the_series(pg_url)


WRITER = """
import sys, time
from analysis.history import record_summary
url, start = sys.argv[1], float(sys.argv[2])
while time.time() < start:
    time.sleep(0.005)
for d in sys.argv[3:]:
    record_summary(url, d, timeout_s=120)
"""


def two_writers_three_series(url: str, root) -> dict:
    """Two processes record the nights of three series at once (each writer takes every other folder)."""
    import subprocess
    import sys
    import time

    from tests.analysis.history.concurrent import REPO

    folders = three_series(root)
    flat = [d for ds in folders.values() for d in ds]
    start = time.time() + 4.0
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, url, str(start), *map(str, flat[k::2])], cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for k in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
    return folders


def check_three_series(url: str, folders: dict, tmp_path) -> None:
    from analysis.history import HistoryStore

    with HistoryStore(url) as store:
        assert store.series() == sorted(THREE)
        assert all(len(store.nights(s)) == 6 for s in THREE)
    assert judge_sweep(url, folders[THREE[0]][-1].name).exit_code == 4
    assert judge_sweep(url, folders[THREE[1]][-1].name).exit_code == 0
    page = write_trend_page(url, tmp_path / "all.html").read_text()
    assert page.count("<section id='series-") == 3


@pytest.mark.slow
def test_three_series_two_writers_on_sqlite(tmp_path, sqlite_url):
    check_three_series(sqlite_url, two_writers_three_series(sqlite_url, tmp_path / "results"), tmp_path)


@pytest.mark.postgres
def test_three_series_two_writers_on_postgres(tmp_path, pg_url):
    check_three_series(pg_url, two_writers_three_series(pg_url, tmp_path / "results"), tmp_path)


def test_cli_trend_of_one_series(tmp_path, sqlite_url):
    from analysis.history.__main__ import main

    for ds in three_series(tmp_path / "results", nights=4).values():
        for d in ds:
            record_summary(sqlite_url, d)
    out = tmp_path / "one.html"
    assert main(["trend", "--url", sqlite_url, "--out", str(out), "--series", str(THREE[1])]) == 0
    assert out.read_text().count("<section id='series-") == 1
    assert main(["judge", "--url", sqlite_url]) == 2  # three series match: name one (a usage error, nothing written)
    assert main(["judge", "--url", sqlite_url, "--series", str(THREE[1])]) == 0
