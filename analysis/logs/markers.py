"""Failure-marker lines: which log lines are evidence, and what kind each one is.

The parser (``analysis.logs.parse``) finds candidate lines by byte needles (every line that holds a kind's trigger, in one
RE2 pass) and hands each candidate to :func:`marker_kind`; the classifier (``analysis.judge.classify``) turns the kinds into one reason per run.
Every pattern names the log format it comes from (FACTS.md §6, CASES.md C03-C10, real logs in tests/analysis/fixtures).
"""

from __future__ import annotations

import functools
import re
from collections import deque
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import re2

from analysis.logs import catalogue
from analysis.logs.bulk import POOL, indices
from analysis.logs.grammar import MARKERS_KEPT
from analysis.logs.locate import gather
from analysis.logs.records import Marker

ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
PHASE_RE = re.compile(r"\[payload\] phase (\w+) at (\d+(?:\.\d+)?)")
CPP_FRAME_RE = re.compile(r"^(?:\S+:\s*)?(?:frame #\d+: |Exception raised from \S+ at \S+:\d+)")

# a Python exception line: "RuntimeError: ...", "torch.OutOfMemoryError: ...", also a bare "Exception: ..."
_EXCEPTION = r"\b((?:[A-Za-z_][\w.]*)?(?:Error|Exception))\b\s*:"

# Failure signatures live in the catalogue (analysis.logs.signatures): a line that matches an entry gets that entry's
# reason as its kind. These are the structural kinds around them.
# (kind, literal triggers, pattern), most specific first; a line gets the first kind whose pattern matches.
# Triggers are lower-case literals, and every match of a kind's pattern, lower-cased, holds one of its triggers
# (tests/analysis/test_markers.py checks this on strings generated from each pattern). The parser's candidate lines
# are exactly the lines whose lower-cased text holds a trigger, and a pattern runs only on such a line.
_KINDS: tuple[tuple[str, tuple[str, ...], re.Pattern[str]], ...] = (
    # the payload's own diagnosis: "[payload] error <code> <kind>: <cause>" (experiments/payload/errors.py)
    ("payload_error", ("[payload] error",), re.compile(r"\[payload\] error \d+ \w+: ")),
    # the payload's phase stamps: "[payload] phase <name> at <epoch s>" (experiments/payload/phases.py); read by
    # analysis.measure.fixed_cost, never evidence of a failure
    ("payload_phase", ("[payload] phase ",), PHASE_RE),
    # torchrun's ChildFailedError summary table (torch/distributed/elastic/multiprocessing/errors/__init__.py:
    # "Root Cause (first observed failure):", then "  host      : ...", "  rank      : 3 (local_rank: 3)",
    # "  exitcode  : -11 (pid: 4242)", "  error_file: ...", "  traceback : ..."); read by analysis.judge.summaries
    (
        "torchrun_summary",
        ("root cause (first observed failure)", "failures:", "time      :", "host      :", "rank      :",
         "exitcode  :", "error_file:", "traceback :"),
        re.compile(r"Root Cause \(first observed failure\)|^(?:\S+:\s*)?Failures:\s*$"
                   r"|^(?:\S+:\s*)?\s*(?:time      |host      |rank      |exitcode  |error_file|traceback ): "),
    ),
    # the launch context (analysis.judge.launch_context): job-script directives (sbatch(1) ``#SBATCH --signal``,
    # ``--time``), srun's teardown of a step after a task failed (SchedMD/slurm src/srun: ``srun: Terminating
    # StepId=12.0``, ``srun: Force Terminated StepId=``, ``srun: Job step aborted: Waiting up to 32 seconds``) and
    # Megatron's graceful exit on a signal (megatron/training/training.py: ``exiting program after receiving SIGTERM.``)
    (
        "launch_context",
        ("#sbatch", "srun: terminating", "srun: force terminated", "_step_signal: terminating",
         "_step_signal: force terminated", "job step aborted: waiting up to", "exiting program after receiving"),
        re.compile(r"#SBATCH[ \t]+-|srun: (?:launch/slurm: _step_signal: )?(?:Force Terminated|Terminating) "
                   r"(?:StepId=|job step)|Job step aborted: Waiting up to|exiting program after receiving"),
    ),
    # a C++ stack frame or the header of one, as PyTorch's c10::Error prints them (c10/util/Exception.cpp,
    # Backtrace.cpp: "Exception raised from recvBytes at ../torch/csrc/distributed/c10d/Utils.hpp:670 (most recent
    # call first):", then "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f.. in
    # libc10.so)"): context for the error above it, never an exception or a failure line of its own
    ("cpp_frame", ("frame #", "exception raised from "), CPP_FRAME_RE),
    # Bridge/Megatron end-of-training marker (FACTS §6; CASES C08)
    ("training_done", ("[after training is done]",), re.compile(r"\[after training is done\]")),
    ("traceback", ("traceback (most recent call last)",), re.compile(r"Traceback \(most recent call last\)")),
    # any other Python exception line: "RuntimeError: ...", "torch.OutOfMemoryError: ...", "AttributeError: ..."
    ("exception", ("error", "exception"), re.compile(_EXCEPTION)),
    ("frame", ('file "',), re.compile(r'File "[^"]+", line \d+, in ')),
)

