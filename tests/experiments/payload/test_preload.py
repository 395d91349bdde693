"""The validate fork server (experiments.payload.preload, launchers.preload): a job handed to it gives what the job
gives in its own process; a job it cannot serve validates in its own process; a killed or signalled job ends its
worker; the server ends when nobody asks. Real processes, real torch and Megatron-Core imports."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from experiments.payload.validate_runs import main as runs_main
from launchers.exitwatch import children, running
from launchers.preload import Preloader

from .helpers import make_variant, read_effective, write_variant

pytestmark = pytest.mark.megatron
REPO = Path(__file__).resolve().parents[3]
FALLBACK = "[preload] validating in this process"


def _runs(tmp_path: Path, tag: str) -> list[dict]:
    """A good run, a failing one (delay_wgrad without overlap) and one whose variant file is missing."""
    sweep = tmp_path / "sweep"
    good = write_variant(sweep / "variants", make_variant("alltoall", True, False))
    bad = write_variant(sweep / "variants", make_variant("alltoall", False, True))
    out = []
    for k, path in enumerate((good, bad, tmp_path / "missing" / "variant.json")):
        folder = tmp_path / tag / f"r{k}"
        out.append({"variant_json": str(path), "out_dir": str(folder / "out"), "attempt": 1,
                    "log": str(folder / "log"), "exit": str(folder / "exit.json")})
    return out


def _spec(tmp_path: Path, tag: str, runs: list[dict], preload: str | None) -> Path:
    path = tmp_path / tag / "runs.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"runs": runs, **({"preload": preload} if preload else {})}))
    return path


def _job(spec: Path, *extra: str, cwd: Path = REPO) -> subprocess.Popen:
    """The validate job as the local executor starts it: ``python -m experiments.payload.validate_runs`` in the
    checkout, with this process's environment (which the server has too)."""
    env = dict(os.environ)
    if cwd != REPO:
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    return subprocess.Popen([sys.executable, "-m", "experiments.payload.validate_runs", str(spec), *extra], cwd=cwd,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _codes(runs: list[dict]) -> list[int]:
    return [json.loads(Path(r["exit"]).read_text())["exit_code"] for r in runs]


def _comparable(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k not in {"hardware", "written_at", "runtime", "out_dir"}}


@pytest.fixture
def server():
    started: list[Preloader] = []

    def make(**kwargs) -> Preloader:
        p = Preloader(cwd=REPO, **kwargs)
        started.append(p)
        return p

    yield make
    for p in started:
        if p.proc.poll() is None:
            p.proc.kill()
            p.proc.wait()
        p.stop()


def test_a_served_job_gives_what_its_own_process_gives(tmp_path, server, capsys, monkeypatch):
    p = server()
    served = _runs(tmp_path, "served")
    job = _job(_spec(tmp_path, "served", served, p.take()))
    out, err = job.communicate(timeout=300)
    assert FALLBACK not in err, err
    assert p.proc.wait(timeout=30) == 0  # it served the one job, then ended
    own = _runs(tmp_path, "own")
    monkeypatch.chdir(tmp_path)
    code = runs_main([str(_spec(tmp_path, "own", own, None))])
    capsys.readouterr()
    assert _codes(served) == _codes(own) and job.returncode == code != 0
    assert _codes(own)[0] == 0 and _codes(own)[2] == 10
    for a, b in zip(served[:2], own[:2], strict=True):
        assert _comparable(read_effective(Path(a["out_dir"]))) == _comparable(read_effective(Path(b["out_dir"])))
        ours, theirs = Path(a["log"]).read_text(), Path(b["log"]).read_text()
        assert [ln for ln in ours.splitlines() if ln.startswith("[payload]") and " out=" not in ln] == \
            [ln for ln in theirs.splitlines() if ln.startswith("[payload]") and " out=" not in ln]
    # the job's stdout carries every run's payload lines, as when it validates itself
    assert out.count("[payload] exit") == 3


def test_a_job_with_another_sys_path_validates_in_its_own_process(tmp_path, server):
    p = server()
    runs = _runs(tmp_path, "other")
    job = _job(_spec(tmp_path, "other", runs, p.take()), cwd=tmp_path)  # sys.path[0] is the job's folder
    _, err = job.communicate(timeout=300)
    assert f"{FALLBACK}: the job's sys.path differs" in err
    assert _codes(runs)[0] == 0 and _codes(runs)[2] == 10 and job.returncode == _codes(runs)[1] != 0
    assert p.proc.wait(timeout=30) == 0


def test_no_server_at_the_path_validates_in_this_process(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runs = _runs(tmp_path, "none")
    code = runs_main([str(_spec(tmp_path, "none", runs, str(tmp_path / "no-such-socket")))])
    err = capsys.readouterr().err
    assert f"{FALLBACK}: {tmp_path / 'no-such-socket'}" in err
    assert _codes(runs)[0] == 0 and code == _codes(runs)[1] != 0


def _following_job(tmp_path: Path, p: Preloader, tag: str) -> subprocess.Popen:
    """A job that, once its runs are validated, waits for more (``--follow``): its worker lives on."""
    runs = _runs(tmp_path, tag)[:1]
    job = _job(_spec(tmp_path, tag, runs, p.take()), "--follow", "120")
    deadline = time.monotonic() + 300
    while not Path(runs[0]["exit"]).exists():
        assert time.monotonic() < deadline and job.poll() is None, job.communicate()
        time.sleep(0.1)
    return job


def test_a_killed_job_ends_its_worker_and_the_server(tmp_path, server):
    p = server()
    job = _following_job(tmp_path, p, "killed")
    assert p.proc.poll() is None  # serving: the worker follows
    job.kill()
    job.wait()
    assert p.proc.wait(timeout=30) == 0  # the server reaps its worker before it exits


def test_a_signal_to_the_job_reaches_its_worker(tmp_path, server):
    p = server()
    job = _following_job(tmp_path, p, "term")
    job.send_signal(signal.SIGTERM)
    job.communicate(timeout=30)
    assert job.returncode == 128 + signal.SIGTERM  # the worker's end, passed on as the job's exit code
    assert p.proc.wait(timeout=30) == 0


def test_the_server_ends_when_nobody_asks(tmp_path):
    p = Preloader(cwd=REPO, accept_s=0.2)
    try:
        assert p.proc.wait(timeout=120) == 0
        assert p.take() is None  # an ended server is not handed to a job
    finally:
        p.stop()
    assert not p.folder.exists()


def test_running_leaves_out_exited_children():
    done = subprocess.Popen(["true"])
    live = subprocess.Popen(["sleep", "30"])
    try:
        deadline = time.monotonic() + 10
        while done.pid in running({done.pid}):  # exited but not reaped: a zombie
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert done.pid in children()
        assert running({done.pid, live.pid}) == {live.pid}
    finally:
        live.kill()
        live.wait()
        done.wait()
