"""Cause before consequence: the glue between the findings (:mod:`analysis.judge.findings`), the timeline
(:mod:`analysis.judge.timeline`), the launch context (:mod:`analysis.judge.launch_context`) and the verdict
(:func:`analysis.judge.classify.classify`).

- :func:`events` gives every finding its events (time, rank, line);
- :func:`read_cancels` turns plain ``CANCELLED AT`` lines into what they mean in their launch context (an
  ``scancel``, srun's teardown after a failed task, the pre-limit signal);
- :func:`read_signals` does the same for the signals a run received (SIGHUP, SIGINT, an echo of a failure, the
  pre-limit TERM, a stop from outside), numeric or named;
- :func:`progress_hang` measures the time from the last iteration to whatever ended the run (a cancel, a kill, a
  signal, the scheduler's end time) against the hang rule max(hang_min_s, 5 x median step)
  (:func:`analysis.options.is_suspected_hang`, CASES C09).
"""

from __future__ import annotations

from collections.abc import Callable

from analysis.judge import launch_context as lc
from analysis.judge.findings import _Finding
from analysis.judge.timeline import Clock, Event, events_of, iso, precedes, stamp
from analysis.logs import ParsedLog
from analysis.options import is_suspected_hang

# reasons that end a run from outside: the event a hang is measured to
TERMINAL = ("slurm_time_limit", "cancelled", "preempted", "node_failure", "host_oom", "task_exit_code")
# a scheduler's stop: a TERM or KILL seen with one of these is its consequence
SCHEDULER_KILLS = ("slurm_time_limit", "preempted", "cancelled", "node_failure", "host_oom", "hang_at_exit")
_SIGNAL_EXITS = frozenset({129, 130, 137, 143})  # 128 + SIGHUP/SIGINT/SIGKILL/SIGTERM: a task that was stopped


def clock_of(log: ParsedLog) -> Clock:
    """The log's clock (kept markers and the first/last iteration lines' stamps)."""
    return Clock(log.markers, (log.first_iteration_offset, log.first_timestamp),
                 (log.last_iteration_offset, log.last_timestamp))


def events(log: ParsedLog, found: dict[str, _Finding], clock: Clock) -> dict[str, list[Event]]:
    """reason -> its events in time order (:func:`analysis.judge.timeline.events_of`), for every finding."""
    by_offset = {m.offset: m for m in log.markers}
    out: dict[str, list[Event]] = {}
    for reason, f in found.items():
        rank = f.details.get("rank") if isinstance(f.details.get("rank"), int) else None
        out[reason] = events_of(reason, f.offsets, f.offset, f.evidence[0] if f.evidence else None, by_offset,
                                clock, rank)
        if "exitcode" in f.details and rank is not None:  # torchrun's record: its rank, not the printing line's
            out[reason] = [Event(e.reason, e.time, e.source, rank, "global", e.offset, e.line) for e in out[reason]]
    return out


def _is_failure(reason: str, f: _Finding, priority: Callable[[str], bool]) -> bool:
    """A failure of a task of its own (not a stop from outside, not a soft signal)."""
    base, _, sig = reason.partition(":")
    if not priority(base) or base in ("cancelled", "slurm_time_limit", "suspected_hang"):
        return False
    if base == "killed_by_signal":
        return sig not in lc.SOFT_SIGNALS and sig not in ("SIGKILL", "SIGABRT")
    if base == "task_exit_code":
        return f.details.get("exit_code") not in _SIGNAL_EXITS
    return True


def _strictly_before(a: list[Event], b: list[Event]) -> bool:
    """The first event of ``a`` was printed before the first of ``b``: by their own stamps when both have one and
    they differ, else by byte offset (an inherited time says nothing about which of two lines came first)."""
    if not a or not b:
        return False
    ea, eb = a[0], b[0]
    if ea.source == eb.source == "stamp" and ea.time is not None and eb.time is not None and ea.time != eb.time:
        return ea.time < eb.time
    return ea.offset < eb.offset


