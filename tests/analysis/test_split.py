"""Two-core parsing (analysis.split): a large file parsed in two halves at once gives what one pass gives."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from analysis import parse, split
from tests.analysis.synth import SETUP, iteration_line, memory_gb, memory_mb, step_time

NOISE = [
    "[rank3]:[W1129 15:08:09.000 ProcessGroupNCCL.cpp:4561] Warning: an error occurred in a callback, retrying",
    "node01:1234:1290 [2] NCCL INFO Channel 02/0 : 2[2] -> 3[3] via P2P/CUMEM/read",
    "[default1]:    forward-backward ...............................: (5123.00, 5200.00)",
]


def _write(path: Path, n: int, *, tflops: float | None = 3.0, middle: list[str] = (), end: list[str] = ()) -> Path:
    rng = np.random.default_rng(0)
    with open(path, "w") as fh:
        fh.write("\n".join(SETUP) + "\nRuntimeError: set-up failure of a retried step\n")
        for i in range(1, n + 1):
            if i == n // 2:
                fh.write("\n".join(middle) + ("\n" if middle else ""))
            if tflops is None:
                fh.write(step_time(0.5, 2.5) + "\n")
            fh.write(iteration_line(i, n, step_ms=float(rng.normal(500, 5)), tflops=tflops, loss=7 - i / n,
                                    nans=int(i % 997 == 0)) + "\n")
            fh.write("\n".join(NOISE) + "\n")
            if i % 50 == 0:
                fh.write(memory_gb(i, 1.5 + (i % 7) / 10, rank=i % 8) + "\n" + memory_mb(i, 1000.0 + i % 13) + "\n")
        fh.write("\n".join(end) + ("\n" if end else ""))
    return path


def _same(a: parse.ParsedLog, b: parse.ParsedLog) -> None:
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if f.name == "series":
            for g in dataclasses.fields(x):
                u, v = getattr(x, g.name), getattr(y, g.name)
                if isinstance(u, dict):
                    assert u.keys() == v.keys() and all(np.array_equal(u[k], v[k], equal_nan=True) for k in u)
                else:
                    assert np.array_equal(u, v, equal_nan=u.dtype.kind == "f"), g.name
        else:
            assert x == y, f.name


@pytest.fixture
def one_pass(monkeypatch: pytest.MonkeyPatch):
    def run(paths, **kw):
        with monkeypatch.context() as m:
            m.setattr(split, "SPLIT_MIN_BYTES", 1 << 62)
            return parse.parse_files(paths, **kw)
    return run


@pytest.mark.parametrize("case", ["plain", "markers", "damaged", "no_tflops", "restarts"])
def test_two_halves_equal_one_pass(case: str, tmp_path: Path, one_pass, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(split, "SPLIT_MIN_BYTES", 1 << 20)
    monkeypatch.setattr(split, "can_fork", lambda: True)
    kw: dict = {}
    middle = end = []
    if case == "markers":
        middle = ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"] * 3
        end = ["Traceback (most recent call last):", '  File "x.py", line 1, in <module>',
               "RuntimeError: NCCL error: unhandled system error"] * 10
        kw = {"tail_bytes": 3 << 20}
    if case == "damaged":
        middle = [iteration_line(10**6, 10**6)[:-30], iteration_line(10**6 + 1, 10**6).replace("|", "\x00|", 1)]
    paths = [_write(tmp_path / "a_1_0.out", 6000, tflops=None if case == "no_tflops" else 3.0, middle=middle,
                    end=end)]
    if case == "restarts":
        paths.append(_write(tmp_path / "a_1_1.out", 7000))
    assert all(p.stat().st_size > 1 << 20 for p in paths)
    got = parse.parse_files(paths, **kw)
    _same(got, one_pass(paths, **kw))
    assert len(got.series) > 5000
    if case == "markers":
        assert got.marker_counts["traceback"] == 10 and got.marker_counts["exception"] == 1  # the set-up one


def test_the_fork_is_used_and_joined(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(split, "SPLIT_MIN_BYTES", 1 << 20)
    monkeypatch.setattr(split, "can_fork", lambda: True)
    joined = []
    real = split.join
    monkeypatch.setattr(split, "join", lambda *a: joined.append(1) or real(*a))
    path = _write(tmp_path / "a.log", 6000)
    log = parse.parse_files([path])
    assert joined == [1] and len(log.series) == 6000 and log.bytes_read == path.stat().st_size


def test_no_fork_while_another_thread_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    monkeypatch.setattr(split, "SPLIT_MIN_BYTES", 1 << 20)
    monkeypatch.setattr(split, "cores", lambda: 2)
    monkeypatch.setattr(split, "start_second_half", lambda *a: pytest.fail("forked with another thread running"))
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert not split.can_fork()
        assert len(parse.parse_files([_write(tmp_path / "a.log", 3000)]).series) == 3000
    finally:
        stop.set()
        other.join()


def _small_chunks(monkeypatch: pytest.MonkeyPatch, chunk: int = 64 << 10) -> None:
    """Chunks of 64 KiB and a split from 256 KiB, so that files of a few hundred KiB take every path."""
    monkeypatch.setattr(parse, "CHUNK_BYTES", chunk)
    monkeypatch.setattr(split, "SPLIT_MIN_BYTES", 256 << 10)
    monkeypatch.setattr(split, "can_fork", lambda: True)


def _log(path: Path, n: int, *, newline: str = "\n", steps: bool = True, last: str = "", tail: list[str] = (),
         near_end: list[str] = ()) -> Path:
    """A Bridge-style log of ``n`` iterations: Step Time lines (their count must match too), noise, memory
    lines, ``near_end`` lines 100 iterations before the end, then ``tail`` and a last line ``last`` without a
    line end."""
    lines = [*SETUP]
    for i in range(1, n + 1):
        if i == n - 100:
            lines += near_end
        if steps:
            lines.append(step_time(0.5, 2.5))
        lines.append(iteration_line(i, n, step_ms=500.0 + i % 17, loss=7 - i / n))
        lines += NOISE
        if i % 40 == 0:
            lines.append(memory_gb(i, 1.5 + (i % 7) / 10, rank=i % 8))
    lines += tail
    path.write_bytes((newline.join(lines) + newline + last).encode())
    return path


MARKERS = ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
           "Traceback (most recent call last):", '  File "x.py", line 1, in <module>',
           "RuntimeError: NCCL error: unhandled system error"]


@pytest.mark.parametrize("case", ["steps", "truncated_last_line", "cut_iteration_line", "crlf", "markers_near_end",
                                  "markers_at_tail_edge", "markers_every_line", "many_markers",
                                  "no_line_end_at_all"])
def test_split_equals_one_pass_field_for_field(case: str, tmp_path: Path, one_pass, monkeypatch) -> None:
    """The two-core path gives the one pass's ParsedLog, field for field, with chunk-aligned halves: Step Time
    counts, a truncated last line, CRLF line ends, failure markers near the end and around the tail's edge."""
    _small_chunks(monkeypatch)
    kw: dict = {"tail_bytes": 200 << 10}
    if case == "steps":
        path = _log(tmp_path / "a.log", 1500)
    elif case == "truncated_last_line":
        path = _log(tmp_path / "a.log", 1500, last="RuntimeError: CUDA error: an illegal memory acc")
    elif case == "cut_iteration_line":
        path = _log(tmp_path / "a.log", 1500, last=iteration_line(1501, 1500)[:-40])
    elif case == "crlf":
        path = _log(tmp_path / "a.log", 1500, newline="\r\n", tail=MARKERS)
    elif case == "markers_near_end":
        path = _log(tmp_path / "a.log", 1500, near_end=MARKERS, tail=MARKERS * 3)
    elif case == "markers_at_tail_edge":
        # markers every 10 iterations: some fall just before the tail's first region, some just inside it
        path = tmp_path / "a.log"
        lines = [*SETUP]
        for i in range(1, 1501):
            lines += [iteration_line(i, 1500), *NOISE] + (MARKERS[-1:] if i % 10 == 0 else [])
        path.write_text("\n".join(lines) + "\n")
    elif case == "markers_every_line":
        # a marker on every other line: a tail that starts one line off (regions cut elsewhere) changes the count
        path = tmp_path / "a.log"
        lines = [*SETUP]
        for i in range(1, 2501):
            lines += [iteration_line(i, 2500), f"[rank{i % 8}]: RuntimeError: NCCL error {i}"]
        path.write_text("\n".join(lines) + "\n")
    elif case == "many_markers":
        path = _log(tmp_path / "a.log", 1500, near_end=MARKERS * 40, tail=MARKERS * 40)
        kw = {"tail_bytes": 600 << 10}
    else:
        path = tmp_path / "a.log"
        path.write_text("\n".join([*SETUP, *(iteration_line(i, 900) for i in range(1, 900))]) + "\n"
                        + "x" * (300 << 10))  # an over-long last line without a line end
    size = path.stat().st_size
    assert size > 256 << 10
    with open(path, "rb") as fh:
        assert split.cut_offset(fh, size, kw["tail_bytes"], parse.CHUNK_BYTES) is not None or case == "no_line_end_at_all"
    joined = []
    real = split.join
    monkeypatch.setattr(split, "join", lambda *a: joined.append(1) or real(*a))
    got = parse.parse_files([path], **kw)
    want = one_pass([path], **kw)
    _same(got, want)
    assert len(got.series) >= 899
    if case != "no_line_end_at_all":
        assert joined == [1]
    if case == "steps":
        assert got.step_time_lines == want.step_time_lines > 0
    if case in ("markers_near_end", "crlf", "many_markers", "markers_at_tail_edge", "markers_every_line"):
        assert got.markers and got.marker_counts == want.marker_counts


