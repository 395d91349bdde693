"""Issue 14, trust gates on the numbers: warm-up from the iterations actually logged, glued iteration lines read,
a diverged variant never called faster (exit 4), a NaN reported with its iteration and rank."""

from __future__ import annotations

import json

import pytest

from analysis.analyze import analyze_files
from analysis.logs.parse import parse_lines
from analysis.measure.compare import verdict_of
from analysis.measure.results import Speedup
from analysis.measure.stats import default_warmup
from analysis.report import main
from tests.analysis.synth import effective_config, iteration_line, make_sweep, training_log, write_log

PLANNED = 122_070


def flat(ms: float):
    """Step time of a run: a slow first iteration, then exactly ``ms``."""
    return lambda i: 3000.0 if i == 1 else ms


# -- warm-up from the iterations actually logged ------------------------------------------------------------------
def test_run_cut_at_300_of_122070_still_has_numbers(tmp_path):
    log = write_log(tmp_path / "cut.out", training_log(300, PLANNED, step=flat(500.0), done=False))
    assert f"iteration      300/  {PLANNED} |" in log.read_text()  # the planned count is what the lines print
    (run,) = analyze_files([log]).runs
    # stats.py: warm-up = max(3, ceil(10% of min(last logged iteration, train_iters))) = max(3, 30) = 30
    assert default_warmup(300) == 30
    assert run.train_iters == PLANNED
    assert run.warmup == 30
    assert run.iterations_total == 300
    assert run.iterations_steady == 300 - 30 == 270
    assert run.status == "incomplete"
    assert run.step_time is not None
    assert run.step_time.median == 500.0 and run.step_time.n == 270
    assert run.tflops is not None and run.tflops.median == 3.0


def test_run_cut_at_300_through_the_cli(tmp_path):
    log = write_log(tmp_path / "logs" / "cut.out", training_log(300, PLANNED, step=flat(500.0), done=False))
    out = tmp_path / "report"
    assert main([str(log), "--out", str(out), "--quiet"]) == 3  # incomplete is a bad run
    (r,) = json.loads((out / "summary.json").read_text())["runs"]
    assert r["status"] == "incomplete"
    assert r["warmup"] == 30
    assert r["iterations"] == {"total": 300, "steady": 270, "skipped": 0}
    assert r["step_time_ms"]["median"] == 500.0 and r["step_time_ms"]["n"] == 270


# -- glued lines --------------------------------------------------------------------------------------------------
def test_iteration_line_glued_to_a_print_is_read():
    lines = [iteration_line(1, 10, step_ms=900.0) + "[rank0]: some print"]
    lines += [iteration_line(i, 10) for i in range(2, 11)]
    log = parse_lines(lines)
    assert log.damaged_lines == 0
    assert len(log.series) == 10
    assert list(log.series.iteration) == list(range(1, 11))
    assert log.series.step_ms[0] == 900.0
    assert log.series.nan_iterations[0] == 0


def test_two_iteration_prints_glued_on_one_line_are_both_read():
    lines = [iteration_line(i, 10) for i in range(1, 5)]
    lines.append(iteration_line(5, 10, step_ms=505.0, loss=5.5) + iteration_line(6, 10, step_ms=606.0, loss=6.5,
                                                                                    prefix=""))
    lines += [iteration_line(i, 10) for i in range(7, 11)]
    assert len(lines) == 9
    log = parse_lines(lines)
    assert log.damaged_lines == 0
    assert list(log.series.iteration) == list(range(1, 11))
    assert list(log.series.step_ms[4:6]) == [505.0, 606.0]
    assert list(log.series.lm_loss[4:6]) == [5.5, 6.5]


def test_glued_first_line_counts_in_the_run(tmp_path):
    lines = training_log(30, step=flat(500.0))
    first = next(k for k, line in enumerate(lines) if "iteration        1/" in line)
    lines[first] += "[rank0]: some print"
    (run,) = analyze_files([write_log(tmp_path / "glued.out", lines)]).runs
    assert run.status == "ok"
    assert run.iterations_total == 30 and run.iterations_steady == 27
    assert not any("damaged" in n for n in run.notes)


def test_field_cut_in_the_middle_is_still_damage():
    cut = iteration_line(5, 10)
    cut = cut[: cut.index("grad norm:") + len("grad no")] + "[rank0]: some print"
    log = parse_lines([iteration_line(i, 10) for i in range(1, 5)] + [cut])
    assert log.damaged_lines == 1
    assert list(log.series.iteration) == [1, 2, 3, 4]


# -- divergence gate ----------------------------------------------------------------------------------------------
A2A0 = {"dispatcher": "alltoall", "overlap": False, "delay_wgrad": False}
A2A1 = {"dispatcher": "alltoall", "overlap": True, "delay_wgrad": False}


