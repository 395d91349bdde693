"""The nightly alert through the real CLI and a real loopback webhook: a healthy night (the preset prunes cells at
plan time) sends nothing and records exit code 0; a night whose runs fail alerts with only those runs and records
its true exit code (3) in history.json and on the trend page. Each sweep runs the real CLI in a process of its own
(tests/e2e/cli.py)."""

from __future__ import annotations

import json

import pytest

from tests.e2e.cli import run_sweep, tail


@pytest.mark.megatron
@pytest.mark.slow
def test_pruned_cells_never_alert_and_a_failed_night_states_its_true_exit_code(tmp_path, webhook):
    db = f"sqlite:///{tmp_path / 'history.db'}"
    night = ["sweep=nightly", "repeats=1", "detach=false", "poll_s=0.5", f"history.url={db}",
             "history.notify=env:NIGHT_HOOK"]
    healthy = tmp_path / "healthy"
    res = run_sweep([*night, f"output_dir={healthy}"], NIGHT_HOOK=webhook.url)
    assert res.returncode == 0, tail(res)
    statuses = {v["status"] for v in json.loads((healthy / "manifest.json").read_text())["variants"]}
    assert "pruned" in statuses  # the preset prunes cells at plan time: that is no failure
    assert webhook.bodies == []
    assert json.loads((healthy / "report" / "history.json").read_text())["exit_code"] == 0
    # expert parallelism 1 and no preflight: Megatron-Core rejects the overlap and delay_wgrad arms when their jobs run
    bad = tmp_path / "bad"
    res = run_sweep([*night, f"output_dir={bad}", "preflight=off", "model.expert_model_parallel_size=1"],
                    NIGHT_HOOK=webhook.url)
    assert res.returncode == 3, tail(res)
    (alert,) = webhook.bodies
    assert alert["exit_code"] == 3 and alert["failed"], alert
    assert all(": failed" in f and "pruned" not in f and "skipped" not in f for f in alert["failed"]), alert
    doc = json.loads((bad / "report" / "history.json").read_text())
    assert doc["exit_code"] == 3 and doc["failed_runs"], doc
    assert "exit code 3." in (bad / "report" / "history.html").read_text()
