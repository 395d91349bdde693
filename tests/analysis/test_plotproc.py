"""The report's plots drawn by forked processes (analysis/plotproc.py): the same PNG bytes as drawn in this process,
and every way the worker can fail falls back to drawing here."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import threading

import pytest

from analysis import plotproc, plots
from analysis.api import analyze_files
from analysis.plotproc import PlotWorker, can_fork, for_plots
from analysis.plots import all_plots
from tests.analysis.synth import training_log, write_log


@pytest.fixture()
def summary(tmp_path):
    logs = tmp_path / "logs"
    write_log(logs / "base.log", training_log(40, step=lambda i: 500.0 + (i % 7)))
    write_log(logs / "ovl.log", training_log(40, step=lambda i: 450.0 + (i % 5)))
    return analyze_files([logs], baseline="base")


@pytest.fixture(autouse=True)
def two_cpus(monkeypatch):
    """The worker starts on a machine that allows this process one CPU too (CI): the paths are the same."""
    monkeypatch.setattr(plotproc.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)


def test_the_worker_draws_the_same_pngs_in_the_same_order(summary):
    here = all_plots(summary)
    assert list(here) == ["throughput.png", "step_time.png", "loss.png"]
    worker = PlotWorker.start()
    assert worker is not None
    pid = worker.pid
    with worker:
        first = worker.plots(summary)
        assert worker.fallback_reason is None
        again = worker.plots(summary)  # one worker serves every summary of the command
        assert worker.fallback_reason is None
    assert list(first) == list(here) and first == here and again == here
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reaped by close()
    worker.close()  # idempotent


def test_a_killed_worker_is_replaced_by_drawing_here(summary):
    worker = PlotWorker.start()
    assert worker is not None
    os.kill(worker.pid, signal.SIGKILL)
    with worker:
        images = worker.plots(summary)
    assert images == all_plots(summary) and worker.fallback_reason
    assert worker.plots(summary) == images  # closed: drawn here


def test_a_plot_failing_in_the_workers_child_is_drawn_by_the_worker(summary, monkeypatch):
    parent = os.getpid()
    loss = plots.PLOTS["loss.png"]

    def only_here_and_in_the_worker(s):
        if os.getpid() != parent and os.getppid() != parent:  # the worker's own child
            raise RuntimeError("boom in the worker's child")
        return loss(s)

    monkeypatch.setitem(plots.PLOTS, "loss.png", only_here_and_in_the_worker)
    with PlotWorker.start() as worker:
        images = worker.plots(summary)
        assert worker.fallback_reason is None  # the worker drew the loss plot itself
    assert images == all_plots(summary)


def test_a_plot_failing_in_the_worker_is_drawn_here(summary, monkeypatch):
    parent = os.getpid()
    step = plots.PLOTS["step_time.png"]

    def only_here(s):
        if os.getpid() != parent:
            raise RuntimeError("boom in the worker")
        return step(s)

    monkeypatch.setitem(plots.PLOTS, "step_time.png", only_here)
    with PlotWorker.start() as worker:
        images = worker.plots(summary)
        assert "boom in the worker" in worker.fallback_reason
    assert images == all_plots(summary) and "step_time.png" in images


def test_no_worker_where_a_fork_is_unsafe():
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert not can_fork() and PlotWorker.start() is None
    finally:
        stop.set()
        t.join()
    assert can_fork()


def test_the_workers_payload_needs_no_parser(summary, tmp_path):
    light = for_plots(summary)
    assert all(plots.PLOTS[n](light) == png for n, png in all_plots(summary).items())
    path = tmp_path / "payload.pickle"
    path.write_bytes(pickle.dumps(light))
    code = ("import pickle, sys; s = pickle.load(open(sys.argv[1], 'rb')); "
            "print(len(s.runs[0].series), 'analysis.parse' in sys.modules, 'pyarrow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": os.getcwd()}).stdout.split()
    assert out == [str(len(summary.runs[0].series)), "False", "False"]


def test_collector_paused_restores_the_collector():
    import gc

    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    with plotproc.collector_paused(freeze=False):
        assert not gc.isenabled()
    assert gc.isenabled() and gc.get_freeze_count() == frozen  # a caller's main(): nothing frozen
    gc.disable()
    try:
        with plotproc.collector_paused(freeze=False):
            pass
        assert not gc.isenabled()  # off before, off after
    finally:
        gc.enable()
    try:
        with plotproc.collector_paused(freeze=True):
            kept = [[]]  # noqa: F841  (an object made inside the block is frozen after it)
        assert gc.isenabled() and gc.get_freeze_count() > frozen
    finally:
        gc.unfreeze()