def first_failure_before(key: str, found: dict[str, _Finding], evs: dict[str, list[Event]],
                         priority: Callable[[str], bool]) -> str | None:
    """The failure (another task's error) that precedes the first event of ``key``, or None.

    A task's exit (srun's ``task 0: Exited with exit code 1``, ``DUE TO TASK FAILURE``) explains ``key`` only when
    it was printed before it: a launcher that reported a signal first (torchrun's ``Received 15 death signal`` /
    ``SignalException``, after which it exits 1) and then exited is the signal's consequence, not its cause
    (srun reports a task's exit when the task has ended, src/srun/launch.c ``_task_finish``)."""
    for r, f in found.items():
        if r == key or not _is_failure(r, f, priority):
            continue
        if r.split(":", 1)[0] == "task_exit_code":
            if _strictly_before(evs.get(r, []), evs.get(key, [])):
                return r
        elif precedes(evs.get(r, []), evs.get(key, []), 0.0):
            return r
    return None


def read_graceful_exit(found: dict[str, _Finding], ctx: lc.LaunchContext, log: ParsedLog) -> None:
    """Megatron's graceful exit on a signal (``[exiting program after receiving SIGTERM.]``, module docstring of
    :mod:`analysis.judge.launch_context`) is a received signal of its own when nothing else reported one: it becomes a
    ``killed_by_signal:<SIG>`` finding (``graceful_exit``: True) that :func:`read_signals` then reads in its
    launch context (the pre-limit signal the job asked for, a stop from outside, teardown after training)."""
    if ctx.graceful_exit is None or ctx.graceful_offset is None:
        return
    if any(k.startswith("killed_by_signal:") and k.partition(":")[2] in lc.SOFT_SIGNALS for k in found):
        return
    m = next((x for x in log.markers if x.offset == ctx.graceful_offset), None)
    key = f"killed_by_signal:{ctx.graceful_exit}"
    found[key] = _Finding([m.text if m is not None else f"exiting program after receiving {ctx.graceful_exit}"],
                          ctx.graceful_offset, {"signal": ctx.graceful_exit, "graceful_exit": True},
                          [ctx.graceful_offset])


def read_cancels(found: dict[str, _Finding], ctx: lc.LaunchContext, evs: dict[str, list[Event]],
                 sched: str | None, priority: Callable[[str], bool]) -> list[str]:
    """Reinterpret a plain ``CANCELLED AT`` finding (``cancelled``) in its launch context, in place; the flags it
    adds (``srun_teardown``, ``pre_limit_term``). A scheduler state that names a cancel is left alone."""
    flags: list[str] = []
    f = found.get("cancelled")
    if ctx.teardown:
        flags.append("srun_teardown")
    if f is None or sched == "cancelled" or not ctx.cancels or any(c.due for c in ctx.cancels if c.offset in
                                                                   f.offsets):
        return flags
    before = first_failure_before("cancelled", found, evs, priority)
    target, why = lc.cancel_meaning(ctx, before is not None)
    if target == "cancelled":
        f.details["cancel_meaning"] = why
        return flags
    found.pop("cancelled")
    if target is None:
        if "srun_teardown" not in flags:
            flags.append("srun_teardown")
        if before is None:
            found.setdefault("task_exit_code", _Finding(f.evidence, f.offset, {"exit_code": None}, f.offsets))
        return flags
    g = found.setdefault(target, _Finding([], f.offset, {}, []))
    g.evidence.extend(f.evidence)
    g.offsets.extend(f.offsets)
    g.details.update({"pre_limit_term": True, "cancel_meaning": why})
    flags.append("pre_limit_term")
    return flags