def test_a_half_whose_process_dies_while_writing_is_scanned_here(tmp_path: Path, one_pass, monkeypatch) -> None:
    """When the second half's records end early (its process died while writing), nothing of them is kept and
    this process scans the second half itself: the one pass's result."""
    _small_chunks(monkeypatch)
    real = split._header

    def short(sc):  # the header promises 8 bytes more than the process writes
        header, columns = real(sc)
        header["sizes"][-1] += 8
        return header, columns

    monkeypatch.setattr(split, "_header", short)
    path = _log(tmp_path / "a.log", 1500, tail=MARKERS)
    _same(parse.parse_files([path]), one_pass([path]))


def test_rows_as_runs_give_the_row_numbers() -> None:
    from analysis.grammar import Rows

    rows = Rows()
    for start, count in [(0, 3), (3, 2), (7, 1), (9, 4), (13, 1)]:
        rows.add(start, count)
    other = Rows()
    other.add(0, 2)
    other.add(5, 1)
    rows.extend(other.runs.tobytes(), 20)
    assert rows.numbers().tolist() == [0, 1, 2, 3, 4, 7, 9, 10, 11, 12, 13, 20, 21, 25]
    assert len(rows) == 14 and len(rows.runs) == 2 * 5  # [0,5) [7,8) [9,14) [20,22) [25,26)