_TRIGGERS = sorted({t for _, ts, _ in _KINDS for t in ts} | set(catalogue.TRIGGERS), key=len, reverse=True)
# the kinds whose pattern may match a line: those with a trigger in the lower-cased line (plain substring tests)
_TRIGGER_KINDS: tuple[tuple[str, tuple[int, ...]], ...] = tuple(
    (t, tuple(i for i, (_, ts, _) in enumerate(_KINDS) if t in ts)) for t in _TRIGGERS
)
# literal text that every match of a kind's pattern holds (case-sensitive): the pattern is not run without it
_REQUIRED: dict[str, tuple[str, ...]] = {"exception": ("Error", "Exception")}

# the parser's needles: the triggers that hold no other trigger (a line holding a trigger holds one of these)
NEEDLES: tuple[bytes, ...] = tuple(sorted({
    t.encode() for t in _TRIGGERS if not any(o != t and o in t for o in _TRIGGERS)
}))
# every needle hit, in one RE2 pass: RE2 runs a DFA, where Python's re tries every alternative at almost every byte
# of lower-cased text (7x slower); Latin-1 mode, so that bytes that are not UTF-8 are plain bytes
_RE2_LATIN1 = re2.Options()
_RE2_LATIN1.encoding = re2.Options.Encoding.LATIN1
NEEDLE_RE = re2.compile(b"|".join(re.escape(n) for n in NEEDLES), _RE2_LATIN1)
WINDOW = 2048  # bytes kept either side of a needle in a very long line

EXCEPTION_RE = re.compile(_EXCEPTION + r"\s*(.*)")  # the exception kind's pattern, with the message
TEXT_LIMIT = 400  # characters kept per evidence line


def clean_line(raw: bytes) -> str:
    """Decode a raw log line for display: UTF-8 with replacement, ANSI colour codes removed, stripped."""
    text = raw.decode("utf-8", "replace")
    if "\x1b" in text:
        text = ANSI_RE.sub("", text)
    return text.strip()


def marker_kind(text: str) -> str | None:
    """Return the marker kind of a cleaned line, or None when the line is not failure evidence."""
    low = text.lower()
    if "[payload] error" in low and _KINDS[0][2].search(text):
        return "payload_error"
    if ("frame #" in low or "exception raised from " in low) and CPP_FRAME_RE.search(text):
        return "cpp_frame"  # (before the catalogue: a frame's C++ names are not the error's message)
    if catalogue.TRIGGER_RE.search(low) is not None:
        hit = catalogue.match(text)
        if hit is not None:
            return hit[0].reason
    candidates = {i for t, kinds in _TRIGGER_KINDS if t in low for i in kinds}
    for i in sorted(candidates):
        kind, _, pattern = _KINDS[i]
        required = _REQUIRED.get(kind)
        if required is not None and not any(r in text for r in required):
            continue
        if pattern.search(text):
            return kind
    return None


def _candidate_segments(buf: bytes, pos: int, end: int) -> Iterator[tuple[int, int]]:
    """(start, end) offsets in ``buf`` of the candidate segments of ``buf[pos:end]``, in order: a line (ended by
    ``\\n``) whose ASCII-lower-cased bytes hold a needle is one segment when it is at most 2048 bytes and holds no
    ``\\r``; otherwise each ``\\r``-separated part holding a needle is one, cut to 2048 bytes either side of its
    first needle (a later needle beyond the cut starts another)."""
    low = buf[pos:end].lower()
    covered = 0
    for m in NEEDLE_RE.finditer(low):
        hit = m.start()
        if hit < covered:
            continue
        ls = low.rfind(b"\n", 0, hit) + 1
        le = low.find(b"\n", hit)
        if le == -1:
            le = len(low)
        if le - ls <= WINDOW and low.find(b"\r", ls, le) == -1:
            lo, hi = ls, le  # the usual short line: the whole line, wherever its needles are
        else:
            lo = max(low.rfind(b"\r", ls, hit) + 1, ls, hit - WINDOW)
            hi = low.find(b"\r", hit, le)
            hi = min(le if hi == -1 else hi, hit + WINDOW)
        covered = max(hi, hit + 1)
        yield pos + lo, pos + hi


