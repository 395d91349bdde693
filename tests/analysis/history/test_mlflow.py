"""Export to a real MLflow tracking server on the loopback (SQLite backend), started by the test.

The server program comes from $MOE_SWEEP_MLFLOW or scripts/mlflow_local/install.sh's virtual environment."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import pytest
import requests

from analysis.history import record_summary
from analysis.history.nightly import nightly_step
from analysis.history.synthetic import SyntheticSeries, simulate_series
from tests.analysis.history.helpers import need_service, write_sweep_dir

pytestmark = [pytest.mark.mlflow, pytest.mark.slow]
DEFAULT = Path.home() / ".cache/moe_sweep/mlflow-venv/bin/mlflow"


@pytest.fixture
def mlflow_server(tmp_path):
    exe = os.environ.get("MOE_SWEEP_MLFLOW") or str(DEFAULT)
    if not os.access(exe, os.X_OK):
        need_service("mlflow", "no mlflow server program; install it with: bash scripts/mlflow_local/install.sh")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = (tmp_path / "mlflow.log").open("w")
    proc = subprocess.Popen([exe, "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
                             "--backend-store-uri", f"sqlite:///{tmp_path / 'mlflow.db'}",
                             "--artifacts-destination", str(tmp_path / "artifacts")],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            assert proc.poll() is None, (tmp_path / "mlflow.log").read_text()[-3000:]
            time.sleep(0.5)
        else:
            pytest.fail("mlflow server did not start in 120 s: " + (tmp_path / "mlflow.log").read_text()[-3000:])
        yield url
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(30)
        log.close()


def _api(url: str, path: str, **body):
    r = requests.post(f"{url}/api/2.0/mlflow/{path}", json=body, timeout=10)
    r.raise_for_status()
    return r.json()


def test_each_nights_runs_are_logged_with_params_metrics_and_the_report(tmp_path, sqlite_url, mlflow_server):
    inputs = simulate_series(SyntheticSeries(), 6, seed=11, tonight={"deepep.ovl1.dw0": 1.10})
    folders = [write_sweep_dir(tmp_path / "results", n) for n in inputs]
    for d in folders[:-1]:
        record_summary(sqlite_url, d)
    tonight = folders[-1]
    (tonight / "report" / "report.md").write_text("# report of tonight\n")
    settings = {"url": sqlite_url, "mlflow": mlflow_server}
    for _ in range(2):  # exported twice: the second replaces the first
        out = nightly_step(sqlite_url, tonight, settings)
        assert out.exported is True, out.lines
    exp = requests.get(f"{mlflow_server}/api/2.0/mlflow/experiments/get-by-name",
                       params={"experiment_name": "moe-sweep/nightly"}, timeout=10).json()["experiment"]
    runs = _api(mlflow_server, "runs/search", experiment_ids=[exp["experiment_id"]], max_results=100)["runs"]
    assert len(runs) == 1 + 12  # one parent + 4 variants x 3 repeats, once
    parent = next(r for r in runs if r["info"]["run_name"].endswith(inputs[-1].sweep.sweep_id))
    child = next(r for r in runs if r["info"]["run_name"] == "deepep.ovl1.dw0 r1")
    params = {p["key"]: p["value"] for p in child["data"]["params"]}
    metrics = {m["key"]: m["value"] for m in child["data"]["metrics"]}
    tags = {t["key"]: t["value"] for t in child["data"]["tags"]}
    assert params["variant"] == "deepep.ovl1.dw0" and params["version.megatron_core"] == "0.19.2"
    assert params["baseline"] == "a2a.ovl0.dw0"
    run = next(r for r in inputs[-1].runs if r.variant == "deepep.ovl1.dw0" and r.repeat == 1)
    assert metrics["step_time_ms"] == pytest.approx(run.step_time_ms)
    assert metrics["speedup_ci_low"] <= metrics["speedup"] <= metrics["speedup_ci_high"]
    assert "tokens_per_s_per_gpu" in metrics
    assert tags["mlflow.parentRunId"] == parent["info"]["run_id"] and tags["moe_sweep.verdict"] == "regression"
    pmetrics = {m["key"]: m["value"] for m in parent["data"]["metrics"]}
    assert pmetrics["exit_code"] == 4 and pmetrics["regressions"] == 2
    listing = requests.get(f"{mlflow_server}/api/2.0/mlflow/artifacts/list",
                           params={"run_id": parent["info"]["run_id"]}, timeout=10).json()
    assert {f["path"] for f in listing["files"]} == {"report.md", "history.json"}


def test_a_server_that_is_down_is_a_warning(tmp_path, sqlite_url):
    inputs = simulate_series(SyntheticSeries(), 2, seed=1)
    folder = write_sweep_dir(tmp_path / "results", inputs[0])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = nightly_step(sqlite_url, folder, {"url": sqlite_url, "mlflow": f"http://127.0.0.1:{port}"})
    assert out.exit_code == 0 and out.exported is False
    assert any("not exported to MLflow" in line and "ConnectionError" in line for line in out.lines)
