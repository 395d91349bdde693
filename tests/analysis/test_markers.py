"""Failure-marker candidates: the parser's needle pass must find every line that some marker pattern matches."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis.logs.markers import _KINDS, NEEDLES, marker_kind, scan_markers
from analysis.logs.parse import parse_iteration_line, parse_lines
from tests.analysis.synth import iteration_line


@pytest.mark.parametrize("kind,triggers,pattern", _KINDS, ids=[k for k, _, _ in _KINDS])
@given(data=st.data())
def test_every_pattern_match_holds_a_trigger_and_a_needle(kind, triggers, pattern, data):
    text = data.draw(st.from_regex(pattern))
    low = text.lower()
    assert any(t in low for t in triggers), (kind, text)
    assert any(n.decode() in low for n in NEEDLES), (kind, text)


# lines the first needle set (a handful of case-sensitive words) let through unseen
@pytest.mark.parametrize("line,kind", [
    ("Exception: boom", "exception"),
    ("HybridEP: dispatch timed out after 100 s", "dispatcher_timeout"),
    ("found nan in local grad norm", "nan_inf"),
    ("WARNING: Inf detected in grad", "nan_inf"),
    ("slurmstepd: NODE_FAIL", "node_failure"),
    ("Node failure on node01", "node_failure"),
    ("CUDA out of memory. Tried to allocate 2.00 GiB", "cuda_oom"),
])
def test_lines_without_the_old_needles_are_found(line, kind):
    assert marker_kind(line) == kind
    assert [m.kind for m in parse_lines(["iteration", line, "noise"]).markers] == [kind]


def test_candidate_is_the_leftmost_needle_segment_of_a_long_line():
    progress = "x" * 5000
    buf = (progress + "\rRuntimeError: boom\r" + progress + "\n").encode()
    [(lo, text, kind)] = list(scan_markers(buf, 0, len(buf)))
    assert (text, kind) == ("RuntimeError: boom", "exception") and lo == 5001


def test_number_of_nan_iterations_is_not_a_candidate():
    # "nan" alone is in every iteration line ("number of nan iterations"): the nan triggers are whole phrases
    assert not any(n in b"number of nan iterations: 0 |" for n in NEEDLES)


# found by an adversarial review: one candidate per line at its leftmost needle lost later markers
@pytest.mark.parametrize("line,kind", [
    ("loading hybrid model\rRuntimeError: CUDA failure", "exception"),  # "hybrid" is a needle; the marker follows \r
    ("progress: 0 errors\rslurmstepd: error: *** JOB 1 ON n1 CANCELLED AT 2026 DUE TO TIME LIMIT ***",
     "slurm_time_limit"),
    ("cfg: hybrid_x " + "a" * 3000 + " RuntimeError: boom", "exception"),  # beyond the 2048-byte window
])
def test_every_segment_of_a_line_is_a_candidate(line, kind):
    lines = [iteration_line(i, 100) for i in range(1, 6)]
    for log in (parse_lines([line] + lines), parse_lines(lines + [line])):  # set-up region and tail
        assert [m.kind for m in log.markers] == [kind]


@pytest.mark.parametrize("raw,kind,text", [
    (b"slurmstepd: error: *** JOB 1 ON n1 CANCELLED AT 2026 \xff DUE TO TIME LIMIT ***", "slurm_time_limit", None),
    (b"srun: error: n\xe91: task 0: Exited with exit code 1", "task_exit_code", None),
    (b"RuntimeError: caf\xc3 and the rest", "exception", "RuntimeError: caf\ufffd and the rest"),
])
def test_bytes_that_are_not_utf8_do_not_cut_a_candidate(raw, kind, text):
    log = parse_lines([raw, b"x"])
    assert [m.kind for m in log.markers] == [kind]
    assert text is None or log.markers[0].text == text


def test_str_lines_with_lone_surrogates_do_not_raise():
    assert [m.kind for m in parse_lines(["RuntimeError: bad \ud800 x"]).markers] == ["exception"]
    assert parse_iteration_line("iteration 1/1 | elapsed time per iteration (ms): 5 | \udfff") is None


_LINES = st.sampled_from([
    b"[rank3]: RuntimeError: CUDA error: an illegal memory access was encountered",
    b"[rank3]: RuntimeError: CUDA error: an illegal memory access was encountered",  # repeated (ranks)
    b"Traceback (most recent call last):", b'  File "x.py", line 1, in <module>', b"noise without a needle",
    b"NCCL WARN Timeout", b"\xff\xfeerror: not utf-8 \xe2", b"ERROR", b"", b"  ", b"x" * 2047 + b" oom",
    b"time out of memory", b"iteration 5/ 10 | lm loss: nan |", b"\x1b[31mAssertionError: boom\x1b[0m",
    b"e" * 2048, b"fail" + b"y" * 2044,
])


@given(lines=st.lists(_LINES, max_size=40), last=st.sampled_from([b"", b"RuntimeError: cut", b"noise"]))
def test_distinct_lines_give_what_the_segments_give(lines, last):
    """The Arrow path over distinct lines (no \\r, lines of at most 2048 bytes) yields exactly what the segment
    path yields, offsets included, also for a last line without a line end and at an offset into the buffer."""
    from analysis.logs.markers import _scan_lines

    head = b"prefix that is not scanned\n"
    buf = head + b"".join(line + b"\n" for line in lines) + last
    assert list(scan_markers(buf, len(head), len(buf))) == list(_scan_lines(buf[len(head):], len(head)))
