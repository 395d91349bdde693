"""The public API end to end on SQLite: sweep folders -> record_summary -> judge_sweep / judge_night -> trend page."""

from __future__ import annotations

import base64
import re
from dataclasses import replace
from html.parser import HTMLParser

import pytest

from analysis.history import HistoryInputError, judge_night, judge_sweep, record_summary, write_trend_page
from analysis.history.judge import history_from_inputs, judge_history
from analysis.history.records import Series
from analysis.history.synthetic import SyntheticSeries, simulate_series
from tests.analysis.history.helpers import write_sweep_dir


@pytest.fixture
def recorded(tmp_path, sqlite_url):
    """Eight nights written as real sweep folders and recorded; the last slows deepep by 10%."""
    inputs = simulate_series(SyntheticSeries(), 8, seed=11, tonight={"deepep.ovl1.dw0": 1.10})
    for night in inputs:
        res = record_summary(sqlite_url, write_sweep_dir(tmp_path / "results", night))
        assert res.runs == 12 and res.steps == 12 * 40 and res.speedups == 3 and res.warnings == ()
    return sqlite_url, inputs


def test_judge_sweep_flags_the_regression_with_exit_code_4(recorded):
    url, inputs = recorded
    report = judge_sweep(url, inputs[-1].sweep.sweep_id)
    assert report.night == inputs[-1].sweep.night and report.sweep_ids == (inputs[-1].sweep.sweep_id,)
    assert set(report.regressions) == {("deepep.ovl1.dw0", "step_time_ms"), ("deepep.ovl1.dw0", "speedup")}
    assert report.exit_code == 4
    assert report.variant("deepep.ovl1.dw0").step_time.p_iterations < 1e-6  # per-iteration samples were stored
    # the database path gives the same verdicts as the in-memory one
    memory = judge_history(history_from_inputs(inputs), inputs[-1].sweep.night)
    for v in memory.variants:
        db = report.variant(v.variant)
        assert [j.verdict for j in db.judgements] == [j.verdict for j in v.judgements]
        assert db.step_time.change == pytest.approx(v.step_time.change)
    earlier = judge_night(url, inputs[-2].sweep.night)
    assert earlier.exit_code == 0 and any("earlier than the latest recorded night" in w for w in earlier.warnings)
    js = report.to_json()
    assert js["exit_code"] == 4 and js["night"] == inputs[-1].sweep.night.isoformat()


def test_series_and_night_selection_errors(recorded, tmp_path):
    url, inputs = recorded
    other = replace(inputs[-1], sweep=replace(inputs[-1].sweep, sweep_id="other-cluster",
                                              series=Series(preset="nightly", model="tiny_moe", cluster="b200_slurm")))
    record_summary(url, other)
    with pytest.raises(HistoryInputError, match=r"2 series match \*/\*/\*/\* on night .*name one with series=preset/model/cluster/container"):
        judge_night(url, inputs[-1].sweep.night)
    assert judge_night(url, inputs[-1].sweep.night, cluster="synthetic").exit_code == 4
    with pytest.raises(HistoryInputError, match=r"no recorded series matches \*/\*/synthetic/\* on night 2030-01-01"):
        judge_night(url, "2030-01-01", cluster="synthetic")
    with pytest.raises(HistoryInputError, match="night='29/11' is not a date like 2026-11-29"):
        judge_night(url, "29/11")
    with pytest.raises(HistoryInputError, match="sweep nope is not in the history"):
        judge_sweep(url, "nope")


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.imgs, self.cells, self.in_tonight = [], [], False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.imgs.append(a.get("src", ""))
        if tag == "table" and "tonight" in (a.get("class") or "").split():
            self.in_tonight = True
        if tag == "td" and self.in_tonight:
            self.cells.append(a.get("class", ""))

    def handle_endtag(self, tag):
        if tag == "table":
            self.in_tonight = False


def test_trend_page_is_self_contained(recorded, tmp_path):
    url, _ = recorded
    out = write_trend_page(url, tmp_path / "page" / "history.html")
    text = out.read_text()
    assert "http://" not in text and "https://" not in text  # nothing to fetch: self-contained
    page = _Page()
    page.feed(text)
    assert len(page.imgs) == 1  # one group (no extra axes)
    png = base64.b64decode(page.imgs[0].removeprefix("data:image/png;base64,"))
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    assert page.cells.count("regression") == 2 and page.cells.count("within_noise") >= 4
    assert re.search(r"<b>2</b> regression\(s\)", text)
    assert oct(out.stat().st_mode & 0o777) != "0o600"


def test_groups_are_judged_against_their_own_baseline(tmp_path, sqlite_url):
    ep = "model.expert_model_parallel_size"
    spec = SyntheticSeries(
        variants={"a2a.ovl0.dw0.ep8": 1000.0, "a2a.ovl1.dw0.ep8": 850.0,
                  "a2a.ovl0.dw0.ep16": 1200.0, "a2a.ovl1.dw0.ep16": 900.0},
        groups={"a2a.ovl0.dw0.ep8": f"{ep}=8", "a2a.ovl1.dw0.ep8": f"{ep}=8",
                "a2a.ovl0.dw0.ep16": f"{ep}=16", "a2a.ovl1.dw0.ep16": f"{ep}=16"})
    # tonight the EP16 baseline got 10% faster: only the EP16 overlap benefit shrank
    for night in simulate_series(spec, 8, seed=12, tonight={"a2a.ovl0.dw0.ep16": 0.9}):
        record_summary(sqlite_url, write_sweep_dir(tmp_path / "results", night))
    report = judge_night(sqlite_url)
    assert report.variant("a2a.ovl1.dw0.ep16").group_key == f"{ep}=16"
    assert report.variant("a2a.ovl1.dw0.ep16").baseline_variant == "a2a.ovl0.dw0.ep16"
    assert report.variant("a2a.ovl1.dw0.ep16").speedup.verdict == "regression"
    assert report.variant("a2a.ovl1.dw0.ep8").speedup.verdict == "within_noise"
    assert report.variant("a2a.ovl0.dw0.ep8").speedup is None  # baselines have no speedup
    page = _Page()
    page.feed(write_trend_page(sqlite_url, tmp_path / "groups.html").read_text())
    assert len(page.imgs) == 2  # one figure per group
