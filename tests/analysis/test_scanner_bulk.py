"""The scanner's bulk path (regions after a file's first iteration line, lines of one known layout converted
together) must give exactly what the per-line path gives, damaged lines included (hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis.logs.parse import ParsedLog, _result
from analysis.logs.scanner import Scanner
from tests.analysis.synth import iteration_line, memory_gb, memory_mb, step_time
from tests.analysis.test_properties import DAMAGE

COLUMNS = ("iteration", "train_iters", "step_ms", "tflops", "lm_loss", "grad_norm", "skipped", "nan_iterations",
           "global_batch_size", "nonfinite")
ODD_VALUES = ("nan", "inf", "-inf", "1e999", "1e305", "12 (avg 11.5)", "1_0", " 7 ", "7\x0c", "", "x", "1:2",
              "99999999999999999999")


class PerLine(Scanner):
    """The same scanner with the bulk conversion refused: every line goes through the per-line path."""

    def _add_lines(self, *args) -> bool:
        return False


def _parse(lines: list[str], cls: type[Scanner] = Scanner, first: int = 1) -> tuple[ParsedLog, Scanner]:
    """Feed ``first`` lines, then the rest: with an intact first line, the rest takes the bulk path. (Compare
    with the same chunking: how Step Time lines pair and the last timestamp depend on region bounds.)"""
    text = [(line + "\n").encode("utf-8", "surrogateescape") for line in lines]
    scanner = cls(1 << 20)
    scanner.feed(b"".join(text[:first]))
    scanner.feed(b"".join(text[first:]))
    scanner.end_file()
    return _result(scanner, ["x"], [], []), scanner


def _same(a: ParsedLog, b: ParsedLog) -> None:
    for name in COLUMNS:
        assert np.array_equal(getattr(a.series, name), getattr(b.series, name), equal_nan=name != "nonfinite"), name
    assert a.series.extra_losses.keys() == b.series.extra_losses.keys()
    for key, column in a.series.extra_losses.items():
        assert np.array_equal(column, b.series.extra_losses[key], equal_nan=True), key
    for attr in ("damaged_lines", "peak_mem_gb", "memory_lines", "step_time_lines", "tflops_source",
                 "last_iteration_offset", "last_timestamp", "first_iteration_offset", "restart_first_iterations"):
        assert getattr(a, attr) == getattr(b, attr), attr


def _line(i: int, data) -> str:
    line = iteration_line(i, 10**6, step_ms=500.0 + i, loss=7.0 - i / 100, extra={"mtp_1 loss": 2.0 + i / 7},
                          ts=data.draw(st.sampled_from(["2026-11-29 15:08:09", None])))
    kind = data.draw(st.sampled_from(["intact"] * 6 + ["cut", "splice", "value", "blank", "key", "huge", "sep",
                                                       "bignum"]))
    if kind == "bignum":  # an iteration number or total beyond int64 (18 digits fit, 19 may not)
        digits = "9" * data.draw(st.integers(18, 21))
        return line.replace(f"{i:8d}/", f"{digits}/") if data.draw(st.booleans()) else line.replace(
            f"/{10**6:8d}", f"/{digits}")
    if kind == "cut":
        return line[:data.draw(st.integers(0, len(line)))]
    if kind == "splice":
        at = data.draw(st.integers(0, len(line)))
        return line[:at] + data.draw(DAMAGE) + line[at:]
    if kind == "value":
        head, sep, tail = line.partition("lm loss:")
        return head + sep + " " + data.draw(st.sampled_from(ODD_VALUES)) + " |" + tail.partition("|")[2]
    if kind == "key":  # the same number of fields, other keys or another order
        return data.draw(st.sampled_from([line.replace("grad norm", "grad nrm"),
                                          line.replace("lm loss", "mtp_1 loss", 1)]))
    if kind == "huge":  # finite values whose sum is not
        head, sep, tail = line.replace("learning rate: 3.000000E-05", "learning rate: 1e308").partition("lm loss:")
        return head + sep + " 1e308 |" + tail.partition("|")[2]
    if kind == "sep":  # a "|" for a ":" (the split gives the same parts)
        return line.replace("lm loss:", "lm loss|")
    if kind == "blank":
        return line + data.draw(st.sampled_from([" ", "\t", "  "]))
    return line


@given(st.data())
def test_bulk_path_equals_per_line_path(data):
    lines = [iteration_line(1, 10**6, extra={"mtp_1 loss": 2.0})]
    for i in range(2, data.draw(st.integers(2, 40))):
        lines.append(_line(i, data))
        other = data.draw(st.sampled_from(["", "gb", "mb", "step", "noise"]))
        if other in ("gb", "mb"):
            line = (memory_gb if other == "gb" else memory_mb)(i, data.draw(st.floats(0, 1e6, allow_nan=False)))
            key = "mem-max-allocated-gigabytes:" if other == "gb" else "| max allocated:"
            lines.append(data.draw(st.sampled_from([
                line, line[:data.draw(st.integers(0, len(line)))], line + " | max allocated: 1e9 |",
                line + " | mem-max-allocated-gigabytes: 1e9 |", line.partition(key)[0] + key + "\n 1e9 |",
                line.replace(" | ", "\x0c|\x0c"), line.replace("iterations) ", "iterations)\n"),
            ])))
        elif other == "step":
            lines.append(step_time(0.5, 3.0))
        elif other == "noise":
            lines.append(data.draw(st.text(max_size=80)))
    bulk, scanner = _parse(lines)
    per_line, _ = _parse(lines, PerLine)
    assert scanner._fast is not None  # the bulk path was tried
    _same(bulk, per_line)
    whole, _ = _parse(lines, first=len(lines))  # one region: ITER_RE and Scanner._memory for memory lines
    assert (bulk.peak_mem_gb, bulk.memory_lines) == (whole.peak_mem_gb, whole.memory_lines)


def test_bulk_path_takes_intact_lines_at_once():
    lines = [iteration_line(i, 100, step_ms=500.0 + i, extra={"load_balancing_loss": 1.0 + i}) for i in range(1, 60)]
    lines += [memory_gb(59, 17.5), memory_mb(59, 20480.0)]
    bulk, _ = _parse(lines)
    per_line, _ = _parse(lines, PerLine)
    _same(bulk, per_line)
    assert bulk.series.step_ms.tolist() == [500.0 + i for i in range(1, 60)]
    assert bulk.series.extra_losses["load_balancing_loss"].tolist() == [1.0 + i for i in range(1, 60)]
    assert bulk.peak_mem_gb == 20.0 and bulk.memory_lines == 2 and bulk.damaged_lines == 0


def _with_loss(line: str, value: str) -> str:
    head, sep, tail = line.partition("lm loss:")
    return head + sep + value + "|" + tail.partition("|")[2]


@pytest.mark.parametrize("mutate", [
    lambda line: _with_loss(line, " 7\x0c "),  # float() takes a form feed, an intact line holds none
    lambda line: line.replace("lm loss:", "lm loss|"),  # the same parts once split, one ':' short
    lambda line: line.replace("grad norm", "grad nrm"),  # the same number of fields, another key
    lambda line: _with_loss(line.replace("learning rate: 3.000000E-05", "learning rate: 1e308"), " 1e308 "),
    lambda line: _with_loss(line, " 6.5 (avg 6.4) "),
    lambda line: line + " ",
])
def test_bulk_path_gives_what_the_line_checks_give(mutate):
    lines = [iteration_line(i, 100, step_ms=500.0 + i) for i in range(1, 9)]
    lines[5] = mutate(lines[5])
    bulk, _ = _parse(lines)
    per_line, _ = _parse(lines, PerLine)
    _same(bulk, per_line)


def test_bulk_path_reads_avg_values_like_the_line_path():
    # Megatron's renamed throughput field (CASES C10) on every line: the bulk path converts it with float, not Arrow
    label = "compute per GPU (TFLOP/s/GPU)"
    lines = [iteration_line(i, 100, tflops=496.0 + i, label=label).replace(
        f"{label}: {496.0 + i:.1f} |", f"{label}: {496.0 + i:.1f} (avg {495.0 + i:.1f}) |") for i in range(1, 30)]
    bulk, scanner = _parse(lines)
    per_line, _ = _parse(lines, PerLine)
    _same(bulk, per_line)
    assert bulk.series.tflops.tolist() == [496.0 + i for i in range(1, 30)] and bulk.damaged_lines == 0
    assert scanner._fast is not None
