"""The sweep's lease (experiments/conductor/lease.py): one holder at a time across processes, the holder named to
the loser, a dead holder's lease taken over with a note; and the stop signals deferred around a launch."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from contracts.procfs import process_start
from contracts.sweepdir import SweepDir
from experiments.conductor import signals
from experiments.conductor.lease import LEASE_FILE, Holder, LeaseHeld, acquire, read_holder

REPO = Path(__file__).resolve().parents[2]
HOLD = ("import sys, time; from contracts.sweepdir import SweepDir; from experiments.conductor.lease import acquire;"
        "lease = acquire(SweepDir(sys.argv[1]), 'resume'); print('held', flush=True); time.sleep(60)")


def _holder(folder: Path) -> subprocess.Popen[str]:
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], cwd=REPO, text=True, stdout=subprocess.PIPE,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert p.stdout is not None and p.stdout.readline().strip() == "held"
    return p


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_second_acquirer_exits_2_naming_the_live_holder(tmp_path):
    p = _holder(tmp_path)
    try:
        with pytest.raises(LeaseHeld) as e:
            acquire(SweepDir(tmp_path), "resume")
        msg = str(e.value)
        assert e.value.exit_code == 2
        assert f"pid {p.pid} on {socket.gethostname()} (action=resume, since " in msg and "action=cancel" in msg
        assert read_holder(SweepDir(tmp_path)).pid == p.pid
    finally:
        p.kill()
        p.wait()
    # the OS freed the lock with its holder's death (SIGKILL): the next one takes it, naming the dead holder
    with acquire(SweepDir(tmp_path), "collect") as lease:
        assert lease.note and f"pid {p.pid}" in lease.note and "ended without releasing" in lease.note
        assert read_holder(SweepDir(tmp_path)).action == "collect"
    assert read_holder(SweepDir(tmp_path)) is None  # released: the record is cleared
    with acquire(SweepDir(tmp_path), "run") as lease:
        assert lease.note is None


def test_lock_kept_by_another_process_of_a_dead_holder_is_taken_over(tmp_path):
    # the recorded holder is dead, but a process that got the file descriptor keeps the lock: the file is replaced
    dead = _dead_pid()
    (tmp_path / LEASE_FILE).write_text(json.dumps({"host": socket.gethostname(), "pid": dead, "action": "run",
                                                   "since": "2026-01-01T00:00:00Z", "start": None}))
    keeper = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time; f = open(sys.argv[1], 'a');"
                               "fcntl.flock(f, fcntl.LOCK_EX); print('locked', flush=True); time.sleep(60)",
                               str(tmp_path / LEASE_FILE)], text=True, stdout=subprocess.PIPE)
    try:
        assert keeper.stdout is not None and keeper.stdout.readline().strip() == "locked"
        with acquire(SweepDir(tmp_path), "resume") as lease:
            assert lease.note and f"pid {dead}" in lease.note
            assert read_holder(SweepDir(tmp_path)).pid == os.getpid()
    finally:
        keeper.kill()
        keeper.wait()


def test_a_holder_on_another_host_is_never_presumed_dead(tmp_path):
    h = Holder("elsewhere.example", 1, "run", "2026-01-01T00:00:00Z")
    assert not h.dead()
    me = Holder(socket.gethostname(), os.getpid(), "run", "x", process_start(os.getpid()))
    assert not me.dead()
    assert Holder(socket.gethostname(), os.getpid(), "run", "x", (me.start or 0) + 1).dead()  # a reused pid


def test_unknown_action_is_refused(tmp_path):
    with pytest.raises(ValueError, match="valid: run, resume, collect, cancel"):
        acquire(SweepDir(tmp_path), "status")


def test_a_stop_signal_waits_for_the_end_of_a_launch():
    signals.install()
    try:
        with pytest.raises(signals.Stopped) as e:
            with signals.deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)
                recorded = True  # reached: the signal did not interrupt the block
        assert recorded and e.value.signum == signal.SIGTERM
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(1)
    finally:
        signals.restore()
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
