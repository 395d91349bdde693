"""Two-core parsing of one large log file: the second half is scanned by a forked process while this one scans the
first half, then the halves' records are joined (``analysis.parse.parse_files``; issue 17).

The file is cut at the first line end after :func:`balanced_cut` (the second half holds the marker tail). The forked scanner starts as after a file's first
iteration line (no set-up markers or config there) at the cut's stream offset, so its offsets are the stream's; it
returns its records as bytes. They are joined when both halves saw only layouts with a throughput field (then no
``Step Time`` line is paired with an iteration line, and no state but the records crosses the cut) and this half
saw the file's first iteration line; otherwise the second half is scanned here again, as one process would. Failure
markers are kept from at least the file's last ``tail_bytes`` (whole regions of either half), as in one process.
"""

from __future__ import annotations

import os
import pickle
import threading
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from analysis.grammar import _make_layout
from analysis.scanner import Scanner

SPLIT_MIN_BYTES = 8 << 20  # smaller files: one process (a fork and the join cost about 10-20 ms)


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
    """Where to cut so that both halves take about as long: the last ``tail_bytes`` also get the marker scan,
    so the second half, which holds them, is the shorter one (about 40% of a 100 MB log)."""
    lo, hi = 0, size
    tail_start = max(0, size - tail_bytes)
    while hi - lo > 4096:
        cut = (lo + hi) // 2
        first = cut + marker_cost * max(0, cut - tail_start)
        second = (size - cut) + marker_cost * (size - max(cut, tail_start))
        lo, hi = (cut, hi) if first < second else (lo, cut)
    return lo


def cut_offset(fh: Any, size: int, tail_bytes: int = 0) -> int | None:
    """The offset just after the first ``\\n`` at or after :func:`balanced_cut` (None when there is none)."""
    at = balanced_cut(size, tail_bytes)
    fh.seek(at)
    block = fh.read(1 << 20)
    i = block.find(b"\n")
    fh.seek(0)
    return None if i == -1 else at + i + 1


def _state(sc: Scanner) -> dict[str, Any]:
    """The records of a second-half scanner, as plain bytes and values."""
    return {
        "ok": not sc._layout_without_tflops and not len(sc.step_tflops_rows),
        "it": sc.it.tobytes(), "total": sc.total.tobytes(), "nonfinite": sc.nonfinite_rows.tobytes(),
        "layouts": [(layout.raw, layout.rows.tobytes(), layout.values.tobytes())
                    for layout in sc.layouts.values() if len(layout.rows)],
        "peak": sc.peak_gb, "memory_lines": sc.memory_lines, "kept": sc.kept, "counts": sc.counts,
        "damaged": sc.damaged, "step_lines": sc.step_lines, "overlong": sc.overlong, "nul": bool(sc.nul_files),
        "last_off": sc.last_off, "last_ts": sc.last_ts,
    }


def start_second_half(path: str, cut: int, size: int, base: int, tail_bytes: int, chunk: int) -> tuple[int, int]:
    """Fork a process scanning ``path[cut:size]`` (stream offset ``base + cut``); returns (pid, read end of its
    pipe). The child writes its pickled records (or ``None`` on any error) and exits."""
    r, w = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # "multi-threaded, use of fork()": Arrow re-forks its pool
        pid = os.fork()
    if pid:
        os.close(w)
        return pid, r
    os.close(r)
    try:
        sc = Scanner(tail_bytes)
        sc.base = base + cut
        sc.begin_file(path)
        sc.in_setup, sc.file_has_iter = False, True
        with open(path, "rb") as fh:
            fh.seek(cut)
            left = size - cut
            while left > 0 and (data := fh.read(min(chunk, left))):
                left -= len(data)
                sc.feed(data)
        sc.end_file()
        payload = pickle.dumps(_state(sc), protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException:  # noqa: BLE001  (the parent scans the half itself)
        payload = pickle.dumps(None)
    with os.fdopen(w, "wb") as out:
        out.write(payload)
    os._exit(0)


def collect(pid: int, fd: int) -> dict[str, Any] | None:
    """The second half's records (None when the child failed)."""
    with os.fdopen(fd, "rb") as fh:
        try:
            half = pickle.load(fh)  # straight from the pipe: no copy of the whole payload first
        except (pickle.UnpicklingError, EOFError, ValueError):
            half = None
    os.waitpid(pid, 0)
    return half


def can_join(sc: Scanner, half: dict[str, Any] | None) -> bool:
    """True when the halves may be joined (see the module docstring)."""
    return bool(half and half["ok"] and sc.file_has_iter and not sc._layout_without_tflops
                and not len(sc.step_tflops_rows) and sc._fast is not None)


def trim_tail(sc: Scanner, keep: int) -> None:
    """Keep only the last regions of this half's tail that hold its last ``keep`` bytes."""
    while sc.tail and sc.tail_size - (sc.tail[0][2] - sc.tail[0][1]) >= max(keep, 0):
        old = sc.tail.popleft()
        sc.tail_size -= old[2] - old[1]
    if keep <= 0:
        sc.tail.clear()
        sc.tail_size = 0


def join(sc: Scanner, half: dict[str, Any], keep: Callable[[Any], None]) -> None:
    """Append the second half's records to ``sc`` (this half's, after its ``end_file``)."""
    row = len(sc.it)
    sc.it.frombytes(half["it"])
    sc.total.frombytes(half["total"])
    sc.nonfinite_rows.frombytes((np.frombuffer(half["nonfinite"], np.int64) + row).tobytes())
    half["it"] = half["total"] = half["nonfinite"] = b""  # released as they are joined (peak memory)
    for raw, rows, values in half.pop("layouts"):
        layout = sc.layouts.get(raw)
        if layout is None:
            layout = _make_layout(list(raw))
            sc.layouts[raw] = layout
        layout.rows.frombytes((np.frombuffer(rows, np.int64) + row).tobytes())
        layout.values.frombytes(values)
    if half["peak"] is not None and (sc.peak_gb is None or half["peak"] > sc.peak_gb):
        sc.peak_gb = half["peak"]
    sc.memory_lines += half["memory_lines"]
    for kind, (first, last) in half["kept"].items():
        for marker in (*first, *last):
            keep(marker)
        sc.counts[kind] += half["counts"][kind] - len(first) - len(last)
    sc.damaged += half["damaged"]
    sc.step_lines += half["step_lines"]
    sc.overlong += half["overlong"]
    if half["nul"] and sc.file not in sc.nul_files:
        sc.nul_files.append(sc.file)
    if half["last_off"] is not None:
        sc.last_off, sc.last_ts = half["last_off"], half["last_ts"] or sc.last_ts
