"""Property tests (hypothesis): random and mutated lines never crash the parser, and a damaged line never yields
a number that differs from the intact line's."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from analysis.logs.parse import parse_iteration_line, parse_lines
from tests.analysis.synth import iteration_line, megatron_lines, memory_gb, memory_mb, step_time, training_log

REAL = [line for line in megatron_lines() if "iteration" in line and "|" in line]
SAMPLES = REAL + [iteration_line(7, 30, extra={"mtp_1 loss": 2.25}),
                  iteration_line(8, 30, tflops=None, label="compute per GPU (TFLOP/s/GPU)")]
FIELDS = ("iteration", "train_iters", "step_ms", "tflops", "lm_loss", "grad_norm", "skipped", "nan_iterations",
          "global_batch_size")
# what another rank's output, a terminal or a broken disk splices into a line: each holds a byte that an intact
# iteration line never holds (bracket, control byte, non-ASCII, newline)
DAMAGE = st.one_of(
    st.builds(lambda r, t: f"[rank{r}]: {t}", st.integers(0, 4095), st.text(max_size=40)),
    st.binary(min_size=1, max_size=12).filter(lambda b: any(c > 127 or c < 32 for c in b))
    .map(lambda b: b.decode("latin-1")),
    st.sampled_from(["\n", "\x00", "\ufffd", "[E218 04:54:22.864467604 ProcessGroupNCCL.cpp:616]", "\n[rank3]: "]),
)


def _values(rec) -> dict[str, float | int | None]:
    return {f: getattr(rec, f) for f in FIELDS} | {f"loss:{k}": v for k, v in rec.losses.items()}


def _consistent(mutated_rec, original_rec) -> bool:
    """Every number the mutated line gives equals the intact line's number for the same field."""
    if mutated_rec is None:
        return True
    got, want = _values(mutated_rec), _values(original_rec)
    for key, value in got.items():
        if value is None:
            continue
        if key not in want or want[key] is None:
            return False
        if not (value == want[key] or (isinstance(value, float) and math.isnan(value) and math.isnan(want[key]))):
            return False
    return True


@given(st.lists(st.binary(max_size=300), max_size=30))
def test_random_bytes_never_crash(lines):
    log = parse_lines(lines)
    assert len(log.series) <= len(lines)


@given(st.lists(st.text(max_size=200), max_size=30))
def test_random_text_never_crash(lines):
    parse_lines(lines)


@given(st.sampled_from(SAMPLES), st.data())
def test_truncated_lines_never_give_a_wrong_number(line, data):
    cut = data.draw(st.integers(0, len(line)))
    assert _consistent(parse_iteration_line(line[:cut]), parse_iteration_line(line))


@given(st.sampled_from(SAMPLES), st.data(), DAMAGE)
def test_spliced_text_never_gives_a_wrong_number(line, data, damage):
    at = data.draw(st.integers(0, len(line)))
    mutated = line[:at] + damage + line[at:]
    original = parse_iteration_line(line)
    for piece in mutated.split("\n"):
        assert _consistent(parse_iteration_line(piece), original)


@given(st.sampled_from(SAMPLES), st.data(), st.sampled_from(["\x00", "\x1f", "é", "[", "]", "\x7f", "\ufffd"]))
def test_replaced_byte_never_gives_a_wrong_number(line, data, char):
    at = data.draw(st.integers(0, len(line) - 1))
    mutated = line[:at] + char + line[at + 1:]
    assert _consistent(parse_iteration_line(mutated), parse_iteration_line(line))


@given(st.data())
def test_damaged_memory_and_step_lines_never_give_a_wrong_number(data):
    line = data.draw(st.sampled_from([memory_gb(3, 12.5), memory_mb(3, 5120.0), step_time(0.47, 2.9)]))
    cut = data.draw(st.integers(0, len(line)))
    log = parse_lines([line[:cut]])
    assert log.peak_mem_gb in (None, 12.5, 5.0)
    if len(log.series):
        assert log.series.step_ms[0] == 470.0
        assert np.isnan(log.series.tflops[0]) or log.series.tflops[0] == 2.9


@given(st.lists(st.integers(1, 600), min_size=1, max_size=12), st.integers(0, 30))
def test_any_split_of_a_log_into_pieces_gives_the_same_series(cuts, dropped):
    """The parser is a stream: how the bytes arrive must not matter."""
    from analysis.logs.scanner import Scanner

    text = ("\n".join(training_log(12)) + "\n").encode()
    whole = parse_lines(text.decode().splitlines())
    scanner = Scanner(1 << 20)
    pos = 0
    for c in cuts:
        scanner.feed(text[pos:pos + c])
        pos += c
    scanner.feed(text[pos:])
    scanner.end_file()
    from analysis.logs.parse import _result

    pieces = _result(scanner, ["x"], [], [])
    assert np.array_equal(whole.series.iteration, pieces.series.iteration)
    assert np.array_equal(whole.series.step_ms, pieces.series.step_ms)
    assert whole.marker_counts == pieces.marker_counts


def test_a_tab_spliced_into_a_loss_key_is_damage_not_a_new_loss():
    """Found by hypothesis in CI: 'load_balancing_loss' with a tab spliced in came back as a new loss key."""
    line = (" [2024-04-06 03:02:12] iteration       71/     100 | consumed samples:         9088 | elapsed time per "
            "iteration (ms): 5361.6 | lm loss: 1.818812E+00 | l\toad_balancing_loss: 1.013377E+00 | grad norm: 1.300 |")
    rec = parse_iteration_line(line)
    assert rec is None or all("\t" not in k for k in rec.losses)
