"""The report's plots drawn by forked processes (issue 17): ``python -m analysis.report`` starts a :class:`PlotWorker`
before it imports the parser, so that matplotlib (about 0.5 s of imports) loads on the second core while this
process imports and parses; when the summary is ready the worker draws the plots, the loss curves in a second
forked process beside it, and hands the PNG bytes back (``analysis.plots.all_plots``, the same figures as drawn
in this process).

Protocol, over two pipes per worker (``contracts.frames``: a length and a pickle per message): the parent sends a
Summary (or length 0: exit) and receives ``("ok", {name: png})`` or ``("error", traceback text)``. A worker that
fails, dies or sends something unreadable costs nothing but time: the parent draws the plots itself
(``PlotWorker.plots`` falls back to ``all_plots``), so the files written are the same either way.

A worker is only started where a fork is safe and useful: POSIX ``fork``, one Python thread (a fork copies only
the calling thread; the same rule as ``analysis.split``), and 2 CPUs or more allowed to this process.
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import signal
import threading
import traceback
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from contracts import frames

if TYPE_CHECKING:
    from analysis.results import Summary

__all__ = ["PlotWorker", "can_fork", "collector_paused", "for_plots"]

SECOND = ("loss.png",)  # drawn by the worker's own forked child: the two curve plots cost about the same


class _Columns:
    """The columns of an ``IterationSeries`` that the plots read, so that the worker unpickles numpy arrays and
    never imports the parser (pyarrow, RE2: about 0.2 s; issue 17). A plot that reads another column fails with
    AttributeError in the worker, and the parent draws it itself."""

    NAMES = ("iteration", "step_ms", "lm_loss")

    def __init__(self, series: Any) -> None:
        for name in self.NAMES:
            setattr(self, name, getattr(series, name))

    def __len__(self) -> int:
        return len(self.iteration)


def for_plots(summary: Summary) -> Summary:
    """``summary`` with each run's series cut to :class:`_Columns` (what the worker is sent)."""
    from dataclasses import replace

    return replace(summary, runs=tuple(r if r.series is None else replace(r, series=_Columns(r.series))
                                       for r in summary.runs))


@contextlib.contextmanager
def collector_paused(*, freeze: bool) -> Iterator[None]:
    """No cyclic garbage collections inside the block (imports: their objects live as long as the process, and the
    collections that the allocations trigger only traverse them; about 0.1 CPU-second of a report). After it, with
    ``freeze`` the objects so far are moved out of later collections (``gc.freeze``; only for a process of its own:
    the CLI, not a caller of ``main()``), and the collector is on again if it was on before. The pattern of the
    ``gc.freeze`` documentation for a process that forks: off early, frozen before the fork, on again."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        if was:
            gc.enable()


def can_fork() -> bool:
    """True when ``os.fork`` exists, this process runs one Python thread and it may use 2 CPUs or more."""
    if not hasattr(os, "fork") or threading.active_count() != 1:
        return False
    cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else range(os.cpu_count() or 1)
    return len(cpus) >= 2


def _fork() -> int:
    with warnings.catch_warnings():  # "multi-threaded, use of fork()": Arrow's idle pool threads, which the
        warnings.simplefilter("ignore", DeprecationWarning)  # children never use (they only draw)
        return os.fork()


def _draw(summary: Summary) -> dict[str, bytes]:
    """All plots of ``summary``, the SECOND ones by a forked child when a fork is safe (else here, in order)."""
    from analysis.plots import PLOTS, all_plots

    first = [n for n in PLOTS if n not in SECOND]
    if not can_fork() or all(r.series is None for r in summary.runs):  # no curves: nothing to share out
        return all_plots(summary)
    r, w = os.pipe()
    pid = _fork()
    if pid == 0:  # the worker's child: draw the SECOND plots, send them, exit without Python's teardown
        code = 0
        try:
            os.close(r)
            frames.send(w, ("ok", all_plots(summary, SECOND)))
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    try:
        mine = all_plots(summary, first)
        try:
            kind, theirs = frames.receive(r)
        except (EOFError, pickle.UnpicklingError, ValueError, TypeError):
            kind, theirs = "lost", None
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    if kind != "ok":
        theirs = all_plots(summary, SECOND)
    got = {**mine, **theirs}
    return {n: got[n] for n in PLOTS if n in got}


def _serve(inbox: int, outbox: int) -> None:
    """The worker's loop: import the plotting code, then draw each summary received until a length-0 message."""
    gc.disable()  # no collections while matplotlib's ~1,000 modules load (they live as long as the process)
    import analysis.plots  # noqa: F401  (matplotlib: the import this worker exists for)

    gc.freeze()  # what is loaded now stays out of later collections, also in the child that draws the loss curves
    gc.enable()
    while (summary := frames.receive(inbox)) is not None:
        try:
            reply = ("ok", _draw(summary))
        except Exception:
            reply = ("error", traceback.format_exc())
        frames.send(outbox, reply)


class PlotWorker:
    """A forked process that imports matplotlib at once and draws a report's plots when given its summary.

    ``start()`` returns None where a fork is not safe or not useful (see the module doc); ``plots(summary)``
    returns ``{file name: PNG bytes}`` as ``analysis.plots.all_plots`` does, falling back to drawing here;
    ``close()`` ends the worker (also as a context manager). Times (100 MB log, this 2-core machine): the fork
    1-5 ms; matplotlib's import, 0.5 s, beside the parse; the plots about 0.35 s on two idle cores instead of
    0.45-0.55 s in one process (the second process costs 0.05-0.1 CPU-seconds: its first-use set-up, copied pages).
    """

    def __init__(self, pid: int, inbox: int, outbox: int) -> None:
        self.pid, self._to, self._from = pid, inbox, outbox
        self.fallback_reason: str | None = None  # why the last plots() drew here instead (None: the worker drew)

    @classmethod
    def start(cls) -> PlotWorker | None:
        """Fork the worker now; None (nothing started) where ``can_fork()`` is False."""
        if not can_fork():
            return None
        down_r, down_w = os.pipe()
        up_r, up_w = os.pipe()
        pid = _fork()
        if pid == 0:
            code = 0
            try:
                os.close(down_w)
                os.close(up_r)
                signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C ends the worker with its parent
                _serve(down_r, up_w)
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        os.close(down_r)
        os.close(up_w)
        return cls(pid, down_w, up_r)

    def plots(self, summary: Summary) -> dict[str, bytes]:
        """The summary's plots, drawn by the worker; drawn here if it fails, dies or was closed."""
        if self.pid:
            try:
                frames.send(self._to, for_plots(summary))
                kind, value = frames.receive(self._from)
            except Exception as exc:  # the transport or the worker failed (an unpicklable value, a dead worker)
                kind, value = "lost", f"{type(exc).__name__}: {exc}"
                self.close()
            if kind == "ok":
                self.fallback_reason = None
                return value
            self.fallback_reason = str(value)
        from analysis.plots import all_plots  # matplotlib here only when the worker could not draw

        return all_plots(summary)

    def close(self) -> None:
        """Tell the worker to exit and reap it (a worker that does not read is killed); idempotent."""
        if not self.pid:
            return
        pid, self.pid = self.pid, 0
        try:
            frames.send(self._to, None)
        except OSError:
            pass
        for fd in (self._to, self._from):
            try:
                os.close(fd)
            except OSError:
                pass
        done, _ = os.waitpid(pid, os.WNOHANG)
        if not done:  # still importing, or stuck: it has nothing left to do
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)

    def __enter__(self) -> PlotWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
