"""An unattended nightly whose history is a PostgreSQL database with the password in its URL, through the real CLI,
the real local Slurm and a real PostgreSQL server, with neither ``PGPASSWORD`` nor a ``~/.pgpass`` anywhere:

- the chained collect job gets the password through sbatch's environment (never a file) and records the night,
  and a webhook given as a URL (stored masked) the same way, so a failed night alerts;
- a later hand ``action=collect`` without the password is refused before it waits for anything, touches nothing,
  and alerts that the night is not recorded;
- a history step that fails after the report was written (a wrong password) says so in the last line and the
  report, and alerts, instead of "nothing was written"."""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from tests.analysis.history.conftest import pg_server_url, pg_url  # noqa: F401  (the real server's fixtures)
from tests.e2e.cli import run_sweep, tail

pytestmark = [pytest.mark.postgres, pytest.mark.megatron, pytest.mark.slow]
NIGHT = ["sweep=nightly", "repeats=1", "dispatcher=alltoall", "overlap=off,on", "delay_wgrad=off", "poll_s=0.5"]


@pytest.fixture(autouse=True)
def no_password_around(monkeypatch, tmp_path):
    """Neither PGPASSWORD nor a password file reaches any process of the test (the jobs inherit this environment)."""
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "no-such-pgpass"))


@pytest.fixture
def role_url(pg_url, pg_server_url) -> Iterator[str]:  # noqa: F811
    """``pg_url``'s database owned by a new role whose password is unique (found in no file by chance)."""
    name, password = f"moe_role_{uuid.uuid4().hex[:8]}", f"Pw{uuid.uuid4().hex}"
    db = make_url(pg_url).database
    admin = create_engine(pg_server_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE ROLE {name} LOGIN PASSWORD '{password}'"))
        conn.execute(text(f'ALTER DATABASE "{db}" OWNER TO {name}'))
    try:
        yield make_url(pg_url).set(username=name, password=password).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
            conn.execute(text(f"DROP ROLE IF EXISTS {name}"))
        admin.dispose()


def _files_with(folder: Path, secret: str) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def _nights(url: str) -> list[str]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return [r[0] for r in conn.execute(text("SELECT sweep_id FROM sweeps"))]
    finally:
        engine.dispose()


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and not p.name.endswith(".lock")}


def _wait_for_collect_job(out: Path) -> str:
    job = str(json.loads((out / "collect_job.json").read_text())["job_id"])
    deadline, state = time.monotonic() + 1500, ""  # the local cluster is shared with other tests
    while time.monotonic() < deadline:
        state = subprocess.run(["sacct", "-X", "-n", "-P", "-j", job, "-o", "State,ExitCode"], capture_output=True,
                               text=True).stdout.strip()
        if state and state.split("|")[0] not in ("PENDING", "RUNNING", "REQUEUED", "COMPLETING"):
            return state
        time.sleep(3)
    return state


@pytest.mark.slurm
@pytest.mark.usefixtures("slurm_cluster")
def test_the_chained_collect_gets_the_urls_password_and_records_the_night(tmp_path, role_url):
    url, password = role_url, make_url(role_url).password
    out = tmp_path / "s"
    res = run_sweep([*NIGHT, "cluster=local_slurm", "allow_dirty=true", f"output_dir={out}", f"history.url={url}"])
    assert res.returncode == 0 and "collect chained" in res.stdout, tail(res)
    state = _wait_for_collect_job(out)
    logs = "\n".join(p.read_text(errors="replace")[-3000:] for p in out.rglob("nemo_run/**/collect*/log-*.out"))
    assert state == "COMPLETED|0:0", (state, logs)
    sweep_id = json.loads((out / "manifest.json").read_text())["sweep_id"]
    assert _nights(url) == [sweep_id]
    assert json.loads((out / "report" / "history.json").read_text())["exit_code"] == 0
    assert _files_with(out, password) == []  # the password travelled in the job's environment only


@pytest.mark.slurm
@pytest.mark.usefixtures("slurm_cluster")
def test_the_chained_collect_alerts_a_webhook_given_as_a_url(tmp_path, webhook):
    out, hook = tmp_path / "s", f"{webhook.url}/TokenPart8812"
    # expert parallelism 1 and no preflight: the overlap arm fails in its job, so the night alerts
    res = run_sweep([*NIGHT, "cluster=local_slurm", "allow_dirty=true", f"output_dir={out}", "preflight=off",
                     "model.expert_model_parallel_size=1", f"history.url=sqlite:///{tmp_path / 'h.db'}",
                     f"history.notify={hook}"])
    assert res.returncode == 0 and "collect chained" in res.stdout, tail(res)
    assert _wait_for_collect_job(out) == "FAILED|3:0"
    (alert,) = webhook.bodies
    assert alert["exit_code"] == 3 and alert["failed"], alert
    assert _files_with(out, "TokenPart8812") == []  # the URL travelled in the job's environment only


def test_a_collect_without_the_password_is_refused_before_waiting_and_alerted(tmp_path, role_url, webhook):
    url = role_url
    out = tmp_path / "s"
    res = run_sweep([*NIGHT, "detach=false", f"output_dir={out}", f"history.url={url}",
                     "history.notify=env:NIGHT_HOOK"], NIGHT_HOOK=webhook.url)
    assert res.returncode == 0, tail(res)
    before = _digest(out)
    sweep_id = json.loads((out / "manifest.json").read_text())["sweep_id"]
    res = run_sweep(["action=collect", f"sweep_id={sweep_id}", f"output_dir={out}"], NIGHT_HOOK=webhook.url)
    assert res.returncode == 2, tail(res)
    assert "the sweep stores no password; export PGPASSWORD" in res.stderr, tail(res)
    assert "nothing was collected or recorded" in res.stderr, tail(res)
    assert _digest(out) == before
    (alert,) = webhook.bodies
    assert "stores no password" in alert["not_recorded"] and "not recorded" in alert["headline"], alert


def test_a_history_step_that_fails_after_the_report_says_so_and_alerts(tmp_path, role_url, webhook):
    wrong = make_url(role_url).set(password="not-the-password").render_as_string(hide_password=False)
    out = tmp_path / "s"
    res = run_sweep([*NIGHT, "detach=false", f"output_dir={out}", f"history.url={wrong}",
                     "history.notify=env:NIGHT_HOOK"], NIGHT_HOOK=webhook.url)
    assert res.returncode == 5, tail(res)
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("exit code 5: the sweep was analysed and reported (the analysis alone: exit code 0); "
                           "the history step: "), tail(res)
    assert "nothing was written" not in last, last
    report = (out / "report" / "report.md").read_text()
    assert "Exit code 5: scheduler or infrastructure error, from the history step after the analysis" in report
    (alert,) = webhook.bodies
    assert alert["not_recorded"] and alert["exit_code"] == 5, alert
    assert "not-the-password" not in json.dumps(alert) and _files_with(out, "not-the-password") == []
