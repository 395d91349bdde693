"""Where a region's iteration and memory lines are, found with numpy instead of a regex pass: the bulk path's way
to the lines (:meth:`analysis.logs.scanner.Scanner._fast_region`).

Half of the time of ``ITER_N_RE.findall`` (about 0.5 GB/s) is its search for the literal ``iteration``; without it
an iteration-only log of 1 GB parses in about 60% of the time (benchmarks/parse.py). For a region without ``\\r``
(the only case taken):

- every occurrence of ``iteration`` is found from the aligned 32-bit words of the region (each occurrence holds one
  aligned word of ``iter``, ``tera``, ``erat`` or ``rati``) and confirmed by its 9 bytes;
- an occurrence followed by a blank and a blank or digit may be a header ``[ \\t]+(\\d+)[ \\t]*/[ \\t]*(\\d+)[ \\t]*\\|``
  (the iteration branch of ``ITER_N_RE``): :func:`_headers` lets the regex decide one of them and reads every
  header of the same shape at its spans (``N`` and ``M``: at most 18 digits); one followed by ``s)`` may start a
  memory line (:func:`_memory`: the usual ``iterations) memory (GB)`` by its bytes, any other by
  :data:`MEMORY_RE`); the regex fails at any other occurrence;
- per line the first occurrence that may match is the regex's, the rest of the line goes with it; line ends come
  from one ``flatnonzero`` of the region (handed on to the tail's marker scan).

The answer is what ``ITER_N_RE.findall`` gives, or ``None`` (then the caller runs the regex): ``None`` when the
first candidate of a line is undecided (a number over 18 digits, more than 64 header shapes in the region), a
memory candidate comes before another candidate in its line (the memory branch decides whether that one is read),
an iteration line's rest is longer than 65,536 bytes, a memory line's ``iterations)`` is followed by blanks only
(the regex's ``\\s*`` may go on into the next line), or the region does not end with ``\\n``.
``tests/analysis/test_locate.py`` compares with the regex.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analysis.logs.bulk import POOL, indices

HEADER = 40  # bytes after "iteration" in which "[ \t]+N[ \t]*/[ \t]*M[ \t]*|" must end
MAX_REST = 65536  # a longer rest goes to the per-line path (analysis.logs.scanner.Scanner._line)
MAX_DIGITS = 18  # a longer number goes to the per-line path (damage there: int64 holds any 18 digits)
_WORDS = [int(np.frombuffer(b"iteration"[k:k + 4], "<u4")[0]) for k in range(4)]
_HEAD = int(np.frombuffer(b"iteratio", "<u8")[0])
HEADER_RE = re.compile(rb"[ \t]+(\d+)[ \t]*/[ \t]*(\d+)[ \t]*\|")  # ITER_N_RE's iteration branch after "iteration"
_TEN = 10 ** np.arange(19, dtype=np.int64)
_MEMORY_HEAD = np.frombuffer(b" memory (", np.uint8)  # "iterations) memory (GB)": the usual memory line
_TEMPLATES = 64  # header shapes (or refused headers) read in one region; more: the regex reads the region
# the memory branch of ITER_N_RE on lines that start with "iterations)" (joined with "\n"): the blank run stays
# within the line; a line whose "iterations)" has only blanks after it is refused by the second branch
MEMORY_RE = re.compile(rb"iterations\)[ \t\f\v]*(?:memory \(([MG]B)\)([^\n]*)|(\n))")


@dataclass(frozen=True, slots=True)
class Located:
    """The iteration lines (offsets in the buffer): ``at`` of ``iteration``, ``n`` and ``total`` (int64), the
    rest ``[lo, hi)`` after the header's ``|`` up to the ``\\n``; and per unit (b"GB", b"MB") the rests of the
    memory lines that ``ITER_N_RE.findall`` gives, each with its ``\\n`` (``memory``)."""

    at: np.ndarray
    n: np.ndarray
    total: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    memory: dict[bytes, pa.Buffer]
    start: np.ndarray  # where each iteration line starts
    newlines: np.ndarray  # every "\\n" of the region (its marker scan needs them too)


def locate(buf: bytes, pos: int, end: int) -> Located | None:
    """The iteration lines and memory candidates of ``buf[pos:end]`` (complete lines, no ``\\r``), or None when
    the regex must decide (see the module docstring)."""
    size = end - pos
    if size < 16:
        return None
    data = np.frombuffer(buf, np.uint8, size, pos)
    if data[-1] != 10:
        return None
    words = np.frombuffer(buf, "<u4", size // 4, pos)
    hit = (words == _WORDS[0]) | (words == _WORDS[1]) | (words == _WORDS[2]) | (words == _WORDS[3])
    at = np.flatnonzero(hit)
    word = words[at]
    occ = at * 4 - ((word == _WORDS[1]) + 2 * (word == _WORDS[2]) + 3 * (word == _WORDS[3]))
    occ = occ[(occ >= 0) & (occ <= size - 9)]
    if occ.size:
        eight = np.ndarray((size - 7,), "<u8", buf, pos, (1,))  # the 8 bytes at every offset
        occ = occ[(eight[occ] == _HEAD) & (data[occ + 8] == 110)]  # "iteratio" + "n"
    after = data[np.minimum(occ + 9, size - 1)]
    second = data[np.minimum(occ + 10, size - 1)]
    # per occurrence: 0 the regex fails there, 1 an iteration header, 2 a memory candidate, 3 undecided here
    code = np.zeros(occ.size, np.int8)
    code[(after == 115) & (second == 41)] = 2  # "iterations)"
    # followed by a blank, then a blank or a digit: maybe a header (else the regex fails there, as after
    # "per iteration (ms)")
    heads = np.flatnonzero(((after == 32) | (after == 9)) & ((second == 32) | (second == 9) | (second - 48 <= 9)))
    header = np.zeros((3, occ.size), np.int64)  # N, M, where the rest starts (from the occurrence)
    code[heads], header[0, heads], header[1, heads], header[2, heads] = _headers(buf, occ[heads] + pos)
    keep = np.flatnonzero(code)
    occ, code, header = occ[keep], code[keep], header[:, keep]
    ends = np.flatnonzero(data == 10)
    line = np.searchsorted(ends, occ)
    line_end = ends[line]  # the "\n" of each occurrence's line
    # the regex takes, per line, the first occurrence where it matches, and the rest of that line with it
    lead = np.ones(occ.size, bool)
    lead[1:] = line_end[1:] != line_end[:-1]
    if (code[lead] == 3).any():
        return None
    if not lead.all():
        lead_of = np.maximum.accumulate(np.where(lead, np.arange(occ.size), 0))
        if (code[lead_of[~lead]] == 2).any():
            return None  # whether the memory branch matches decides whether a later occurrence is read
    mem = lead & (code == 2)
    memory = _memory(buf, occ[mem] + pos, line_end[mem] + pos) if mem.any() else {}
    if memory is None:
        return None
    it = np.flatnonzero(lead & (code == 1))
    n, total, lo = header[:, it]
    occ, line, line_end = occ[it], line[it], line_end[it]
    lo = occ + lo
    if lo.size and int((line_end - lo).max()) > MAX_REST:
        return None
    start = np.where(line > 0, ends[np.maximum(line - 1, 0)] + 1, 0)
    return Located(occ + pos, n, total, lo + pos, line_end + pos, memory, start + pos, ends + pos)


def _headers(buf: bytes, at: np.ndarray) -> tuple[np.ndarray, ...]:
    """For occurrences of ``iteration`` at ``buf[at]``, each followed by a blank: (code, N, M, where the rest after
    the header's ``|`` starts, counted from the occurrence); code 1 where :data:`HEADER_RE` matches after it, 0
    where it does not, 3 where a number has more than 18 digits (the per-line path decides).

    The regex decides one header, and its bytes up to its ``|``, each digit as ``0``, are then a template: any
    other header with the same bytes there, digits anywhere, matches with the same spans (a blank run and a digit
    run are taken whole), so its numbers are read at those spans. A log prints one or two header
    shapes (Megatron pads the numbers: ``iteration {:8d}/{:8d} |``)."""
    count = at.size
    code = np.zeros(count, np.int8)
    values = np.zeros((2, count), np.int64)
    lo = np.zeros(count, np.int64)
    inside = at + 9 + HEADER <= len(buf)
    window = _windows(buf, np.where(inside, at + 9, 0), HEADER)
    filled = (window != 32) & (window != 9)
    first = filled.argmax(axis=1)  # after the blank run: a digit, or the regex fails (a longer run: the regex)
    todo = ~inside | ~filled.any(axis=1) | (window[np.arange(count), first] - 48 <= 9)
    for _ in range(_TEMPLATES):
        left = np.flatnonzero(todo)
        if not left.size:
            return code, values[0], values[1], lo
        row = int(left[0])
        m = HEADER_RE.match(buf, int(at[row]) + 9)
        if m is None:
            todo[row] = False  # code 0
            continue
        spans = [(s - at[row] - 9, e - at[row] - 9) for s, e in (m.span(1), m.span(2))]
        width = m.end() - int(at[row]) - 9
        if max(e - s for s, e in spans) > MAX_DIGITS:
            code[row], todo[row] = 3, False
            continue
        if width > HEADER or not inside[row]:  # too long for the window: this one header alone
            code[row], lo[row], todo[row] = 1, 9 + width, False
            values[:, row] = int(m.group(1)), int(m.group(2))
            continue
        same = np.flatnonzero(todo & inside & _same(window, row, width))
        code[same], lo[same] = 1, 9 + width
        for k, (s, e) in enumerate(spans):
            digits = window[same, s:e].astype(np.int64) - 48
            values[k, same] = digits @ _TEN[e - s - 1::-1]
        todo[same] = False
    return (code, values[0], values[1], lo) if not todo.any() else (np.full(count, 3, np.int8), *values, lo)


def _memory(buf: bytes, at: np.ndarray, hi: np.ndarray) -> dict[bytes, pa.Buffer] | None:
    """The memory lines' rests per unit (b"GB", b"MB"), each rest with its ``\\n``, of the lines ``buf[at:hi]``
    that start with ``iterations)`` (:data:`MEMORY_RE`); None when a line's ``iterations)`` has only blanks after
    it. The usual ``iterations) memory (GB)`` is recognised by its bytes, other lines by the regex."""
    inside = at + 23 <= hi
    head = _windows(buf, np.where(inside, at + 11, 0), 12)
    plain = inside & (head[:, :9] == _MEMORY_HEAD).all(axis=1) & (head[:, 10] == 66) & (head[:, 11] == 41)
    spans: dict[bytes, list[np.ndarray]] = {}
    usual = np.zeros(at.size, bool)
    for unit, letter in ((b"GB", 71), (b"MB", 77)):  # " memory (" + "G" or "M" + "B)"
        rows = plain & (head[:, 9] == letter)
        spans[unit] = [np.stack([at[rows] + 23, hi[rows] + 1])]
        usual |= rows
    for row in np.flatnonzero(~usual).tolist():
        m = MEMORY_RE.match(buf, int(at[row]), int(hi[row]) + 1)
        if m is not None and m.group(3):
            return None
        if m is not None:
            spans[m.group(1)].append(np.array([[m.start(2)], [m.end(2) + 1]]))
    rests = {}
    for unit, found in spans.items():
        lo, end = np.concatenate(found, axis=1)
        if lo.size:
            order = np.argsort(lo, kind="stable")
            rests[unit] = gather(buf, lo[order], end[order])
    return rests


def _same(window: np.ndarray, row: int, width: int) -> np.ndarray:
    """Per row of ``window``: its first ``width`` bytes are those of row ``row``, but that each digit there may be
    any digit (the rows of one shape)."""
    digit = window[row, :width] - 48 <= 9  # uint8: the bytes below "0" wrap around
    fixed = np.ascontiguousarray(window[:, np.flatnonzero(~digit)])
    same = fixed.view(f"V{fixed.shape[1]}").ravel() == fixed[row].view(f"V{fixed.shape[1]}") if fixed.shape[1] \
        else np.ones(window.shape[0], bool)
    return same & (window[:, np.flatnonzero(digit)] - 48 <= 9).all(axis=1)


def _windows(buf: bytes, starts: np.ndarray, width: int) -> np.ndarray:
    """The ``width`` bytes at each start (zeros for a buffer shorter than that) as one (starts, width) array."""
    if len(buf) < width:
        return np.zeros((starts.size, width), np.uint8)
    return np.ndarray((len(buf) - width + 1, width), np.uint8, buf, 0, (1, 1))[starts]


def gather(buf: bytes, lo: np.ndarray, hi: np.ndarray) -> pa.Buffer:
    """The bytes ``buf[lo[i]:hi[i]]`` (bytes-like ``buf``; ranges in increasing order and not overlapping)
    concatenated into one buffer: one Arrow ``take`` over ``buf``, no Python object per range."""
    offsets = np.empty(2 * lo.size + 2, np.int64)
    offsets[0], offsets[-1] = 0, len(buf)
    offsets[1:-1:2], offsets[2:-1:2] = lo, hi
    source = buf if isinstance(buf, pa.Buffer) else pa.py_buffer(buf)
    pieces = pa.Array.from_buffers(pa.large_binary(), 2 * lo.size + 1, [None, pa.py_buffer(offsets), source])
    taken = pc.take(pieces, indices(np.arange(1, 2 * lo.size, 2)), memory_pool=POOL)
    _, offs, data = taken.buffers()
    bounds = np.frombuffer(offs, np.int64)
    if data is None:
        return pa.py_buffer(b"")
    start = int(bounds[taken.offset])
    return data.slice(start, int(bounds[taken.offset + len(taken)]) - start)
