"""Two-core parsing of one large log file: the second half is scanned by a forked process while this one scans the
first half, then the halves' records are joined (``analysis.parse.parse_files``; issue 17).

The result is the one pass's, field for field (``tests/analysis/test_split.py``), because:
- the cut (:func:`cut_offset`) is the first line start after a chunk boundary near :func:`balanced_cut` (the
  second half holds the marker tail, so it is the shorter one), where the line across the boundary is short: one
  pass reads that line as a region of its own and starts its next region at the cut, so both halves read the
  regions of one pass, chunk-aligned, with the same bytes and offsets;
- the forked scanner starts as after a file's first iteration line (no set-up markers or config there) at the
  cut's stream offset, and reads no ``Step Time`` line, as one pass does there once it has iteration lines that
  all carry their throughput;
- the halves are joined only when both saw only layouts with a throughput field and this half saw the file's
  first iteration line (then no state but the records crosses the cut); otherwise the second half is scanned
  here again, chunk-aligned, as one pass would;
- the second half sends its tail regions (scanned, or to be read again here) and this half's are pushed out of
  the tail by them as in one pass (:class:`analysis.tail.Tail`).

The records come back through a pipe as a small pickled header, then each column's raw bytes, appended one at a
time (no second copy of the half's records). A file is read up to its size when it was opened.
"""

from __future__ import annotations

import os
import pickle
import threading
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from analysis.grammar import Column, _make_layout
from analysis.scanner import Scanner

SPLIT_MIN_BYTES = 8 << 20  # smaller files: one process (a fork and the join cost about 10-20 ms)
JOIN_PIECE = 4 << 20  # the second half's columns are appended in pieces of this many bytes (multiple of 8)
LINE_WINDOW = 64 << 10  # the line across the cut's chunk boundary must end within this many bytes either side


def can_fork() -> bool:
    """True when this process runs one Python thread (a fork copies only the calling thread: a lock another
    thread holds, such as a live display's, would stay held in the child) and 2 CPUs or more are allowed."""
    return threading.active_count() == 1 and cores() >= 2


def cores() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


MARKER_COST = 0.5  # the failure-marker scan of a byte, relative to the rest of its parse (benchmarks/parse.py)


def balanced_cut(size: int, tail_bytes: int, marker_cost: float = MARKER_COST) -> int:
    """Where to cut (bytes) so that both halves take about as long: the last ``tail_bytes`` also get the marker
    scan, so the second half, which holds them, is the shorter one (about 40% of a 100 MB log)."""
    lo, hi = 0, size
    tail_start = max(0, size - tail_bytes)
    while hi - lo > 4096:
        cut = (lo + hi) // 2
        first = cut + marker_cost * max(0, cut - tail_start)
        second = (size - cut) + marker_cost * (size - max(cut, tail_start))
        lo, hi = (cut, hi) if first < second else (lo, cut)
    return lo


def cut_offset(fh: Any, size: int, tail_bytes: int, chunk: int) -> int | None:
    """The cut (a byte offset of ``fh``): for the multiple ``k * chunk`` nearest :func:`balanced_cut` (or the one
    before or after it), ``k * chunk`` itself when a line ends just before it, else the start of the line after
    the one across it. None when that line does not end within ``LINE_WINDOW`` bytes (at most one chunk) either
    side: then the one-pass state at the boundary might hold more than a short partial line."""
    k0 = max(1, round(balanced_cut(size, tail_bytes) / chunk))
    window = min(LINE_WINDOW, chunk)  # within the chunks either side of the boundary
    try:
        for k in (k0, k0 - 1, k0 + 1):
            at = k * chunk
            if not 0 < at < size - 1:
                continue
            fh.seek(at - window)
            before, after = fh.read(window), fh.read(window)
            if before.endswith(b"\n"):
                return at
            i = after.find(b"\n")
            if b"\n" in before and i != -1 and at + i + 1 < size:
                return at + i + 1
        return None
    finally:
        fh.seek(0)


def _header(sc: Scanner) -> tuple[dict[str, Any], list[Any]]:
    """A second-half scanner's results: a header of plain values and the record columns it lists (arrays, or
    :class:`analysis.grammar.Column` made into one array only as it is written)."""
    columns: list[Any] = [sc.it, sc.total, sc.nonfinite_rows]
    layouts = []
    for layout in sc.layouts.values():
        if len(layout.rows):
            layouts.append((layout.raw, layout.rows.runs.tobytes(), len(layout.columns)))
            columns += layout.columns
    header = {
        "ok": not sc._layout_without_tflops and not len(sc.step_tflops_rows), "layouts": layouts,
        "sizes": [8 * len(c) for c in columns], "peak": sc.peak_gb, "memory_lines": sc.memory_lines,
        "damaged": sc.damaged, "step_lines": sc.step_lines, "overlong": sc.overlong, "nul": bool(sc.nul_files),
        "last_off": sc.last_off, "last_ts": sc.last_ts, "tail": sc.tail.detached(),
    }
    return header, columns


def reader(path: str, base: int) -> Callable[[int, int], bytes]:
    """``reread(stream offset, length)`` of ``path``, whose first byte is at stream offset ``base``."""
    def reread(offset: int, length: int) -> bytes:
        with open(path, "rb") as fh:
            fh.seek(offset - base)
            return fh.read(length)
    return reread


