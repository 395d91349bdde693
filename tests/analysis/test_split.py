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
