"""Parser tests: real lines (CASES C10), every line kind FACTS §6 lists, restarts, and bad input."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

from analysis.logs import parse, scanner
from analysis.logs.parse import (
    group_restart_files,
    parse_files,
    parse_iteration_line,
    parse_lines,
    restart_key,
)
from tests.analysis.synth import (
    FIXTURES,
    iteration_line,
    megatron_lines,
    memory_gb,
    memory_mb,
    step_time,
    training_log,
    write_log,
)


def test_c10_first_real_line_parses_exactly():
    rec = parse_iteration_line(megatron_lines()[0])
    assert rec is not None
    assert (rec.iteration, rec.train_iters) == (71, 100)
    assert rec.step_ms == 5361.6
    assert rec.tflops == 243.6
    assert rec.lm_loss == pytest.approx(1.818812, abs=1e-9)
    assert rec.grad_norm == pytest.approx(1.300)
    assert (rec.skipped, rec.nan_iterations, rec.global_batch_size) == (0, 0, 128)
    assert rec.timestamp == "2024-04-06 03:02:12"
    assert rec.losses["load_balancing_loss"] == pytest.approx(1.013377)


def test_c10_line_without_throughput_still_gives_step_time():
    rec = parse_iteration_line(megatron_lines()[1])
    assert rec is not None and rec.iteration == 122 and rec.train_iters == 250000
    assert rec.step_ms == 86545.2 and rec.tflops is None and rec.timestamp is None
    stripped = megatron_lines()[0].replace(" throughput per GPU (TFLOP/s/GPU): 243.6 |", "")
    rec2 = parse_iteration_line(stripped)
    assert rec2.step_ms == 5361.6 and rec2.tflops is None


@pytest.mark.parametrize("label,value,expected", [
    ("compute per GPU (TFLOP/s/GPU)", "496.3 (avg 496.1)", 496.3),
    ("throughput per GPU (TFLOP/s/GPU)", "12.5", 12.5),
    ("compute per GPU (TFLOP/s/GPU)", "7 (avg 6.5)", 7.0),
])
def test_c10_renamed_throughput_field(label, value, expected):
    line = megatron_lines()[0].replace("throughput per GPU (TFLOP/s/GPU): 243.6", f"{label}: {value}")
    assert parse_iteration_line(line).tflops == expected


@pytest.mark.parametrize("prefix", ["[default3]:", "0: ", "[rank7]: ", "[rank12]:[default0]: ", "\x1b[32m",
                                    "progress 10%\rprogress 20%\r", "   "])
def test_prefixes_ansi_and_carriage_returns(prefix):
    line = prefix + megatron_lines()[0].lstrip()
    rec = parse_iteration_line(line)
    assert rec is not None and rec.step_ms == 5361.6 and rec.tflops == 243.6


def test_ansi_codes_inside_and_crlf_endings(tmp_path):
    line = megatron_lines()[0].replace("| lm loss", "|\x1b[0m lm loss") + "\x1b[0m\r\n"
    log = parse_lines([line])
    assert len(log.series) == 1 and log.series.lm_loss[0] == pytest.approx(1.818812)


def test_extra_loss_keys_with_spaces_and_nan_values():
    line = iteration_line(5, 10, extra={"mtp_1 loss": 2.5, "z_loss": 0.01, "load_balancing_loss": 1.2})
    rec = parse_iteration_line(line)
    assert rec.losses == {"mtp_1 loss": 2.5, "z_loss": 0.01, "load_balancing_loss": 1.2, "lm loss": 7.0}
    nan_line = line.replace("lm loss: 7.000000E+00", "lm loss: NAN")
    log = parse_lines([nan_line])
    assert bool(log.series.nonfinite[0]) and math.isnan(log.series.lm_loss[0])


def test_memory_mb_and_gb_peak_over_ranks():
    log = parse_lines([memory_mb(1, 2048.0, rank=0), memory_mb(1, 4096.0, rank=3), memory_gb(2, 1.5, rank=1)])
    assert log.peak_mem_gb == pytest.approx(4.0)  # MB are MiB: 4096 / 1024
    assert log.memory_lines == 3
    assert parse_lines(megatron_lines()[2:3]).peak_mem_gb == pytest.approx(194.41)


def test_truncated_memory_line_is_not_read():
    full = memory_gb(1, 194.41)
    cut = full[: full.index("194.41") + 3]  # "mem-max-allocated-gigabytes: 194" then end of line
    assert parse_lines([cut]).peak_mem_gb is None


def test_bridge_step_time_and_iteration_line_count_once():
    log = parse_lines(training_log(30))
    assert len(log.series) == 30 and log.step_time_lines == 30
    assert log.tflops_source == "iteration_line"


@pytest.mark.parametrize("line,ms,tf", [
    ("Step Time : 12.78s GPU utilization: 528.1MODEL_TFLOP/s/GPU", 12780.0, 528.1),
    ("Step Time: 12.78s GPU utilization: 528.1 TFLOP/s/GPU", 12780.0, 528.1),
    ("Step Time :12.78s  GPU utilization : 528.1 MODEL_TFLOP/s/GPU", 12780.0, 528.1),
    ("[rank0]: Step Time : 0.69s GPU utilization: 2.0MODEL_TFLOP/s/GPU", 690.0, 2.0),
])
def test_step_time_only_logs_give_steps(line, ms, tf):
    log = parse_lines([line] * 6)
    assert len(log.series) == 6 and log.series.step_ms[0] == pytest.approx(ms) and log.series.tflops[0] == tf
    assert log.tflops_source == "step_time_line"


def test_step_time_fills_throughput_when_iteration_line_lacks_it():
    lines = []
    for i in range(1, 11):
        lines += [step_time(0.5, 4.2), iteration_line(i, 10, tflops=None)]
    log = parse_lines(lines)
    assert len(log.series) == 10 and np.all(log.series.tflops == 4.2)
    assert log.tflops_source == "step_time_line"


def test_config_dump_bridge_and_megatron_lm_styles():
    log = parse_files([FIXTURES / "h200_mbridge_tiny_moe_baseline.log"])
    assert log.config["moe_token_dispatcher_type"] == "alltoall"
    assert log.config["global_batch_size"] == "8" and log.config["seq_length"] == "1024"
    lm = parse_lines(["  expert_model_parallel_size ...................... 8",
                      "[rank0]:   moe_token_dispatcher_type ....................... alltoall",
                      "  overlap_moe_expert_parallel_comm: True  (Mcore default: False)",
                      "  eval_global_batch_size: 99"])
    assert lm.config == {"expert_model_parallel_size": "8", "moe_token_dispatcher_type": "alltoall",
                         "overlap_moe_expert_parallel_comm": "True"}


def test_real_bridge_baseline_fixture():
    log = parse_files([FIXTURES / "h200_mbridge_tiny_moe_baseline.log"])
    s = log.series
    assert len(s) == 30 and log.train_iters == 30 and log.damaged_lines == 0
    assert (s.iteration[0], s.step_ms[0], s.tflops[0], s.lm_loss[0]) == (1, 8065.9, 0.2, 10.48167)
    assert s.lm_loss[-1] == pytest.approx(6.540995)
    assert log.peak_mem_gb == pytest.approx(1.7664)
    assert log.marker_counts == {"training_done": 1}
    assert log.last_timestamp == "2026-11-29 15:08:09"


def test_real_bridge_assert_fixture_markers():
    log = parse_files([FIXTURES / "h200_mbridge_overlap_ep1_bridge_assert.log"])
    assert len(log.series) == 0
    kinds = {m.kind for m in log.markers}
    assert {"assertion", "traceback", "frame", "exception"} <= kinds  # catalogue kinds are reason names


def test_restart_files_grouped_and_ordered(tmp_path):
    names = ["log-a2a.ovl1.dw0_4242_1.out", "log-a2a.ovl1.dw0_4242_0.out", "log-a2a.ovl1.dw0_4242_10.out",
             "log-a2a.ovl0.dw0_77_0.out", "plain.log"]
    groups = group_restart_files([tmp_path / n for n in names])
    assert [p.name for p in groups["log-a2a.ovl1.dw0"]] == [
        "log-a2a.ovl1.dw0_4242_0.out", "log-a2a.ovl1.dw0_4242_1.out", "log-a2a.ovl1.dw0_4242_10.out"]
    assert set(groups) == {"log-a2a.ovl1.dw0", "log-a2a.ovl0.dw0", "plain"}
    assert restart_key("x_12_3.out") == ("x", 3, 12)


def test_restart_later_lines_win_and_restart_start_recorded(tmp_path):
    first = write_log(tmp_path / "run_9_0.out", [iteration_line(i, 20, step_ms=900.0) for i in range(1, 13)])
    second = write_log(tmp_path / "run_9_1.out", [iteration_line(i, 20, step_ms=400.0) for i in range(10, 21)])
    log = parse_files(group_restart_files([second, first])["run"])
    assert list(log.series.iteration) == list(range(1, 21))
    assert log.series.step_ms[9] == 400.0 and log.series.step_ms[8] == 900.0
    assert log.restart_first_iterations == (10,)


@pytest.mark.parametrize("chunk", [7, 64, 333, 4096])
def test_chunk_boundaries_do_not_change_the_result(tmp_path, monkeypatch, chunk):
    path = FIXTURES / "h200_mbridge_tiny_moe_baseline.log"
    whole = parse_files([path])
    monkeypatch.setattr(parse, "CHUNK_BYTES", chunk)
    pieces = parse_files([path])
    assert np.array_equal(whole.series.step_ms, pieces.series.step_ms)
    assert np.array_equal(whole.series.lm_loss, pieces.series.lm_loss)
    assert whole.config == pieces.config and whole.peak_mem_gb == pieces.peak_mem_gb
    assert [m.text for m in whole.markers] == [m.text for m in pieces.markers]


def test_empty_binary_and_unreadable_files(tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    garbage = tmp_path / "garbage.log"
    garbage.write_bytes(bytes(range(256)) * 64 + b"iteration 3/ 10 | \x00\xff elapsed time per iteration (ms): 1.0 |\n")
    folder = tmp_path / "a_folder.log"
    folder.mkdir()
    log = parse_files([empty, garbage, folder, tmp_path / "missing.log"])
    assert len(log.series) == 0 and log.damaged_lines == 1
    assert any("empty file" in n for n in log.notes)
    assert any("binary data" in n for n in log.notes)
    assert len(log.unreadable) == 2 and any("missing.log" in u for u in log.unreadable)


def test_line_longer_than_one_mib_is_skipped_and_counted(tmp_path):
    good = [iteration_line(i, 10) for i in range(1, 11)]
    path = write_log(tmp_path / "long.log", good[:5] + ["x" * (3 << 20) + " iteration 6/ 10 | junk"] + good[5:])
    log = parse_files([path])
    assert list(log.series.iteration) == list(range(1, 11))
    assert any("longer than" in n for n in log.notes)


def test_long_carriage_return_progress_without_newline(tmp_path):
    progress = "".join(f"\rloading {i}%" for i in range(200_000))  # > 1 MiB, only \r
    path = write_log(tmp_path / "cr.log", [progress + "\r" + iteration_line(1, 2), iteration_line(2, 2)])
    log = parse_files([path])
    assert list(log.series.iteration) == [1, 2]


def test_interleaved_ranks_drop_damaged_lines_only():
    a = iteration_line(5, 10, step_ms=512.3)
    cut = a.index("512.3") + 2
    interleaved = a[:cut] + "[rank3]: Warning: something" + a[cut:]
    lines = [iteration_line(i, 10, step_ms=500.0 + i) for i in range(1, 5)] + [interleaved]
    lines += [a[:cut], "[rank3]: " + a[cut:]]  # split across two lines by another rank's newline
    log = parse_lines(lines)
    assert list(log.series.iteration) == [1, 2, 3, 4]
    assert log.damaged_lines == 2


@pytest.mark.parametrize("first", [1, 3])  # per-line path (the number in the first line) and bulk path
def test_iteration_number_beyond_int64_is_damage_not_a_crash(first):
    lines = [iteration_line(i, 10) for i in range(1, 6)]
    lines[first] = lines[first].replace(f"iteration {first + 1:8d}/", "iteration 99999999999999999999/")
    log = parse_lines(lines)
    assert list(log.series.iteration) == [i for i in range(1, 6) if i != first + 1]
    assert log.damaged_lines == 1


def test_truncated_at_a_field_boundary_is_dropped_when_full_lines_exist():
    full = [iteration_line(i, 10) for i in range(1, 6)]
    cut = full[2][: full[2].index(" lm loss")]  # ends right after "|"
    log = parse_lines(full[:2] + [cut] + full[3:])
    assert list(log.series.iteration) == [1, 2, 4, 5] and log.damaged_lines == 1


def test_tail_window_finds_final_error_and_setup_finds_early_error(tmp_path, monkeypatch):
    monkeypatch.setattr(parse, "CHUNK_BYTES", 4096)
    lines = ["AttributeError: something early"] + [iteration_line(i, 3000) for i in range(1, 3001)]
    lines += ["[rank3]: RuntimeError: DeepEP error: timeout (dispatch CPU)"]
    log = parse_files([write_log(tmp_path / "t.log", lines)], tail_bytes=8192)
    kinds = [m.kind for m in log.markers]
    assert kinds == ["exception", "dispatcher_timeout"]
    assert log.markers[1].offset > log.last_iteration_offset > log.markers[0].offset


def test_markers_between_set_up_and_the_tail_are_not_searched(tmp_path, monkeypatch):
    monkeypatch.setattr(parse, "CHUNK_BYTES", 4096)
    lines = [iteration_line(i, 3000) for i in range(1, 1501)] + ["RuntimeError: in the middle"]
    lines += [iteration_line(i, 3000) for i in range(1501, 3001)] + ["RuntimeError: at the end"]
    log = parse_files([write_log(tmp_path / "t.log", lines)], tail_bytes=8192)
    assert [m.text for m in log.markers] == ["RuntimeError: at the end"]
    whole = parse_files([tmp_path / "t.log"], tail_bytes=1 << 30)
    assert [m.text for m in whole.markers] == ["RuntimeError: in the middle", "RuntimeError: at the end"]


def test_a_pipe_is_read_to_its_end(tmp_path):
    """A pipe has no size: all of it is read, and every region after the first iteration line is searched."""
    import threading

    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    text = "\n".join([iteration_line(i, 50) for i in range(1, 51)] + ["RuntimeError: boom"]) + "\n"
    writer = threading.Thread(target=lambda: fifo.write_text(text))
    writer.start()
    log = parse_files([fifo])
    writer.join()
    assert list(log.series.iteration) == list(range(1, 51)) and log.marker_counts == {"exception": 1}
    assert log.bytes_read == len(text) and not log.notes


def test_marker_memory_is_bounded():
    lines = [f"[rank{i % 8}]: RuntimeError: boom {i}" for i in range(5000)]
    log = parse_lines(lines)
    assert log.marker_counts["exception"] == 5000
    assert len(log.markers) == 2 * scanner.MARKERS_KEPT
    assert log.markers[0].text.endswith("boom 0") and log.markers[-1].text.endswith("boom 4999")


def test_log_from_another_tool_is_not_recognized():
    log = parse_lines(["Epoch 1/10", "loss: 0.3 - accuracy: 0.9", "step 5 | lr 0.1"])
    assert not log.recognized and len(log.series) == 0


def test_parse_files_reads_os_level_symlink_loop(tmp_path):
    loop = tmp_path / "loop.log"
    os.symlink(loop, loop)
    log = parse_files([loop])
    assert len(log.unreadable) == 1


@pytest.mark.parametrize("value", ["inf", "1e19", "-1e300", "nan"])
def test_count_fields_beyond_int64_are_unknown_without_a_warning(value):
    import warnings
    line = iteration_line(3, 10, gbs=8).replace("global batch size:     8", f"global batch size: {value}")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        log = parse_lines([iteration_line(i, 10) for i in (1, 2)] + [line])
    assert log.series.global_batch_size.tolist() == [8, 8, -1]


@pytest.mark.parametrize("value", ["1e999", "-5"])
def test_impossible_memory_values_are_not_readings(value):
    lines = [memory_gb(1, 20.0), memory_gb(2, 30.0).replace("gigabytes: 30.0 |", f"gigabytes: {value} |")]
    log = parse_lines(lines)
    assert (log.peak_mem_gb, log.memory_lines) == (20.0, 1)
