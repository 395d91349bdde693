"""analysis.logs.locate: the iteration and memory lines found with numpy are exactly what ``ITER_N_RE.findall`` finds,
or ``None`` (then the scanner runs the regex); hypothesis regions of real-looking, mutated and random lines."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis.logs.grammar import ITER_N_RE
from analysis.logs.locate import HEADER, locate
from analysis.logs.parse import parse_lines
from tests.analysis.synth import iteration_line, memory_gb, memory_mb, step_time
from tests.analysis.test_properties import DAMAGE

NOISE = ["[rank3]: Warning: an error occurred in iteration 5 of the callback", "iteration", "iterations)",
         "iterations) memory", "(after 3 iterations)   ", "x iteration  7 / 9 | a: 1 |", "iteration 5/ |",
         "iteration\t3\t/\t4\t|", "saving checkpoint at iteration     100 to /ckpt", "iterationiteration 1/ 2 |",
         "[Rank 0] (after 10 iterations)\tmemory (MB) | allocated: 1 | max allocated: 2 |", "\x0c\x0b", ""]


def _expected(buf: bytes) -> tuple[list, dict]:
    """What the regex gives: [(N, M, rest)] of the iteration lines, the memory rests per unit (with "\\n")."""
    lines, memory = [], {b"GB": b"", b"MB": b""}
    for unit, mem_rest, n, total, rest in ITER_N_RE.findall(buf):
        if n:
            lines.append((int(n), int(total), rest))
        else:
            memory[unit] += mem_rest + b"\n"
    return lines, memory


def _check(buf: bytes) -> bool:
    """True when locate answered (and then equals the regex), False when it left the region to the regex."""
    found = locate(buf, 0, len(buf))
    if found is None:
        return False
    lines, memory = _expected(buf)
    assert [(int(n), int(t), buf[lo:hi]) for n, t, lo, hi in zip(found.n, found.total, found.lo, found.hi,
                                                                    strict=True)] == lines
    assert all(buf.startswith(b"iteration", at) for at in found.at.tolist())
    assert {u: bytes(found.memory.get(u, b"")) for u in memory} == memory
    return True


def _region(lines: list[str]) -> bytes:
    return "".join(line + "\n" for line in lines).encode("utf-8", "surrogateescape")


def _mutated(i: int, data) -> str:
    line = iteration_line(i, 10**6, step_ms=500.0 + i, ts=data.draw(st.sampled_from(["2026-11-29 15:08:09", None])))
    kind = data.draw(st.sampled_from(["intact"] * 4 + ["splice", "cut", "width", "digits", "noise", "gb", "mb"]))
    if kind == "splice":
        at = data.draw(st.integers(0, len(line)))
        return line[:at] + data.draw(DAMAGE) + line[at:]
    if kind == "cut":
        return line[:data.draw(st.integers(0, len(line)))]
    if kind == "width":  # other padding around the numbers, as another Megatron version prints
        gap = data.draw(st.sampled_from(["", " ", "\t", " " * 30, " " * (HEADER + 5)]))
        return line.replace(f"{i:8d}/", f"{gap}{i}{gap}/{gap}", 1)
    if kind == "digits":
        return line.replace(f"{i:8d}/", f"{'9' * data.draw(st.integers(17, 20))}/", 1)
    if kind == "noise":
        return data.draw(st.one_of(st.sampled_from(NOISE), st.text(max_size=60)))
    if kind == "gb":
        return memory_gb(i, 1.5).replace(" memory ", data.draw(st.sampled_from([" memory ", "  memory ", "memory "])))
    return memory_mb(i, 1000.0)


@given(st.data())
def test_locate_equals_the_regex(data):
    lines = [_mutated(i, data) for i in range(1, data.draw(st.integers(1, 30)))]
    if data.draw(st.booleans()):
        lines.append(step_time(0.5, 3.0))
    _check(_region(lines))


def test_locate_answers_for_a_typical_region():
    lines = []
    for i in range(1, 400):
        lines += [iteration_line(i, 10**6, step_ms=500.0 + i), memory_gb(i, 1.5 + i / 1000), step_time(0.5, 2.0),
                  "[rank3]: Warning: no iterations) here", "iteration of nothing"]
    lines.append(memory_mb(400, 2048.0))
    buf = _region(lines)
    assert _check(buf)
    found = locate(buf, 0, len(buf))
    assert found.n.tolist() == list(range(1, 400)) and found.total.tolist() == [10**6] * 399


@pytest.mark.parametrize("region,answers", [
    (b"iteration 5/ 10 | a: 1 |", False),  # no "\n" at the end
    (b"(after 3 iterations)  \n memory (MB) | max allocated: 2 |\n", False),  # "\s*" goes on into the next line
    (b"iteration 1234567890123456789/ 10 | a: 1 |\n", False),  # 19 digits: the per-line path decides
    (b"iteration " + b" " * HEADER + b"5/ 10 | a: 1 |\n", True),  # longer than the window: the regex alone
    (b"iteration 5 of 10 | iteration 6/ 10 | a: 1 |\n", True),  # the second occurrence matches
    (b"iterations) memory (GB) | iteration 6/ 10 | a: 1 |\n", False),  # the memory branch decides
])
def test_locate_leaves_undecided_regions_to_the_regex(region: bytes, answers: bool):
    assert _check(region) is answers


def test_scanner_with_locate_equals_the_regex_path(monkeypatch: pytest.MonkeyPatch):
    lines = [iteration_line(i, 100, step_ms=500.0 + i) for i in range(1, 300)]
    lines[150:150] = [memory_gb(150, 2.5), "iteration  151 of nothing", memory_mb(150, 4096.0)]
    with_locate = parse_lines(lines)
    monkeypatch.setattr("analysis.logs.scanner.locate", lambda *a: None)
    regex = parse_lines(lines)
    for name in ("iteration", "train_iters", "step_ms", "lm_loss", "grad_norm", "nonfinite"):
        assert np.array_equal(getattr(with_locate.series, name), getattr(regex.series, name), equal_nan=True), name
    assert (with_locate.peak_mem_gb, with_locate.memory_lines, with_locate.last_iteration_offset) == (
        regex.peak_mem_gb, regex.memory_lines, regex.last_iteration_offset)
    assert with_locate.peak_mem_gb == 4.0 and with_locate.memory_lines == 2