def scan_markers(buf: bytes, pos: int, end: int) -> Iterator[tuple[int, str, str]]:
    """Failure-marker lines in ``buf[pos:end]``, in order, as (offset of the kept text in ``buf``, text, kind).

    Candidates are the segments of :func:`_candidate_segments` (a line, or each ``\\r`` part or 4 KiB window of a
    long line, whose lower-cased text holds a trigger of :data:`NEEDLES`), cleaned by :func:`clean_line`.
    """
    offsets, which, table = marker_rows(buf, pos, end)
    for lo, i in zip(offsets.tolist(), which.tolist(), strict=True):
        yield lo, *table[i]


def marker_rows(buf: bytes, pos: int, end: int, quiet: tuple[np.ndarray, ...] | None = None,
                ) -> tuple[np.ndarray, np.ndarray, list[tuple[str, str]]]:
    """:func:`scan_markers` as arrays: the offsets (int64, in order), and for each the index of its (text, kind)
    in the table returned, so that a repeated line is one entry (:class:`MarkerBag` keeps only 16
    markers of a kind: the others cost no Python object).

    ``quiet``: (start, lo, newlines): lines of the region (offsets in ``buf``, in order) whose text from ``lo`` to
    the line end holds no needle and begins after a ``|`` (accepted iteration lines with finite values and keys
    that hold no needle: :meth:`analysis.logs.scanner.Scanner._fast_region`), and every ``\\n`` of the region;
    no needle holds ``|``, so when no ``buf[start:lo]`` holds one either, those lines are no markers and are left
    out of the search.

    Speed: a region without ``\\r`` whose lines are at most 2048 bytes (the usual case) has one segment
    per candidate line, the whole line; there Arrow finds the distinct lines (ranks print the same warnings), the
    needles are searched in those only and each distinct candidate is classified once, so a repeated line costs
    no Python call (:func:`_scan_distinct`; about 2.5x faster than a split and a dict).
    """
    if buf.find(b"\r", pos, end) == -1:
        region = memoryview(buf)[pos:end]
        data = np.frombuffer(region, np.uint8)
        starts = (quiet[2] - pos + 1) if quiet is not None else np.flatnonzero(data == 10) + 1
        last = int(starts[-1]) if starts.size else 0  # the text after the last line end: a line of its own
        if (np.diff(starts, prepend=0).max(initial=0) <= WINDOW + 1) and end - pos - last <= WINDOW:
            skip = None if quiet is None or _loud(buf, *quiet[:2]) else quiet[0] - pos
            offsets, which, table = _scan_distinct(buf, pos, region, starts, skip)
            if last < end - pos:
                more = list(_scan_lines(bytes(region[last:]), pos + last))
                offsets = np.concatenate([offsets, np.array([lo for lo, _, _ in more], np.int64)])
                which = np.concatenate([which, np.arange(len(table), len(table) + len(more), dtype=np.int64)])
                table += [(text, kind) for _, text, kind in more]
            return offsets, which, table
    rows = list(_scan_lines(buf[pos:end], pos))
    return (np.array([lo for lo, _, _ in rows], np.int64), np.arange(len(rows), dtype=np.int64),
            [(text, kind) for _, text, kind in rows])


def _scan_lines(region: bytes, pos: int) -> Iterator[tuple[int, str, str]]:
    """:func:`scan_markers` of any region, segment by segment (``region`` at offset ``pos``)."""
    for lo, hi in _candidate_segments(region, 0, len(region)):
        text = clean_line(region[lo:hi])
        kind = marker_kind(text)
        if kind is not None:
            yield pos + lo, text, kind


def _loud(buf: bytes, start: np.ndarray, lo: np.ndarray) -> bool:
    """True when some ``buf[start[i]:lo[i]]`` holds a needle (each one ends with ``|``: no needle spans two)."""
    return start.size > 0 and NEEDLE_RE.search(gather(buf, start, lo).to_pybytes().lower()) is not None