def start_second_half(path: str, cut: int, size: int, base: int, tail_bytes: int, chunk: int) -> tuple[int, int]:
    """Fork a process scanning ``path[cut:size]`` (stream offset ``base + cut``) in ``chunk``-aligned reads;
    returns (pid, read end of its pipe). The child writes its results (or a ``None`` header on any error) and
    exits."""
    r, w = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # "multi-threaded, use of fork()": Arrow re-forks its pool
        pid = os.fork()
    if pid:
        os.close(w)
        return pid, r
    os.close(r)
    try:
        with os.fdopen(w, "wb") as out:
            try:
                sc = Scanner(tail_bytes)
                sc.base = base + cut
                sc.begin_file(path, size - cut, reader(path, base))  # its tail holds no bytes either
                sc.in_setup, sc.file_has_iter, sc.after_cut = False, True, True
                with open(path, "rb") as fh:
                    fh.seek(cut)
                    read = cut
                    while read < size and (data := fh.read(min(chunk - read % chunk, size - read))):
                        read += len(data)
                        sc.feed(data)
                sc.end_lines()
                header, columns = _header(sc)
            except BaseException:  # noqa: BLE001  (the parent scans the half itself)
                header, columns = None, []
            pickle.dump(header, out, protocol=pickle.HIGHEST_PROTOCOL)
            for column in columns:
                out.write(memoryview(np.ascontiguousarray(column.take()) if isinstance(column, Column) else column))
    finally:
        os._exit(0)


def collect(pid: int, fd: int) -> tuple[dict[str, Any], Any] | None:
    """The second half's header and its open pipe, for :func:`join` (None, pipe closed, when the child failed)."""
    fh = os.fdopen(fd, "rb")
    try:
        header = pickle.load(fh)
    except (pickle.UnpicklingError, EOFError, ValueError):
        header = None
    if header is None:
        fh.close()
        os.waitpid(pid, 0)
        return None
    return header, (pid, fh)


def discard(half: tuple[dict[str, Any], Any] | None) -> None:
    """Close the pipe of a half that is not joined and reap its process."""
    if half is not None:
        pid, fh = half[1]
        fh.close()
        os.waitpid(pid, 0)


def can_join(sc: Scanner, half: tuple[dict[str, Any], Any] | None) -> bool:
    """True when the halves may be joined (see the module docstring)."""
    return bool(half and half[0]["ok"] and sc.file_has_iter and not sc._layout_without_tflops
                and not len(sc.step_tflops_rows) and sc._fast is not None and not sc.carry and not sc.skip_line)


def _snapshot(sc: Scanner) -> tuple:
    rows = {raw: (len(lay.rows.runs), lay.rows.runs[-1] if len(lay.rows.runs) else 0, lay.rows.n,
                  [len(c) for c in lay.columns]) for raw, lay in sc.layouts.items()}
    return len(sc.it), len(sc.total), len(sc.nonfinite_rows), rows


def _rollback(sc: Scanner, snap: tuple) -> None:
    """Undo a partial :func:`join` (the second half's process died while writing)."""
    n_it, n_total, n_nonfinite, rows = snap
    del sc.it[n_it:], sc.nonfinite_rows[n_nonfinite:]
    sc.total.truncate(n_total)
    for raw in [raw for raw in sc.layouts if raw not in rows]:
        del sc.layouts[raw]
    for raw, (n_runs, last, n, lengths) in rows.items():
        layout = sc.layouts[raw]
        del layout.rows.runs[n_runs:]
        if n_runs:
            layout.rows.runs[-1] = last
        layout.rows.n = n
        for column, length in zip(layout.columns, lengths, strict=True):
            column.truncate(length)


def join(sc: Scanner, half: tuple[dict[str, Any], Any]) -> bool:
    """Append the second half's records and tail regions to ``sc`` (this half's scanner, at the cut), reading its
    columns from the pipe one at a time, then reap its process. False, with ``sc`` as before, when the pipe ends
    early (the process died while writing)."""
    header, (pid, fh) = half
    sizes = iter(header["sizes"])
    snap = _snapshot(sc)

    def read(into: Callable[[bytes], None]) -> None:
        """The next column, appended by ``into`` in pieces of at most JOIN_PIECE bytes (peak memory)."""
        want = next(sizes)
        while want:
            data = fh.read(min(want, JOIN_PIECE))
            if not data:
                raise EOFError(f"the second half's records end {want} bytes early")
            if len(data) % 8:  # (a piece of whole values: the pipe ends inside one only when the writer died)
                data += fh.read(8 - len(data) % 8)
                if len(data) % 8:
                    raise EOFError("the second half's records end inside a value")
            into(data)
            want -= len(data)

    try:
        row = len(sc.it)
        read(sc.it.frombytes)
        read(sc.total.frombytes)
        read(lambda data: sc.nonfinite_rows.frombytes((np.frombuffer(data, np.int64) + row).tobytes()))
        for raw, runs, ncols in header["layouts"]:
            layout = sc.layouts.get(raw)
            if layout is None:
                layout = sc.layouts[raw] = _make_layout(list(raw))
            layout.rows.extend(runs, row)
            for j in range(ncols):
                read(layout.columns[j].frombytes)
    except EOFError:
        _rollback(sc, snap)
        return False
    finally:
        fh.close()
        os.waitpid(pid, 0)
    if header["peak"] is not None and (sc.peak_gb is None or header["peak"] > sc.peak_gb):
        sc.peak_gb = header["peak"]
    sc.memory_lines += header["memory_lines"]
    sc.damaged += header["damaged"]
    sc.step_lines += header["step_lines"]
    sc.overlong += header["overlong"]
    if header["nul"] and sc.file not in sc.nul_files:
        sc.nul_files.append(sc.file)
    if header["last_off"] is not None:
        sc.last_off, sc.last_ts = header["last_off"], header["last_ts"] or sc.last_ts
    sc.tail.extend(header["tail"])
    return True
