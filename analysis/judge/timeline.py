"""A causal timeline per run: every finding gets a time and a rank, and the primary reason is the earliest failure
that precedes its consequences.

Times are read from the lines themselves, in this order of trust:

- glog / c10 prefixes ``[E1202 10:28:07.123456 ...]``, ``W1202 15:09:14.162000 3646 file.cpp:183]`` (PyTorch
  c10/util/Logging.cpp and glog print ``<level><month><day> <time>``, without a year: the year is taken from the
  log's dated stamps, else 2000);
- dated stamps: Python logging ``2026-12-02 10:28:07,123``, Megatron ``[2026-12-02 10:28:07]`` (training_log) and
  ``datetime: 2026-12-02 10:28:07`` (print_datetime), Slurm ``CANCELLED AT 2026-12-02T10:28:07``
  (src/slurmd/slurmstepd/req.c), torchrun's failure record ``time : 2026-12-02_10:28:07``
  (torch/distributed/elastic/multiprocessing/errors/__init__.py);
- a line without a stamp inherits the stamp of the nearest stamped line before it (``inherited``); with none
  before it, only its byte offset orders it (``order``).

Times are seconds on the log's own clock (its wall-clock text read as UTC); only differences matter.

Ranks come from the launcher's line prefix: srun ``--label`` (``3: ``), torchrun ``--tee`` (``[default3]:``, the
local rank) and PyTorch's ``[rank3]:`` (the global rank), else a ``[Rank 3]`` / ``Rank 3:`` in the message.

Ordering (:func:`order`):

1. Static reasons (configuration, payload, label problems) are not events: they keep their priority.
2. A failure with its own stamp that training outlived (it is older than the last iteration line by more than
   the window), or whose every line was printed before the first of several iteration lines, was not fatal: it
   stays a flag.
3. A waiting failure (NCCL watchdog, NCCL error, dispatcher timeout: each reports a peer that did not answer) is
   a consequence of any other failure between ``t - T - window`` and ``t + window``, where ``t`` is when it fired
   and ``T`` its collective timeout (``Timeout(ms)=600000``; the watchdog fires ``T`` after the stuck collective
   began, ProcessGroupNCCL.cpp ``checkTimeout``).
   A task's exit (srun's ``Exited with exit code``, ``DUE TO TASK FAILURE``, a non-zero exit code) is the
   consequence of any other failure, signal or stop printed before it (or stamped within the window): the
   launcher reported that first and then exited (``exit_of:<reason>``).
   3b. Pairs known without a priority (:func:`_consequences`): a wrapper whose text names its cause, a resource
   failure and the errors printed after it, a sticky CUDA error after an earlier failure of the same stream, a
   scheduler stop that arrives after its first symptom (read with Slurm's own timeouts).
4. torchrun's ``Root Cause (first observed failure)`` record names a rank: the failures seen on that rank come
   first.
5. Of what is left, the earliest event opens a window of ``window_s`` seconds; class priority
   (:data:`analysis.judge.classify.PRIORITY`) decides only among the failures in that window. Without any time, byte
   order across streams is not used to override priority (ranks' output is buffered independently); within one
   stream it is (rule 3b).

Causes before consequences (:func:`read`, the one call the verdict makes): every finding gets its events, plain
``CANCELLED AT`` lines and received signals are read in their launch context (:mod:`analysis.judge.launch_context`:
an ``scancel``, srun's teardown after a failed task, the pre-limit signal, a stop from outside, an echo of a
failure), the time from the last iteration to whatever ended the run is measured against the hang rule
max(hang_min_s, 5 x median step) (:func:`analysis.options.is_suspected_hang`, CASES C09), then :func:`order`.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from analysis.judge import launch_context as lc
from analysis.judge.records import Finding
from analysis.logs import Marker, ParsedLog
from analysis.options import is_suspected_hang

WINDOW_S = 30.0  # failures within this many seconds of the earliest are one cascade: priority decides among them
DEFAULT_NCCL_TIMEOUT_S = 600.0  # ProcessGroupNCCL's default (and Megatron's distributed_timeout_minutes=10)
STATIC = frozenset({"config_plumbing", "payload_error", "preflight_reject", "dispatcher_fallback", "label_mismatch"})
WAITING = frozenset({"nccl_timeout", "nccl_error", "dispatcher_timeout"})
# consequences by nature: they can never explain a waiting failure (they are the teardown of one)
_ECHOES = frozenset({"task_exit_code", "cancelled", "suspected_hang"})
_SOFT = frozenset({"SIGTERM", "SIGINT", "SIGHUP", "SIGKILL", "SIGABRT", "SIGUSR1", "SIGUSR2"})
# resource failures and what they explain when printed after them (rule 3b)
RESOURCE = frozenset({"cuda_oom", "host_oom"})
AFTER_RESOURCE = frozenset({"cuda_error", "flex_kernel_error", "nvshmem_init", "nccl_error", "nccl_timeout",
                            "dispatcher_timeout", "traceback", "killed_by_signal"})
# CUDA errors are sticky and reported asynchronously: an earlier failure of the same stream explains them
STICKY = frozenset({"cuda_error", "flex_kernel_error"})
# what an NCCL "unhandled cuda error" wraps: the CUDA failure itself (``caused_by: cuda``)
CUDA_CAUSES = ("cuda_oom", "cuda_error", "hardware_failure", "assertion", "flex_kernel_error")
# scheduler stops whose line may come long after their first symptom, and Slurm's own timeouts for that: the
# cluster's (SchedulerInfo, read at collect time by launchers.slurm_timeouts), else the slurm.conf(5) defaults
# (SlurmdTimeout=300 s, KillWait=30 s, a partition's GraceTime=0 s; the soft signal that starts a grace period is
# read as well)
LATE_STOPS = frozenset({"preempted", "node_failure", "slurm_time_limit"})
SLURMD_TIMEOUT_S = 300.0
OUTLIVED_ITERATIONS = 3  # iteration lines after a failure's every line: training outlived it
KILL_WAIT_S = 30.0
GRACE_TIME_S = 0.0

_GLOG = re.compile(r"(?:^|[\[\s:])[IWEF](\d{1,2})(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d+))?[\s\]]")
_DATED = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T_](\d\d):(\d\d):(\d\d)(?:[.,](\d+))?")
_PREFIX_RANK = re.compile(r"^\s*(?:\[(rank|default)(\d+)\]:|(\d+):\s)")
_MSG_RANK = re.compile(r"\[Rank (\d+)\]|\bRank (\d+)\b")


def _seconds(y: int, mo: int, d: int, h: int, mi: int, s: int, frac: str | None) -> float | None:
    if not (1 <= mo <= 12 and 1 <= d <= 31 and h < 24 and mi < 60 and s < 62):
        return None
    try:
        base = calendar.timegm((y, mo, d, h, mi, min(s, 59), 0, 0, 0))
    except (ValueError, OverflowError):
        return None
    return base + (float("0." + frac) if frac else 0.0)


def stamp(text: str, year: int = 2000) -> float | None:
    """The first time stamp of a line, in seconds on the log's clock (see module docstring), or None.

    ``year``: the year a glog stamp (which has none) is placed in. A dated stamp wins over a glog stamp only when
    it comes first on the line."""
    g = _GLOG.search(text)
    d = _DATED.search(text)
    if d is not None and (g is None or d.start() < g.start()):
        return _seconds(int(d.group(1)), int(d.group(2)), int(d.group(3)), int(d.group(4)), int(d.group(5)),
                        int(d.group(6)), d.group(7))
    if g is not None:
        return _seconds(year, int(g.group(1)), int(g.group(2)), int(g.group(3)), int(g.group(4)), int(g.group(5)),
                        g.group(6))
    return None


def iso(t: float | None) -> str | None:
    """A time of :func:`stamp` as ``YYYY-MM-DDTHH:MM:SS.ffffff`` (None stays None)."""
    if t is None:
        return None
    return datetime.fromtimestamp(t, UTC).replace(tzinfo=None).isoformat(timespec="microseconds")


def rank_of(text: str) -> tuple[int | None, str | None]:
    """(rank, kind) of a line: kind ``global`` for ``[rank3]:`` and srun's ``3: `` label, ``local`` for torchrun's
    ``[default3]:``, ``message`` for a ``[Rank 3]`` in the text; (None, None) when the line names none."""
    p = _PREFIX_RANK.match(text)
    if p is not None:
        if p.group(1) == "default":
            return int(p.group(2)), "local"
        return int(p.group(2) or p.group(3)), "global"
    m = _MSG_RANK.search(text)
    if m is not None:
        return int(m.group(1) or m.group(2)), "message"
    return None, None


@dataclass(frozen=True, slots=True)
class Event:
    """One line of one finding: its ``reason``, ``time`` (s on the log's clock, None when unknown), where the time
    came from (``stamp`` | ``inherited`` | ``order``), the ``rank`` and its kind (global | local | message), the
    byte ``offset`` and the ``line``."""

    reason: str
    time: float | None
    source: str
    rank: int | None
    rank_kind: str | None
    offset: int
    line: str

    def to_json(self) -> dict[str, Any]:
        """The summary.json form (docs/CONTRACTS.md §7 ``runs[].timeline``)."""
        return {"reason": self.reason, "rank": self.rank, "time": iso(self.time), "time_source": self.source,
                "offset": self.offset, "line": self.line}


class Clock:
    """Times of the lines of one parsed log: a line's own stamp, else the nearest stamped line before it (the kept
    markers and the first/last iteration lines are the stamped lines known)."""

    def __init__(self, markers: Sequence[Marker], first: tuple[int | None, str | None] = (None, None),
                 last: tuple[int | None, str | None] = (None, None)) -> None:
        self.year = 2000
        for text in [m.text for m in markers] + [t for _, t in (first, last) if t]:
            d = _DATED.search(text)
            if d is not None:
                self.year = int(d.group(1))
                break
        anchors: list[tuple[int, float]] = []
        self.own: dict[int, float] = {}
        for m in markers:
            t = stamp(m.text, self.year)
            if t is not None:
                self.own[m.offset] = t
                anchors.append((m.offset, t))
        for off, text in (first, last):
            if off is not None and text:
                t = stamp(text, self.year)
                if t is not None:
                    anchors.append((off, t))
        self.anchors = sorted(anchors)

    def at(self, offset: int, text: str | None = None) -> tuple[float | None, str]:
        """(time, source) of the line at ``offset`` (``text``: the line, when it is not a kept marker)."""
        if offset in self.own:
            return self.own[offset], "stamp"
        if text is not None and (t := stamp(text, self.year)) is not None:
            return t, "stamp"
        best = None
        for off, t in self.anchors:
            if off > offset:
                break
            best = t
        return (best, "inherited") if best is not None else (None, "order")


def events_of(reason: str, offsets: Sequence[int], fallback_offset: int, fallback_line: str | None,
              by_offset: dict[int, Marker], clock: Clock, rank: int | None = None) -> list[Event]:
    """The events of one finding: one per marker offset it was built from (else its own offset and first
    evidence line), in time order (unknown times last, then byte order). ``rank``: the finding's own rank detail,
    used for lines that name none."""
    out: list[Event] = []
    for off in offsets or [fallback_offset]:
        m = by_offset.get(off)
        line = m.text if m is not None else (fallback_line or "")
        t, source = clock.at(off, None if m is not None else line)
        r, kind = rank_of(line)
        if r is None and rank is not None:
            r, kind = rank, "global"
        out.append(Event(reason, t, source, r, kind, off, line))
    out.sort(key=lambda e: (e.time is None, e.time or 0.0, e.offset))
    return out


@dataclass(frozen=True)
class SlurmTimeouts:
    """The Slurm timeouts (s) that date a late scheduler stop (:func:`_consequences`), each with where it came
    from: ``cluster`` (read from the cluster at collect time) or ``default`` (slurm.conf(5)'s default)."""

    slurmd_timeout_s: float = SLURMD_TIMEOUT_S
    kill_wait_s: float = KILL_WAIT_S
    grace_time_s: float = GRACE_TIME_S
    sources: tuple[tuple[str, str], ...] = (("slurmd_timeout_s", "default"), ("kill_wait_s", "default"),
                                            ("grace_time_s", "default"))

    @classmethod
    def of(cls, *, slurmd_timeout_s: float | None = None, kill_wait_s: float | None = None,
           grace_time_s: float | None = None) -> SlurmTimeouts:
        """The cluster's values where known (not None, >= 0), the slurm.conf(5) defaults for the others."""
        given = {"slurmd_timeout_s": slurmd_timeout_s, "kill_wait_s": kill_wait_s, "grace_time_s": grace_time_s}
        known = {k: float(v) for k, v in given.items() if isinstance(v, int | float) and v >= 0}
        return cls(**known, sources=tuple((k, "cluster" if k in known else "default") for k in given))

    def to_json(self) -> dict[str, Any]:
        """``runs[].timeline.slurm_timeouts`` (docs/CONTRACTS.md §7): key -> ``{"value": s, "source": ...}``."""
        return {k: {"value": getattr(self, k), "source": src} for k, src in self.sources}


@dataclass(frozen=True)
class Timeline:
    """The causal chain of a run: the ``cause`` event (the primary reason's first event), the ``consequences``
    (every other failure's first event, in time order), the ``window_s`` used, and ``demoted``: reason -> why it
    is not the cause (``outlived`` | ``waiting_for:<reason>`` | ``exit_of:<reason>`` | ``not_root_rank`` |
    ``later``)."""

    cause: Event | None
    consequences: tuple[Event, ...]
    window_s: float
    demoted: dict[str, str]
    slurm: SlurmTimeouts | None = None  # the timeouts a late scheduler stop was read with; None without one

    def to_json(self) -> dict[str, Any]:
        """summary.json ``runs[].timeline`` (docs/CONTRACTS.md §7); ``slurm_timeouts`` only when a late stop was read."""
        out = {"cause": self.cause.to_json() if self.cause else None,
               "consequences": [e.to_json() for e in self.consequences], "window_s": self.window_s,
               "demoted": dict(self.demoted)}
        if self.slurm is not None:
            out["slurm_timeouts"] = self.slurm.to_json()
        return out


def _base(reason: str) -> str:
    return reason.split(":", 1)[0]


def _timeout_s(details: dict[str, Any]) -> float | None:
    for key in ("ran_for_ms", "timeout_ms"):
        if isinstance(details.get(key), int):
            return details[key] / 1000.0
    return None


def _matches_rank(e: Event, rank: int | None, local: int | None) -> bool:
    if e.rank is None:
        return False
    if e.rank_kind == "local":
        return local is not None and e.rank == local
    return rank is not None and e.rank == rank


def order(failures: Sequence[str], events: dict[str, list[Event]], details: dict[str, dict[str, Any]],
          rank_key: Callable[[str], int], *, last_iteration_time: float | None = None,
          last_iteration_offset: int | None = None, root: dict[str, Any] | None = None,
          window_s: float = WINDOW_S, step_s: float = 0.0, first_iteration_offset: int | None = None,
          iterations: int = 0, slurm: SlurmTimeouts | None = None) -> tuple[list[str], Timeline]:
    """Order ``failures`` (reasons, any order) so that the first is the primary reason (module docstring, rules
    1-5), and the timeline of that order.

    ``events``: reason -> its events (:func:`events_of`); ``details``: reason -> its details (timeouts);
    ``rank_key``: the class priority (lower first); ``last_iteration_time`` / ``_offset``: the last iteration
    line's time and offset; ``first_iteration_offset`` and ``iterations``: where the first iteration line is and
    how many were logged (every line of a failure printed before the first of at least OUTLIVED_ITERATIONS
    iteration lines was outlived: collectives keep the ranks within a step of each other, so training could not
    run on past a fatal error, and a line appears in the bytes no earlier than it was written); ``root``: torchrun's root-cause record (``rank``, ``local_rank``); ``step_s``: the
    median step (s), which widens the window when steps are long; ``slurm``: the cluster's Slurm timeouts for a
    late scheduler stop (the slurm.conf(5) defaults when None). Never raises; with no failures it returns
    ([], a timeline without a cause).
    """
    by_priority = sorted(dict.fromkeys(failures), key=rank_key)
    if not by_priority:
        return [], Timeline(None, (), window_s, {})
    window = max(window_s, 2 * step_s)
    first = {r: (events.get(r) or [None])[0] for r in by_priority}

    def t(r: str) -> float | None:
        e = first[r]
        return e.time if e is not None else None

    demoted: dict[str, str] = {}
    static = [r for r in by_priority if r in STATIC]
    live = [r for r in by_priority if r not in STATIC]
    if last_iteration_time is not None:
        for r in live:
            e = first[r]
            if (e is not None and e.source == "stamp" and e.time is not None and last_iteration_offset is not None
                    and e.offset < last_iteration_offset and e.time < last_iteration_time - window):
                demoted[r] = "outlived"
    if first_iteration_offset is not None and iterations >= OUTLIVED_ITERATIONS:
        for r in live:
            if events.get(r) and all(e.offset < first_iteration_offset for e in events[r]):
                demoted.setdefault(r, "outlived")
    if not live:
        return static, Timeline(_cause_event(events.get(static[0], []), root), tuple(
            e for e in (first[r] for r in static[1:]) if e is not None), window, demoted)
    cands = [r for r in live if r not in demoted]
    for w in [r for r in cands if _base(r) in WAITING]:
        ew = first[w]
        back = (_timeout_s(details.get(w, {})) or (DEFAULT_NCCL_TIMEOUT_S if w == "nccl_timeout" else 0.0)) + window
        for c in cands:
            ec = first[c]
            if c == w or _base(c) in WAITING or c in _ECHOES or _is_soft(c):
                continue
            if _stamped(ew) and _stamped(ec):
                explained = ew.time - back <= ec.time <= ew.time + window  # type: ignore[union-attr, operator]
            else:
                # without two stamps: a watchdog waited T for a peer, so any other failure explains it, wherever
                # it was printed; an NCCL error or dispatcher timeout only one printed before it
                explained = w == "nccl_timeout" or (ec is not None and ew is not None and ec.offset < ew.offset)
            if explained:
                demoted[w] = f"waiting_for:{c}"
                break
    for x in [r for r in cands if _base(r) == "task_exit_code"]:
        ex = first[x]
        for c in cands:
            ec = first[c]
            if c == x or _base(c) == "task_exit_code" or ec is None or ex is None:
                continue
            if (ec.time <= ex.time + window if _stamped(ec) and ex.time is not None  # type: ignore[operator]
                    else ec.offset < ex.offset):
                demoted[x] = f"exit_of:{c}"
                break
    slurm = slurm or SlurmTimeouts()
    _consequences(cands, first, events, details, demoted, window, slurm)
    cands = [r for r in cands if r not in demoted] or [r for r in live if not demoted.get(r, "").startswith(
        ("waiting_for", "exit_of", "consequence_of", "after_resource", "earlier_in_stream", "stopped_by"))] or live
    if root is not None and (root.get("rank") is not None or root.get("local_rank") is not None):
        on_root = [r for r in cands if any(_matches_rank(e, root.get("rank"), root.get("local_rank"))
                                           for e in events.get(r, ()))]
        if on_root and len(on_root) < len(cands):
            for r in cands:
                if r not in on_root:
                    demoted.setdefault(r, "not_root_rank")
            cands = on_root
    timed = [t(r) for r in cands if t(r) is not None]
    if timed:
        start = min(timed)
        in_window = [r for r in cands if t(r) is None or t(r) <= start + window]
        for r in cands:
            if r not in in_window:
                demoted.setdefault(r, "later")
    else:
        in_window = cands
    primary = min(in_window, key=rank_key)
    rest = [r for r in by_priority if r != primary and r not in static]
    rest.sort(key=lambda r: (t(r) is None, t(r) or 0.0, rank_key(r)))
    ordered = static + [primary] + rest if static else [primary] + rest
    cause_reason = ordered[0]
    cause = _cause_event(events.get(cause_reason, []), root)
    consequences = tuple(e for e in (first[r] for r in ordered[1:]) if e is not None)
    late = slurm if any(r in LATE_STOPS for r in live) else None
    return ordered, Timeline(cause, consequences, window, demoted, late)


def _same_stream(a: Event, b: Event) -> bool:
    """Two lines of one output stream: the same rank prefix of the same kind, or neither names a rank."""
    return a.rank == b.rank and a.rank_kind == b.rank_kind


def _before(a: Event, b: Event, window: float) -> bool:
    """``a`` came first: by their own stamps (``b`` within ``window`` s after ``a``), else by byte order within
    one output stream (one stream's bytes are written in the order they were printed; two streams' are not)."""
    if _stamped(a) and _stamped(b):
        return a.time <= b.time <= a.time + window  # type: ignore[operator]
    return _same_stream(a, b) and a.offset < b.offset


def _consequences(cands: list[str], first: dict[str, Event | None], events: dict[str, list[Event]],
                  details: dict[str, dict[str, Any]], demoted: dict[str, str], window: float,
                  slurm: SlurmTimeouts) -> None:
    """Rule 3b (module docstring): the pairs of cause and consequence that are known without a priority.

    - a wrapper whose own text names its cause (``caused_by``: an NCCL error that says 'out of memory',
      analysis.logs.codes) is that cause's consequence (``consequence_of:<cause>``);
    - a resource failure (CUDA or host out of memory) explains the CUDA, kernel, NCCL and exception errors printed
      after it (``after_resource:<cause>``): the allocation failed, the work that needed it then failed;
    - a CUDA error is sticky (every later CUDA call of the process fails with it, and kernels report
      asynchronously): a failure printed before it in the same stream explains it (``earlier_in_stream:<cause>``);
    - a scheduler stop that arrives late explains what it caused before its own line, read with ``slurm`` (the
      cluster's timeouts, else slurm.conf(5)'s defaults): a preemption explains every failure after the soft signal
      that announced it, and with a GraceTime every failure stamped within GraceTime (+ window) before its line
      (Slurm sends SIGTERM when preempting and kills after GraceTime, so the ``DUE TO PREEMPTION`` line may come
      minutes later); a node failure explains the network failures stamped within SlurmdTimeout (+ window) before
      it (slurmctld declares a node down only after SlurmdTimeout without an answer); a time limit or preemption
      explains the failures printed after its line (the kill's echoes, within KillWait + window: Slurm's KillWait
      between SIGTERM and SIGKILL) (``stopped_by:<stop>``).
    """
    live = [r for r in cands if r not in demoted]
    for r in live:
        want = details.get(r, {}).get("caused_by")
        c = next((x for x in live if x != r and (x == want or want == "cuda" and x in CUDA_CAUSES)), None)
        if c is not None:
            demoted[r] = f"consequence_of:{c}"
    for res in [r for r in live if r in RESOURCE]:
        er = first.get(res)
        for c in live:
            ec = first.get(c)
            if (c in demoted or c == res or c in RESOURCE or _base(c) not in AFTER_RESOURCE or er is None
                    or ec is None):
                continue
            if _before(er, ec, window):
                demoted[c] = f"after_resource:{res}"
    for c in [r for r in live if r not in demoted and _base(r) in STICKY]:
        ec = first.get(c)
        for r in live:
            er = first.get(r)
            if (r == c or r in demoted or er is None or ec is None or _base(r) in STICKY | WAITING or r in _ECHOES
                    or _is_soft(r) or _stamped(er) and _stamped(ec)):
                continue
            if _same_stream(er, ec) and er.offset < ec.offset:
                demoted[c] = f"earlier_in_stream:{r}"
                break
    soft = [e for k, es in events.items() if _is_soft(k) and k.partition(":")[2] in ("SIGTERM", "SIGCONT")
            for e in es]
    for stop in [r for r in live if r in LATE_STOPS]:
        es = first.get(stop)
        if es is None:
            continue
        for c in live:
            ec = first.get(c)
            if c == stop or c in demoted or c in LATE_STOPS or ec is None or c in _ECHOES or _is_soft(c):
                continue
            both = _stamped(ec) and _stamped(es)
            after_line = (es.time <= ec.time <= es.time + slurm.kill_wait_s + window  # type: ignore[operator]
                          if both else ec.offset > es.offset)
            announced = stop == "preempted" and any(
                (s.time <= ec.time if _stamped(s) and _stamped(ec) else s.offset < ec.offset)  # type: ignore[operator]
                and s.offset < es.offset for s in soft)
            in_grace = (stop == "preempted" and slurm.grace_time_s > 0 and both
                        and es.time - slurm.grace_time_s - window <= ec.time <= es.time)  # type: ignore[operator]
            lost_node = (stop == "node_failure" and _base(c) in WAITING and both
                         and es.time - slurm.slurmd_timeout_s - window <= ec.time <= es.time)  # type: ignore[operator]
            if (stop != "node_failure" and after_line) or announced or in_grace or lost_node:
                demoted[c] = f"stopped_by:{stop}"


def _cause_event(evs: Sequence[Event], root: dict[str, Any] | None) -> Event | None:
    if not evs:
        return None
    if root is not None:
        for e in evs:
            if _matches_rank(e, root.get("rank"), root.get("local_rank")):
                return e
    return evs[0]


def _stamped(e: Event | None) -> bool:
    return e is not None and e.source == "stamp" and e.time is not None


def _is_soft(reason: str) -> bool:
    base, _, sig = reason.partition(":")
    return base == "killed_by_signal" and sig in _SOFT


def precedes(a: Sequence[Event], b: Sequence[Event], window_s: float = WINDOW_S) -> bool:
    """True when the first event of ``a`` comes before (or within ``window_s`` s of) the first of ``b``: by time
    when both are known, else by byte offset."""
    if not a or not b:
        return False
    ea, eb = a[0], b[0]
    if ea.time is not None and eb.time is not None:
        return ea.time <= eb.time + window_s
    return ea.offset <= eb.offset


# ---- causes: findings read in their launch context, before the order
# reasons that end a run from outside: the event a hang is measured to
TERMINAL = ("slurm_time_limit", "cancelled", "preempted", "node_failure", "host_oom", "task_exit_code")
# a scheduler's stop: a TERM or KILL seen with one of these is its consequence
SCHEDULER_KILLS = ("slurm_time_limit", "preempted", "cancelled", "node_failure", "host_oom", "hang_at_exit")
_SIGNAL_EXITS = frozenset({129, 130, 137, 143})  # 128 + SIGHUP/SIGINT/SIGKILL/SIGTERM: a task that was stopped


def clock_of(log: ParsedLog) -> Clock:
    """The log's clock (kept markers and the first/last iteration lines' stamps)."""
    return Clock(log.markers, (log.first_iteration_offset, log.first_timestamp),
                 (log.last_iteration_offset, log.last_timestamp))


def events(log: ParsedLog, found: dict[str, Finding], clock: Clock) -> dict[str, list[Event]]:
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


def _is_failure(reason: str, f: Finding, priority: Callable[[str], bool]) -> bool:
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


def first_failure_before(key: str, found: dict[str, Finding], evs: dict[str, list[Event]],
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


def read_graceful_exit(found: dict[str, Finding], ctx: lc.LaunchContext, log: ParsedLog) -> None:
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
    found[key] = Finding([m.text if m is not None else f"exiting program after receiving {ctx.graceful_exit}"],
                          ctx.graceful_offset, {"signal": ctx.graceful_exit, "graceful_exit": True},
                          [ctx.graceful_offset])


def read_cancels(found: dict[str, Finding], ctx: lc.LaunchContext, evs: dict[str, list[Event]],
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
            found.setdefault("task_exit_code", Finding(f.evidence, f.offset, {"exit_code": None}, f.offsets))
        return flags
    g = found.setdefault(target, Finding([], f.offset, {}, []))
    g.evidence.extend(f.evidence)
    g.offsets.extend(f.offsets)
    g.details.update({"pre_limit_term": True, "cancel_meaning": why})
    flags.append("pre_limit_term")
    return flags


def read_signals(found: dict[str, Finding], ctx: lc.LaunchContext, evs: dict[str, list[Event]],
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


def progress_hang(found: dict[str, Finding], evs: dict[str, list[Event]], clock: Clock, log: ParsedLog, *,
                  median_step_ms: float | None, hang_min_s: float, ended_at: str | None = None,
                  ) -> Finding | None:
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
    f = Finding([line] + ([end.line] if end is not None else []), end.offset if end is not None else after,
                 {"last_iteration_age_s": age, "ended_by": by}, [end.offset] if end is not None else [])
    return f


def hang_event(f: Finding, evs: dict[str, list[Event]]) -> list[Event]:
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


def read(log: ParsedLog, found: dict[str, Finding], ctx: lc.LaunchContext, *, sched: str | None,
         sched_line: str, complete: bool, median_step_ms: float | None, hang_min_s: float, ended_at: str | None,
         launcher_flags: Sequence[str], priority: Callable[[str], bool], rank_key: Callable[[str], Any],
         root: dict[str, Any] | None, slurm: SlurmTimeouts | None = None) -> tuple[list[str], Timeline, list[str]]:
    """The causal reading of one run, in one call: the findings read in their launch context (Megatron's graceful
    signal exit, plain cancels, received signals), the scheduler's time limit, a hang measured to whatever ended
    the run, then :func:`order`. ``found`` is updated in place (reinterpreted findings, ``suspected_hang``).

    ``sched``: the scheduler's word as a manifest status; ``complete``: the log reached the final iteration;
    ``median_step_ms`` (ms) and ``hang_min_s`` (s): the hang rule; ``ended_at``: the scheduler's end time;
    ``launcher_flags``: the launcher's flags on the attempt (``suspected_hang``); ``priority``: whether a base
    reason is a failure class; ``rank_key``: the class priority (lower first); ``root``: torchrun's root-cause record;
    ``slurm``: the cluster's Slurm timeouts for a late stop (:func:`order`).
    Returns (the failures in order, primary first; the timeline; the flags the reading adds). Never raises."""
    clock = clock_of(log)
    read_graceful_exit(found, ctx, log)
    evs = events(log, found, clock)
    flags = read_cancels(found, ctx, evs, sched, priority)
    evs = events(log, found, clock)
    signals = {k: v for k, v in evs.items() if k.startswith("killed_by_signal:")}
    flags += read_signals(found, ctx, evs, sched, complete, priority)
    if sched == "timeout" and "slurm_time_limit" not in found:
        found["slurm_time_limit"] = Finding([sched_line], log.last_iteration_offset or 0)
    evs = {**signals, **events(log, found, clock)}  # a signal read as a stop's echo still dates the stop's start
    hang = None if complete else progress_hang(found, evs, clock, log, median_step_ms=median_step_ms,
                                               hang_min_s=hang_min_s, ended_at=ended_at)
    if hang is not None:
        found["suspected_hang"] = hang
        evs["suspected_hang"] = hang_event(hang, evs)
    if not complete and "suspected_hang" in launcher_flags and "suspected_hang" not in found:
        found["suspected_hang"] = Finding(["the launcher flagged a suspected hang: no new iteration for "
                                            "max(hang_min_s, 5 x median step)"], log.last_iteration_offset or 0)
        evs["suspected_hang"] = []  # the launcher's word has no time: priority places it
    failures, chain = order(
        [r for r in found if priority(r.split(":", 1)[0])], evs, {r: f.details for r, f in found.items()}, rank_key,
        last_iteration_time=stamp(log.last_timestamp or "", clock.year),
        last_iteration_offset=log.last_iteration_offset, root=root, step_s=(median_step_ms or 0) / 1000.0,
        first_iteration_offset=log.first_iteration_offset, iterations=len(log.series), slurm=slurm)
    return failures, chain, flags
