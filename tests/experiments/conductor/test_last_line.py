"""Each action's last line says what it did, never "every kept run is good" for a command that judged nothing:
a plan ran nothing, a status says what the sweep is (planned, running k of n, cancelled, done with exit N), a
cancel what it cancelled, a detached submit what it queued. The real CLI in this process (``main``)."""

from __future__ import annotations

import json

from contracts.manifest import Manifest
from contracts.sweepdir import SweepDir
from experiments.conductor.ending import after_run, after_status, sweep_state
from experiments.sweep import main

GOOD = "every kept run is good"
NIGHTLY = ["sweep=nightly", "cluster=local", "repeats=3"]


def _last(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    return err[-1]


def _plan(tmp_path, capsys, *extra: str):
    out = tmp_path / "s"
    assert main(["action=plan", f"output_dir={out}", *NIGHTLY, *extra]) == 0
    last = _last(capsys)
    return SweepDir(out), last


def _attempts(sd: SweepDir, states: list[str], flags: list[str] | None = None) -> None:
    """Give the first len(states) planned runs one attempt each, in these states."""
    def change(m):
        for i, ((n, r), st) in enumerate(zip(m.runs, states, strict=False)):
            a = m.variant(n).new_attempt(r)
            a.set(status="submitted", job_id=f"local-{i}")
            if st != "submitted":
                a.set(status=st, add_flags=flags or [])
    Manifest.update(sd, change)


def test_plan_says_nothing_ran(tmp_path, capsys):
    sd, last = _plan(tmp_path, capsys)
    assert GOOD not in last
    assert last.startswith("exit code 0: plan written to ") and "nothing was submitted or run" in last
    assert str(sd.root) in last


def test_status_of_a_planned_sweep(tmp_path, capsys):
    sd, _ = _plan(tmp_path, capsys)
    assert main(["action=status", f"output_dir={sd.root}"]) == 0
    last = _last(capsys)
    assert GOOD not in last and "is planned: nothing submitted yet (9 run(s))" in last, last


def test_status_of_a_cancelled_sweep(tmp_path, capsys):
    sd, _ = _plan(tmp_path, capsys)
    _attempts(sd, ["succeeded", "succeeded", "cancelled", "cancelled"], flags=["cancelled_by_user"])
    assert main(["action=status", f"output_dir={sd.root}"]) == 0
    last = _last(capsys)
    assert GOOD not in last
    assert "is cancelled: 2 of 9 run(s) cancelled" in last, last


def test_status_of_a_done_sweep_names_its_report_exit_code(tmp_path, capsys):
    sd, _ = _plan(tmp_path, capsys)
    _attempts(sd, ["succeeded"] * 9)
    sd.report.mkdir(parents=True)
    (sd.report / "summary.json").write_text(json.dumps({"schema_version": 1, "exit_code": 3}))
    assert main(["action=status", f"output_dir={sd.root}"]) == 0
    assert "is done with exit code 3 (9 run(s))" in _last(capsys)


def test_status_of_a_running_sweep_counts_what_finished(tmp_path, capsys):
    """The states the status table showed (what the scheduler said) decide, not the manifest's older ones."""
    sd, _ = _plan(tmp_path, capsys)
    _attempts(sd, ["succeeded", "succeeded", "failed", "running", "submitted"])
    m = Manifest.load(sd)
    rows = [(n, r, 1, m.latest_attempts()[(n, r)].status) for n, r in m.runs[:5]]
    ended = after_status(sd, 0, rows)
    assert ended.code == 0 and GOOD not in ended.line()
    assert "is running: 3 of 9 run(s) finished, 2 in flight, 4 not submitted yet" in ended.line()


def test_cancel_says_what_it_cancelled(tmp_path, capsys):
    sd, _ = _plan(tmp_path, capsys)
    _attempts(sd, ["succeeded", "running", "submitted"])
    assert main(["action=cancel", f"output_dir={sd.root}"]) == 0
    captured = capsys.readouterr()
    last = captured.err.strip().splitlines()[-1]
    assert GOOD not in last
    assert last == f"exit code 0: cancelled 2 run(s) of sweep {Manifest.load(sd).sweep_id}; nothing more is launched"
    assert main(["action=cancel", f"output_dir={sd.root}"]) == 0  # again: nothing is left to cancel
    assert "nothing cancelled, no run was unfinished" in _last(capsys)


def test_a_detached_submit_says_what_it_queued(tmp_path, capsys):
    sd, _ = _plan(tmp_path, capsys)
    _attempts(sd, ["submitted"] * 9)
    line = after_run(sd, 0).line()
    assert GOOD not in line
    assert line.startswith("exit code 0: detached: 9 run(s) queued in sweep ") and "nothing collected" in line


def test_a_sweep_run_to_its_end_keeps_the_meaning_of_its_code(tmp_path, capsys):
    sd, _ = _plan(tmp_path, capsys)
    _attempts(sd, ["succeeded"] * 9)
    assert after_run(sd, 0).line() == f"exit code 0: {GOOD}"
    assert sweep_state(sd, Manifest.load(sd)).finished == 9
