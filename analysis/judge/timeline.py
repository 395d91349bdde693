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
   the window) was not fatal: it stays a flag.
3. A waiting failure (NCCL watchdog, NCCL error, dispatcher timeout: each reports a peer that did not answer) is
   a consequence of any other failure between ``t - T - window`` and ``t + window``, where ``t`` is when it fired
   and ``T`` its collective timeout (``Timeout(ms)=600000``; the watchdog fires ``T`` after the stuck collective
   began, ProcessGroupNCCL.cpp ``checkTimeout``).
   A task's exit (srun's ``Exited with exit code``, ``DUE TO TASK FAILURE``, a non-zero exit code) is the
   consequence of any other failure, signal or stop printed before it (or stamped within the window): the
   launcher reported that first and then exited (``exit_of:<reason>``).
4. torchrun's ``Root Cause (first observed failure)`` record names a rank: the failures seen on that rank come
   first.
5. Of what is left, the earliest event opens a window of ``window_s`` seconds; class priority
   (:data:`analysis.judge.classify.PRIORITY`) decides only among the failures in that window. Without any time, byte
   order is not used to override priority (ranks' output is buffered independently).
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from analysis.logs import Marker

WINDOW_S = 30.0  # failures within this many seconds of the earliest are one cascade: priority decides among them
DEFAULT_NCCL_TIMEOUT_S = 600.0  # ProcessGroupNCCL's default (and Megatron's distributed_timeout_minutes=10)
STATIC = frozenset({"config_plumbing", "payload_error", "preflight_reject", "dispatcher_fallback", "label_mismatch"})
WAITING = frozenset({"nccl_timeout", "nccl_error", "dispatcher_timeout"})
# consequences by nature: they can never explain a waiting failure (they are the teardown of one)
_ECHOES = frozenset({"task_exit_code", "cancelled", "suspected_hang"})
_SOFT = frozenset({"SIGTERM", "SIGINT", "SIGHUP", "SIGKILL", "SIGABRT", "SIGUSR1", "SIGUSR2"})

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
class Timeline:
    """The causal chain of a run: the ``cause`` event (the primary reason's first event), the ``consequences``
    (every other failure's first event, in time order), the ``window_s`` used, and ``demoted``: reason -> why it
    is not the cause (``outlived`` | ``waiting_for:<reason>`` | ``exit_of:<reason>`` | ``not_root_rank`` |
    ``later``)."""

    cause: Event | None
    consequences: tuple[Event, ...]
    window_s: float
    demoted: dict[str, str]

    def to_json(self) -> dict[str, Any]:
        """summary.json ``runs[].timeline`` (docs/CONTRACTS.md §7)."""
        return {"cause": self.cause.to_json() if self.cause else None,
                "consequences": [e.to_json() for e in self.consequences], "window_s": self.window_s,
                "demoted": dict(self.demoted)}


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
          window_s: float = WINDOW_S, step_s: float = 0.0) -> tuple[list[str], Timeline]:
    """Order ``failures`` (reasons, any order) so that the first is the primary reason (module docstring, rules
    1-5), and the timeline of that order.

    ``events``: reason -> its events (:func:`events_of`); ``details``: reason -> its details (timeouts);
    ``rank_key``: the class priority (lower first); ``last_iteration_time`` / ``_offset``: the last iteration
    line's time and offset; ``root``: torchrun's root-cause record (``rank``, ``local_rank``); ``step_s``: the
    median step (s), which widens the window when steps are long. Never raises; with no failures it returns
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
    cands = [r for r in cands if r not in demoted] or [r for r in live if not demoted.get(r, "").startswith(
        ("waiting_for", "exit_of"))] or live
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
    return ordered, Timeline(cause, consequences, window, demoted)


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