def _scan_distinct(buf: bytes, pos: int, region: memoryview, ends: np.ndarray, skip: np.ndarray | None = None,
                   ) -> tuple[np.ndarray, np.ndarray, list[tuple[str, str]]]:
    """:func:`marker_rows` of the lines of ``region`` (``buf[pos:]``) that end at ``ends`` (offsets after each
    ``\\n``), each at most 2048 bytes without ``\\r``, but the lines that start at ``skip`` (offsets in
    ``region``, in order): classify each distinct line once, then find the offsets of the marker lines."""
    none = (np.zeros(0, np.int64), np.zeros(0, np.int64), [])
    if not ends.size:
        return none
    offsets = np.empty(ends.size + 1, np.int64)
    offsets[0] = 0
    offsets[1:] = ends
    lines = pa.Array.from_buffers(pa.large_binary(), ends.size, [None, pa.py_buffer(offsets), pa.py_buffer(region)])
    offsets = offsets[:-1]  # where each line starts
    if skip is not None and skip.size:
        keep = np.ones(ends.size, bool)
        keep[np.searchsorted(offsets, skip)] = False
        kept = np.flatnonzero(keep)
        lines, offsets = pc.take(lines, indices(kept), memory_pool=POOL), offsets[kept]
    encoded = pc.dictionary_encode(lines, memory_pool=POOL)
    distinct = encoded.dictionary  # each line with its "\n", so the needles never match across two lines
    _, d_offsets, d_data = distinct.buffers()
    bounds = np.frombuffer(d_offsets, np.int64)[distinct.offset: distinct.offset + len(distinct) + 1]
    text_of = memoryview(d_data)
    low = bytes(text_of[bounds[0]: bounds[-1]]).lower()
    d_ends = bounds[1:] - bounds[0]
    found: dict[int, tuple[str, str]] = {}
    covered = 0
    for m in NEEDLE_RE.finditer(low):
        if m.start() < covered:
            continue
        i = int(np.searchsorted(d_ends, m.start(), side="right"))  # the distinct line holding the hit
        covered = int(d_ends[i])
        hit = _classified(bytes(text_of[bounds[i]: bounds[i + 1]]))
        if hit is not None:
            found[i] = hit
    if not found:
        return none
    line_of = encoded.indices.to_numpy()  # each line's distinct line
    keys = np.fromiter(found, np.int64, len(found))
    rows = np.flatnonzero(np.isin(line_of, keys))
    code = np.full(len(distinct), -1, np.int64)
    code[keys] = np.arange(keys.size)
    return offsets[rows] + pos, code[line_of[rows]], list(found.values())


@functools.lru_cache(maxsize=4096)
def _classified(raw: bytes) -> tuple[str, str] | None:
    """(cleaned text, kind) of a candidate line, or None when it is no marker (cached: the same warnings recur in
    every region)."""
    text = clean_line(raw)
    kind = marker_kind(text)
    return None if kind is None else (text, kind)


class MarkerBag:
    """The failure markers kept of a stream: per kind the first and the last ``MARKERS_KEPT`` (8) markers, in the
    order added, and the count of every marker added (``counts``)."""

    __slots__ = ("counts", "kept")

    def __init__(self) -> None:
        self.kept: dict[str, tuple[list[Marker], deque[Marker]]] = {}
        self.counts: dict[str, int] = {}

    def add(self, marker: Marker) -> None:
        """Count ``marker`` and keep it while it is among the first or the last 8 of its kind."""
        self.counts[marker.kind] = self.counts.get(marker.kind, 0) + 1
        first, last = self.kept.setdefault(marker.kind, ([], deque(maxlen=MARKERS_KEPT)))
        if len(first) < MARKERS_KEPT:
            first.append(marker)
        else:
            last.append(marker)

    def scan(self, buf: bytes, pos: int, end: int, base: int, file: str,
             quiet: tuple[np.ndarray, ...] | None = None) -> None:
        """Add the markers of the lines in ``buf[pos:end]`` (``buf[0]`` at stream offset ``base``), as :meth:`add`
        would one by one: per kind, the count, the first to fill the first 8 and the last 8 of the others (a
        Marker is made only for those). ``quiet``: lines that hold no marker (:func:`analysis.logs.markers.marker_rows`)."""
        offsets, which, table = marker_rows(buf, pos, end, quiet)
        if not offsets.size:
            return
        kinds: dict[str, int] = {}
        kind_of = np.array([kinds.setdefault(kind, len(kinds)) for _, kind in table], np.int64)[which]
        for kind, code in kinds.items():
            rows = np.flatnonzero(kind_of == code)
            self.counts[kind] = self.counts.get(kind, 0) + rows.size
            first, last = self.kept.setdefault(kind, ([], deque(maxlen=MARKERS_KEPT)))
            room = MARKERS_KEPT - len(first)
            for into, picked in ((first, rows[:room]), (last, rows[room:][-MARKERS_KEPT:])):
                into.extend(Marker(kind, table[i][0][:TEXT_LIMIT], file, base + lo)
                            for lo, i in zip(offsets[picked].tolist(), which[picked].tolist(), strict=True))

    def markers(self) -> Iterator[Marker]:
        """The kept markers, kind after kind."""
        for first, last in self.kept.values():
            yield from first
            yield from last