def read_signals(found: dict[str, _Finding], ctx: lc.LaunchContext, evs: dict[str, list[Event]],
                 sched: str | None, complete: bool, priority: Callable[[str], bool]) -> list[str]:
    """Turn each ``killed_by_signal:<SIG>`` finding into what the signal means (:func:`analysis.judge.launch_context.
    signal_meaning`), in place; the flags it adds (``signal:<SIG>`` for a signal that is only a consequence)."""
    flags: list[str] = []
    for key in [k for k in found if k.startswith("killed_by_signal:")]:
        sig = key.partition(":")[2]
        scheduler_kill = any(r in found for r in SCHEDULER_KILLS) or sched in ("cancelled", "timeout")
        echo = first_failure_before(key, found, evs, priority)
        target, why = lc.signal_meaning(sig, ctx, echo_of=echo, complete=complete, scheduler_kill=scheduler_kill)
        if target == key:
            continue
        f = found.pop(key)
        if target is None:
            flags.append(f"signal:{sig}")
            stop = next((r for r in SCHEDULER_KILLS if r in found), None)
            if f.details.get("graceful_exit") and stop is not None:  # the stop's own evidence: Megatron saw it
                found[stop].evidence.extend(e for e in f.evidence if e not in found[stop].evidence)
            continue
        f.details.update({"signal": sig, "inferred_from_signal": True, "signal_meaning": why})
        if target == "slurm_time_limit":
            f.details["pre_limit_term"] = True
        if target in found:
            found[target].offsets.extend(f.offsets)
            found[target].details.setdefault("signal", sig)
        else:
            found[target] = f
        evs[target] = sorted(evs.get(target, []) + evs.get(key, []),
                             key=lambda e: (e.time is None, e.time or 0.0, e.offset))
    return flags


def _parse_time(text: str | None, year: int) -> float | None:
    if not text:
        return None
    return stamp(text, year)


def progress_hang(found: dict[str, _Finding], evs: dict[str, list[Event]], clock: Clock, log: ParsedLog, *,
                  median_step_ms: float | None, hang_min_s: float, ended_at: str | None = None,
                  ) -> _Finding | None:
    """A ``suspected_hang`` finding when whatever ended the run came more than max(hang_min_s, 5 x median step)
    after the last iteration line, else None.

    The end is the earliest event, with a stamp of its own and after the last iteration line, of a reason in
    ``TERMINAL`` or a signal; else ``ended_at`` (the scheduler's end time, ``YYYY-MM-DDTHH:MM:SS``). The last
    iteration's time is its own stamp. Its details: ``last_iteration_age_s`` (s), ``ended_by`` (the reason)."""
    last = _parse_time(log.last_timestamp, clock.year)
    after = log.last_iteration_offset
    if last is None or after is None:
        return None
    ends: list[Event] = []
    for r, es in evs.items():
        if r in found and (r.split(":", 1)[0] in TERMINAL or r.startswith("killed_by_signal:")):
            ends += [e for e in es if e.source == "stamp" and e.time is not None and e.offset > after]
    end = min(ends, key=lambda e: e.time or 0.0) if ends else None
    end_time = end.time if end is not None else _parse_time(ended_at, clock.year)
    if end_time is None:
        return None
    age = end_time - last
    if age < 0 or not is_suspected_hang(age, median_step_ms, hang_min_s):
        return None
    by = end.reason if end is not None else "scheduler_end"
    line = (f"last iteration at {log.last_timestamp}, then no new iteration for {age:.0f} s until {by} at "
            f"{iso(end_time)}")
    f = _Finding([line] + ([end.line] if end is not None else []), end.offset if end is not None else after,
                 {"last_iteration_age_s": age, "ended_by": by}, [end.offset] if end is not None else [])
    return f


def hang_event(f: _Finding, evs: dict[str, list[Event]]) -> list[Event]:
    """The events of a suspected hang: those of the event that ended the run, renamed."""
    by = f.details.get("ended_by")
    return [Event("suspected_hang", e.time, e.source, e.rank, e.rank_kind, e.offset, e.line)
            for e in evs.get(by, [])[:1]] if by in evs else []


def describe(e: Event | None) -> str:
    """``rank 3 at 2026-12-02T10:28:07.123456: <line>`` for the report."""
    if e is None:
        return "-"
    where = f"rank {e.rank}" if e.rank is not None else "rank ?"
    when = iso(e.time) or "time unknown"
    return f"{e.reason} on {where} at {when}" + (" (inherited)" if e.source == "inherited" else "") + f": {e.line}"