def test_column_keeps_every_value_bit_for_bit_and_constant_blocks_cost_no_rows() -> None:
    """grammar.Column: values appended one at a time and in blocks come back in order, bit for bit (-0.0 is not
    0.0, NaN payloads kept); a column of one value comes back as a read-only zero-stride view."""
    from analysis.grammar import Column

    nan2 = np.array([0x7FF8000000000001], np.int64).view(np.float64)[0]
    pieces = [[1.0], np.full(5, 1.0), [1.0, 1.0], np.array([0.0, -0.0]), [-0.0], np.full(3, nan2), [np.nan],
              np.arange(4.0), [7.0], np.full(2, 7.0)]
    column, want = Column(), []
    for piece in pieces:
        if isinstance(piece, np.ndarray):
            column.extend(piece)
        else:
            for value in piece:
                column.append(value)
        want += list(piece)
    got = column.take()
    assert len(got) == len(want) and got.view(np.int64).tolist() == np.array(want).view(np.int64).tolist()
    constant = Column("q")
    constant.append(512)
    constant.extend(np.full(1000, 512, np.int64))
    constant.append(512)
    values = constant.take()
    assert values.strides == (0,) and not values.flags.writeable and values.tolist() == [512] * 1002


def test_the_halves_read_exactly_the_one_pass_regions(tmp_path: Path, one_pass, monkeypatch) -> None:
    """The invariant behind the equality: with a tail as long as the file every region is kept, and the regions
    (stream offset, length) of the two halves are the one pass's, the line across the cut included."""
    from analysis import tail

    _small_chunks(monkeypatch)
    seen: list[list[tuple[int, int]]] = []
    real = tail.Tail.finish

    def finish(self, into):
        seen.append([(r.start, r.length) for r in self.regions])
        real(self, into)

    monkeypatch.setattr(tail.Tail, "finish", finish)
    path = _log(tmp_path / "a.log", 1500, tail=MARKERS)
    joined = []
    real_join = split.join
    monkeypatch.setattr(split, "join", lambda *a: joined.append(1) or real_join(*a))
    _same(parse.parse_files([path], tail_bytes=1 << 30), one_pass([path], tail_bytes=1 << 30))
    assert joined == [1] and len(seen) == 2 and seen[0] == seen[1] and len(seen[0]) > 10
