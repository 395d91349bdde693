"""Credentials in history URLs through the real sweep CLI and real services: an MLflow URI and a trend-page URL with a
password are used but never written to the sweep folder in clear, and a PostgreSQL history whose password the
manifest holds as ``***`` is recorded by a later collect with the password from ``PGPASSWORD``. Each sweep runs the
real CLI in a process of its own (tests/e2e/cli.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from tests.analysis.history.test_mlflow import mlflow_server  # noqa: F401  (the real server fixture)
from tests.e2e.cli import run_sweep, tail

pytestmark = [pytest.mark.megatron, pytest.mark.slow]
HISTORY = ["history.enabled=true", "poll_s=0.5"]


def _clear_anywhere(folder: Path, secret: str) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


@pytest.mark.mlflow
def test_mlflow_and_page_url_passwords_are_used_but_never_written(tmp_path, mlflow_server):  # noqa: F811
    mlflow_pw, page_pw = "mlflowS3cretPw", "pageS3cretPw"
    host = mlflow_server.split("://", 1)[1]
    out = tmp_path / "s"
    res = run_sweep([*HISTORY, f"output_dir={out}", f"history.url=sqlite:///{tmp_path / 'h.db'}",
                     f"history.mlflow=http://alice:{mlflow_pw}@{host}",
                     f"history.page_url=https://bob:{page_pw}@ci.example/history.html"])
    assert res.returncode == 0, tail(res)
    assert "exported to MLflow" in res.stderr, tail(res)
    assert _clear_anywhere(out, mlflow_pw) == [] and _clear_anywhere(out, page_pw) == []
    assert mlflow_pw not in res.stderr + res.stdout and page_pw not in res.stderr + res.stdout
    history = json.loads((out / "manifest.json").read_text())["config"]["history"]
    assert history["mlflow"] == f"http://alice:***@{host}", history
    assert history["page_url"] == "https://bob:***@ci.example/history.html", history
    # a later collect exports again with MLflow's own credential variables instead of the masked password
    sweep_id = json.loads((out / "manifest.json").read_text())["sweep_id"]
    res = run_sweep(["action=collect", f"sweep_id={sweep_id}", f"output_dir={out}"],
                    MLFLOW_TRACKING_USERNAME="alice", MLFLOW_TRACKING_PASSWORD=mlflow_pw)
    assert res.returncode == 0, tail(res)
    assert "exported to MLflow" in res.stderr, tail(res)
    assert _clear_anywhere(out, mlflow_pw) == []


@pytest.mark.postgres
def test_a_postgres_history_password_comes_from_pgpassword_on_a_later_collect(tmp_path, pg_url):
    password = make_url(pg_url).password
    out = tmp_path / "s"
    res = run_sweep([*HISTORY, f"output_dir={out}", f"history.url={pg_url}"])
    assert res.returncode == 0, tail(res)
    assert _clear_anywhere(out, f":{password}@") == []
    recorded = json.loads((out / "manifest.json").read_text())["config"]["history"]["url"]
    assert ":***@" in recorded, recorded
    sweep_id = json.loads((out / "manifest.json").read_text())["sweep_id"]
    res = run_sweep(["action=collect", f"sweep_id={sweep_id}", f"output_dir={out}"], PGPASSWORD=password)
    assert res.returncode == 0, tail(res)
    assert "history: recorded in postgresql" in res.stderr and f":{password}@" not in res.stderr, tail(res)