def diverging_sweep(tmp_path, **variant_kw):
    base = training_log(30, step=flat(500.0), grad=lambda i: 1.4)
    var = training_log(30, step=flat(450.0), **variant_kw)
    return make_sweep(tmp_path, [
        {"name": "a2a.ovl0.dw0", **A2A0, "role": "baseline",
         "attempts": [{"lines": base, "effective": effective_config("a2a.ovl0.dw0", A2A0)}]},
        {"name": "a2a.ovl1.dw0", **A2A1,
         "attempts": [{"lines": var, "effective": effective_config("a2a.ovl1.dw0", A2A1)}]},
    ])


def report(sweep):
    code = main([str(sweep), "--quiet"])
    summary = json.loads((sweep / "report" / "summary.json").read_text())
    (c,) = summary["comparisons"]
    return code, summary, c


def test_grad_norm_spike_is_diverged_not_faster(tmp_path):
    sweep = diverging_sweep(tmp_path, grad=lambda i: 1e8)
    code, summary, c = report(sweep)
    assert code == 4 and summary["exit_code"] == 4
    assert [r["status"] for r in summary["runs"]] == ["ok", "ok"]
    assert c["verdict"] == "diverged"
    assert c["grad_norm_spike"] is True
    assert c["speedup"]["value"] == pytest.approx(500 / 450, rel=1e-12)
    assert c["speedup"]["ci_low"] > 1.0  # 10% faster beyond doubt, yet not called faster
    assert c["loss_parity"]["ok"] is True  # the loss agrees: the grad norm alone trips the gate
    assert "grad-norm spike at iteration 4: 1e+08 vs baseline 1.4" in c["notes"]
    assert any(n.startswith("diverged from the baseline: grad norm beyond tolerance") for n in c["notes"])


def test_loss_departure_is_diverged_not_faster(tmp_path):
    sweep = diverging_sweep(tmp_path, loss=lambda i: (10.0 - 0.1 * i) * 1.05)
    code, summary, c = report(sweep)
    assert code == 4 and summary["exit_code"] == 4
    assert c["verdict"] == "diverged"
    assert c["grad_norm_spike"] is False
    assert c["speedup"]["value"] == pytest.approx(500 / 450, rel=1e-12) and c["speedup"]["ci_low"] > 1.0
    assert c["loss_parity"]["ok"] is False
    assert c["loss_parity"]["max_rel_diff"] == pytest.approx(0.05, abs=1e-5)
    assert any(n.startswith("diverged from the baseline: loss beyond tolerance") for n in c["notes"])


def test_same_sweep_without_the_departure_is_faster(tmp_path):
    """Control: the only difference from the diverged sweeps is the grad norm / loss, so the gate is what changed
    the verdict (and the speedup interval alone says faster)."""
    code, summary, c = report(diverging_sweep(tmp_path, grad=lambda i: 1.4))
    assert code == 0
    assert c["verdict"] == "faster" and c["grad_norm_spike"] is False and c["loss_parity"]["ok"] is True
    assert verdict_of(Speedup(c["speedup"]["value"], c["speedup"]["ci_low"], c["speedup"]["ci_high"])) == "faster"


# -- NaN with its iteration and rank ------------------------------------------------------------------------------
@pytest.mark.parametrize("spelling", ["NAN", "nan"])  # Megatron's '{:.6E}' prints NAN; other loggers print nan
def test_nan_loss_on_an_iteration_line_carries_iteration_and_rank(tmp_path, spelling):
    lines = training_log(16, 30, done=False)
    lines.append(iteration_line(17, 30, loss=float("nan"), prefix="[rank3]: ").replace("NAN", spelling))
    assert "[rank3]: [2026-11-29 15:08:09] iteration       17/      30 |" in lines[-1]
    assert f"lm loss: {spelling} |" in lines[-1]
    (run,) = analyze_files([write_log(tmp_path / "nan.out", lines)]).runs
    assert run.status == "failed" and run.reason == "nan_inf"
    assert run.details["iteration"] == 17
    assert run.details["rank"] == 3


def test_megatron_found_nan_in_local_grad_norm_carries_iteration_and_rank(tmp_path):
    # megatron/core/distributed/param_and_grad_buffer.py; the check fires in backward before iteration 17 is logged
    tail = ["[rank3]: Traceback (most recent call last):",
            '[rank3]:   File "/opt/megatron-lm/megatron/core/distributed/param_and_grad_buffer.py", line 161, in '
            "check_grads",
            "[rank3]:     assert not norm.isnan().any(), (",
            "[rank3]: AssertionError: Rank 3: found NaN in local grad norm for bucket #0 in backward pass before "
            "data-parallel communication collective. Device: 3, node: node01"]
    lines = training_log(16, 30, done=False, tail=tail)
    (run,) = analyze_files([write_log(tmp_path / "nan_grad.out", lines)]).runs
    assert run.status == "failed" and run.reason == "nan_inf"
    assert run.details["iteration"] == 17
    assert run.details["rank"] == 3
    assert any("found NaN in local grad norm" in e for e in run.evidence)
