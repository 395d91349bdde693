"""launchers.exitwatch: the pidfd watch wakes on a real child's exit, reports each exit once, and sleeps when empty."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from contracts.procfs import children
from launchers.exitwatch import ExitWatch

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pidfd and /proc children are Linux")


def test_children_finds_the_new_child_and_the_watch_wakes_on_its_exit():
    before = children()
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    try:
        new = children() - before
        assert proc.pid in new
        watch = ExitWatch()
        assert watch.add("job", new) == len(new)
        t0 = time.monotonic()
        assert watch.wait(30.0) is True  # woken by the exit, long before the 30 s timeout
        assert time.monotonic() - t0 < 25.0
        assert proc.poll() is not None or proc.wait(5) is not None  # the process has exited (not reaped by us)
        # the same exit is not reported again: the next wait sleeps its (short) timeout and says so
        assert watch.wait(0.05) is False
        watch.discard("job")
        assert watch.wait(0.0) is False
    finally:
        proc.kill()
        proc.wait()


def test_a_process_that_is_gone_is_not_watched_and_an_empty_watch_sleeps():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    pid = proc.pid
    proc.wait()  # reaped: no pidfd can be opened for it any more
    watch = ExitWatch()
    assert watch.add("gone", {pid}) == 0
    t0 = time.monotonic()
    assert watch.wait(0.05) is False
    assert time.monotonic() - t0 >= 0.04


def test_wait_exit_waits_for_every_process_of_a_key_and_times_out_on_a_live_one():
    quick = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.2)"])
    slow = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        watch = ExitWatch()
        assert watch.add("quick", {quick.pid}) == 1 and watch.add("slow", {slow.pid}) == 1
        t0 = time.monotonic()
        assert watch.wait_exit("quick", 30.0) is True  # back at the exit, not after 30 s
        assert time.monotonic() - t0 < 25.0 and quick.poll() is not None
        t0 = time.monotonic()
        assert watch.wait_exit("slow", 0.2) is False  # still running: the timeout decides
        assert 0.15 <= time.monotonic() - t0 < 10.0
        assert watch.wait_exit("never-added", 5.0) is True  # nothing to wait for
        watch.close()
    finally:
        for proc in (quick, slow):
            proc.kill()
            proc.wait()
