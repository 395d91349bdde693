"""Failure taxonomy (CASES C03, C05-C09 and the whole kind behind each)."""

from __future__ import annotations

import pytest

from analysis.judge.classify import Expectation, SchedulerInfo, classify, is_suspected_hang
from analysis.judge.labels import label_from_name
from analysis.logs.parse import parse_files, parse_lines
from tests.analysis.synth import FIXTURES, effective_config, iteration_line, megatron_lines, training_log

A2A_OFF = {"dispatcher": "alltoall", "overlap": False, "delay_wgrad": False}
DEEPEP = {"dispatcher": "deepep", "overlap": True, "delay_wgrad": False}


def run(lines, **kw):
    kw.setdefault("steady_iterations", 20)
    return classify(parse_lines(lines), **kw)


def crash(tail, n=10, total=30):
    return training_log(n, total, done=False, tail=tail)


# -- C03 ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("attr", ["overlap_moe_expert_parallel_comm", "delay_wgrad_compute", "moe_flex_dispatcher_backend"])
def test_c03_nonetype_config_attribute_before_training_is_config_plumbing(attr):
    lines = ["Traceback (most recent call last):",
             '  File "/opt/megatron/bridge/training/config.py", line 1885, in runtime_config_update',
             f"[rank0]: AttributeError: 'NoneType' object has no attribute '{attr}'"]
    v = run(lines, scheduler=SchedulerInfo("failed", 1))
    assert (v.status, v.reason) == ("failed", "config_plumbing")
    assert v.details["attribute"] == attr and v.details["before_training"] is True
    assert any("AttributeError" in e for e in v.evidence) and any("config.py" in e for e in v.evidence)


def test_c03_same_error_after_training_started_is_a_traceback():
    v = run(crash(["[rank0]: AttributeError: 'NoneType' object has no attribute 'overlap_moe_expert_parallel_comm'"]))
    assert (v.status, v.reason) == ("failed", "traceback")
    assert v.details["exception_type"] == "AttributeError"


def test_c03_overlap_off_arm_that_ran_with_overlap_on_is_invalid():
    eff = effective_config("a2a.ovl0.dw0", A2A_OFF, overlap_eff=True)
    v = run(training_log(30), expect=Expectation(requested=A2A_OFF), effective=eff)
    assert (v.status, v.reason) == ("invalid_variant", "label_mismatch")
    assert "overlap_moe_expert_parallel_comm" in v.evidence[0]


def test_c03_log_config_dump_contradicting_the_label_is_invalid():
    setup = ["  overlap_moe_expert_parallel_comm: True  (Mcore default: False)"]
    v = run(training_log(30, setup=setup), expect=Expectation(requested=A2A_OFF))
    assert (v.status, v.reason) == ("invalid_variant", "label_mismatch")
    assert "log config dump" in v.evidence[0]


def test_allowed_adjustment_is_a_flag_and_others_are_mismatches():
    adj = [{"field": "moe_shared_expert_overlap", "from": True, "to": False, "why": "overlap needs it off"}]
    v = run(training_log(30), expect=Expectation(requested=A2A_OFF),
            effective=effective_config("x", A2A_OFF, adjustments=adj))
    assert v.status == "ok" and "adjusted:moe_shared_expert_overlap" in v.flags
    bad = [{"field": "recompute_granularity", "from": "full", "to": None, "why": "?"}]
    v2 = run(training_log(30), expect=Expectation(requested=A2A_OFF), effective=effective_config("x", A2A_OFF,
                                                                                                  adjustments=bad))
    assert (v2.status, v2.reason) == ("invalid_variant", "label_mismatch")


# -- C05 ---------------------------------------------------------------------------------------------------------
FALLBACK = ("WARNING:megatron.bridge.training.flex_dispatcher_backend:DeepEP is only applicable to Ampere, Hopper, and "
            "Blackwell (B200/B300) GPUs. Current GPU: NVIDIA GB200. Falling back to alltoall.")


def test_c05_fallback_line_for_deepep_label_is_invalid_variant():
    v = run(training_log(30, setup=[FALLBACK]), expect=Expectation(requested=DEEPEP))
    assert (v.status, v.reason) == ("invalid_variant", "dispatcher_fallback")
    assert "Falling back to alltoall" in v.evidence[0]


def test_c05_fallback_seen_in_effective_config_for_hybridep():
    req = {"dispatcher": "hybridep", "overlap": True, "delay_wgrad": False}
    v = run(training_log(30), expect=Expectation(requested=req),
            effective=effective_config("hybridep.ovl1.dw0", req, dispatcher_type="alltoall"))
    assert (v.status, v.reason) == ("invalid_variant", "dispatcher_fallback")


def test_c05_label_from_a_variant_style_file_name():
    assert label_from_name("log-deepep.ovl1.dw0.ep16") == DEEPEP
    assert label_from_name("a2a.ovl0.dw0") == A2A_OFF
    assert label_from_name("my_run") is None


def test_c05_fallback_line_in_an_alltoall_run_is_not_a_problem():
    v = run(training_log(30, setup=[FALLBACK]), expect=Expectation(requested=A2A_OFF))
    assert v.status == "ok"


# -- C06 ---------------------------------------------------------------------------------------------------------
C06 = ['[rank5]:   File "/opt/x/megatron/core/transformer/moe/token_dispatcher.py", line 826, in dispatch',
       "Assertion failed: /src/DeepEP/csrc/kernels/internode.cu:483, condition: "
       "ibgda_get_state()->num_rc_per_pe >= num_channels"]


def test_c06_deepep_queue_pair_assertion():
    v = run(crash(C06), scheduler=SchedulerInfo("failed", 134))
    assert (v.status, v.reason) == ("failed", "flex_kernel_assertion")
    assert "NVSHMEM_IBGDA_NUM_RC_PER_PE" in v.hint and "SM count" in v.hint
    assert v.details["condition"] == "ibgda_get_state()->num_rc_per_pe >= num_channels"
    assert v.details["location"] == "/src/DeepEP/csrc/kernels/internode.cu:483"
    assert any("token_dispatcher.py" in e for e in v.evidence)


@pytest.mark.parametrize("line,reason", [
    ("Assertion failed: /src/DeepEP/csrc/kernels/intranode.cu:120, condition: num_tokens <= 4096",
     "flex_kernel_assertion"),
    ("python: /src/hybrid_ep/kernels.cu:77: void f(): Assertion `x > 0' failed.", "flex_kernel_assertion"),
    ("python: /src/foo/bar.cpp:12: int g(): Assertion `ptr != nullptr' failed.", "assertion"),
    ("[rank0]: AssertionError: overlap_moe_expert_parallel_comm is only supported with expert model parallelism",
     "assertion"),
])
def test_c06_kind_of_assertions(line, reason):
    v = run(crash([line]))
    assert v.reason == reason and v.hint is None


def test_real_bridge_assert_log():
    v = classify(parse_files([FIXTURES / "h200_mbridge_overlap_ep1_bridge_assert.log"]))
    assert (v.status, v.reason) == ("failed", "assertion")
    assert v.details["assertion"].startswith("overlap_moe_expert_parallel_comm is only supported")
    assert "comm_overlap.py" in v.evidence[0]


# -- C07 ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("line,backend", [
    ("[rank12]: RuntimeError: DeepEP error: timeout (dispatch CPU)", "DeepEP"),
    ("[rank3]: RuntimeError: DeepEP error: timeout (combine CPU)", "DeepEP"),
    ("HYBRID-EP ALLGATHER TIMEOUT", "HybridEP"),
])
def test_c07_dispatcher_timeout_is_retriable_not_an_assertion(line, backend):
    v = run(crash(["Traceback (most recent call last):", line,
                   "[rank12]: AssertionError: follow-up check failed"]))
    assert (v.status, v.reason) == ("failed", "dispatcher_timeout")
    assert v.details["backend"] == backend and v.details["retriable"] is True
    assert "retriable" in v.flags and "assertion" in v.flags


# -- C08 ---------------------------------------------------------------------------------------------------------
C08_TAIL = ["slurmstepd: error: *** STEP 4242.2 ON node07 CANCELLED AT 2026-01-05T10:00:00 DUE TO TIME LIMIT ***"]


def test_c08_hang_at_exit_after_complete_training():
    v = run(training_log(50, tail=C08_TAIL), scheduler=SchedulerInfo("timeout", None))
    assert (v.status, v.reason) == ("ok_with_warning", "hang_at_exit")
    assert any("after training is done" in e for e in v.evidence)
    assert any("TIME LIMIT" in e for e in v.evidence)
    assert "node07" in v.hosts


def test_c08_slurm_failed_exit_9_but_final_iteration_present():
    v = run(training_log(50, done=False), scheduler=SchedulerInfo("FAILED", 9))
    assert (v.status, v.reason) == ("ok_with_warning", "hang_at_exit")


def test_c08_completed_0_0_but_log_stops_early_is_incomplete():
    v = run(training_log(20, 50, done=False), scheduler=SchedulerInfo("COMPLETED", 0))
    assert (v.status, v.reason) == ("incomplete", "incomplete")
    assert "last iteration 20 of 50" in v.evidence[0]


def test_complete_run_with_nonzero_exit_code_is_a_warning():
    v = run(training_log(30), scheduler=SchedulerInfo("failed", 1))
    assert (v.status, v.reason) == ("ok_with_warning", "task_exit_code")


def test_error_after_training_done_is_a_warning_not_a_failure():
    v = run(training_log(30, tail=["[rank0]: RuntimeError: checkpoint writer thread failed"]))
    assert (v.status, v.reason) == ("ok_with_warning", "traceback") and "after_training_done" in v.flags
    # an NCCL error at teardown is the network family's, still only a warning (issue 14)
    v = run(training_log(30, tail=["[rank0]: RuntimeError: NCCL communicator destroy failed"]))
    assert (v.status, v.reason) == ("ok_with_warning", "nccl_error") and "after_training_done" in v.flags


# -- C09 ---------------------------------------------------------------------------------------------------------
def nccl(op: str, seq: int = 216, timeout: int = 600000) -> str:
    return (f"[rank13]:[E218 04:54:22.864467604 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective "
            f"operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn=1379328, NumelOut=1572864, "
            f"Timeout(ms)={timeout}) ran for {timeout + 45} milliseconds before timing out.")


@pytest.mark.parametrize("op,path", [("ALLTOALL_BASE", "ep_all_to_all"), ("ALLTOALL", "ep_all_to_all"),
                                     ("ALLREDUCE", "data_parallel"), ("REDUCE_SCATTER", "data_parallel"),
                                     ("_ALLGATHER_BASE", "data_parallel"), ("BROADCAST", "data_parallel"),
                                     ("SEND", "pipeline_p2p")])
def test_c09_nccl_watchdog_timeout(op, path):
    v = run(crash([nccl(op)]), scheduler=SchedulerInfo("failed", 6))
    assert (v.status, v.reason) == ("failed", "nccl_timeout")
    assert v.details == {"op": op, "seq": 216, "timeout_ms": 600000, "path": path, "ran_for_ms": 600045}
    assert "retriable" in v.flags


def test_c09_real_broadcast_line():
    line = next(x for x in megatron_lines() if "Watchdog" in x)
    v = run(crash([line]))
    assert v.details["op"] == "BROADCAST" and v.details["seq"] == 1 and v.details["path"] == "data_parallel"


def test_assertion_outranks_the_nccl_timeouts_it_causes():
    v = run(crash(["[rank3]: AssertionError: bad shape", nccl("ALLTOALL_BASE")]))
    assert v.reason == "assertion" and "nccl_timeout" in v.flags


@pytest.mark.parametrize("age,median_ms,min_s,expected", [
    (601, 500, 600, True), (599, 500, 600, False), (700, 200_000, 600, False), (1001, 200_000, 600, True),
    (None, 500, 600, False), (61, None, 60, True),
])
def test_c09_suspected_hang_rule(age, median_ms, min_s, expected):
    assert is_suspected_hang(age, median_ms, min_s) is expected


def test_c09_suspected_hang_rejects_negative_input():
    with pytest.raises(ValueError, match="must be >= 0"):
        is_suspected_hang(-1, 10)


def test_c09_time_limit_long_after_the_last_iteration_is_a_suspected_hang():
    lines = training_log(20, 50, done=False, tail=[
        "slurmstepd: error: *** JOB 77 ON node03 CANCELLED AT 2026-11-29T17:00:00 DUE TO TIME LIMIT ***"])
    v = run(lines, median_step_ms=500, scheduler=SchedulerInfo("timeout"))
    assert (v.status, v.reason) == ("failed", "suspected_hang") and "slurm_time_limit" in v.flags
    v2 = run([x.replace("17:00:00", "15:09:00") for x in lines], median_step_ms=500)
    assert v2.reason == "slurm_time_limit"


def test_c09_running_job_whose_log_stopped_growing():
    lines = training_log(20, 50, done=False)
    v = run(lines, scheduler=SchedulerInfo("running"), last_log_age_s=3600, median_step_ms=500)
    assert (v.status, v.reason) == ("incomplete", "suspected_hang")
    v2 = run(lines, scheduler=SchedulerInfo("running"), last_log_age_s=5, median_step_ms=500)
    assert (v2.status, v2.reason) == ("incomplete", "incomplete")


def test_launcher_hang_flag_is_used():
    v = run(training_log(20, 50, done=False), scheduler=SchedulerInfo("cancelled", None, ("suspected_hang",)))
    assert (v.status, v.reason) == ("failed", "suspected_hang")


# -- the rest of the taxonomy ------------------------------------------------------------------------------------
@pytest.mark.parametrize("tail,reason,status", [
    (["[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"], "cuda_oom", "failed"),
    (["/src/host/init/init.cu:1012: non-zero status: 7 nvshmem initialization failed, exiting"], "nvshmem_init",
     "failed"),
    (["RuntimeError: DeepEP is not installed. Please install DeepEP"], "dispatcher_unavailable", "failed"),
    (["srun: error: Node failure on node12"], "node_failure", "failed"),
    (["slurmstepd: error: *** JOB 5 ON node1 CANCELLED AT 2026-01-05T10:00:00 ***"], "cancelled", "incomplete"),
    (["srun: error: node07: task 3: Exited with exit code 1"], "task_exit_code", "failed"),
    (["srun: error: node07: tasks 0-7: Killed"], "host_oom", "failed"),  # SIGKILL, no scheduler kill (issue 14)
    (["[rank0]: ValueError: bad value"], "traceback", "failed"),
    (["job exited with code 2"], "task_exit_code", "failed"),
])
def test_other_failure_reasons(tail, reason, status):
    v = run(crash(tail))
    assert (v.status, v.reason) == (status, reason)
    assert v.evidence and tail[0].split(":")[-1].strip()[:10] in " ".join(v.evidence)


def test_task_exit_code_details():
    v = run(crash(["srun: error: node07: task 3: Exited with exit code 137"]))
    assert v.details["exit_code"] == 137 and v.details["node"] == "node07" and v.details["tasks"] == "3"


def test_launcher_echo_only_is_a_traceback():
    v = run(crash(["torch.distributed.elastic.multiprocessing.errors.ChildFailedError: "]))
    assert v.reason == "traceback" and v.details["exception_type"].endswith("ChildFailedError")


@pytest.mark.parametrize("change", [("lm loss: 7.000000E+00", "lm loss: NAN"), ("grad norm: 1.000", "grad norm: inf"),
                                    ("number of nan iterations:   0", "number of nan iterations:   1")])
def test_nan_inf(change):
    lines = training_log(30)
    i = next(k for k, x in enumerate(lines) if "iteration       12/" in x)
    lines[i] = lines[i].replace("lm loss: 8.800000E+00", "lm loss: 7.000000E+00").replace(*change)
    v = run(lines)
    assert (v.status, v.reason) == ("failed", "nan_inf") and "iteration 12" in v.evidence[0]


def test_logs_unavailable_and_unreadable(tmp_path):
    assert classify(None).reason == "logs_unavailable"
    v = classify(parse_files([tmp_path / "gone.log"]), scheduler=SchedulerInfo("failed", 1))
    assert (v.status, v.reason) == ("failed", "logs_unavailable")
    assert classify(None, scheduler=SchedulerInfo("running")).status == "incomplete"


def test_log_from_another_tool():
    v = run(["Epoch 1/10", "accuracy 0.9"], scheduler=SchedulerInfo("succeeded", 0))
    assert (v.status, v.reason) == ("incomplete", "unrecognized_log")


def test_validate_mode_pass_and_fail():
    ok = effective_config("x", A2A_OFF, mode="validate")
    assert classify(None, expect=Expectation(mode="validate"), effective=ok).status == "validated"
    bad = effective_config("x", A2A_OFF, mode="validate", checks={
        "verdict": "fail", "messages": ["overlap_moe_expert_parallel_comm is only supported with expert model "
                                        "parallelism"], "not_run": []})
    v = classify(None, expect=Expectation(mode="validate"), effective=bad)
    assert (v.status, v.reason) == ("failed", "preflight_reject")
    assert v.evidence == ("overlap_moe_expert_parallel_comm is only supported with expert model parallelism",)


def test_pruned_and_not_run():
    assert classify(None, scheduler=SchedulerInfo("pruned")).status == "pruned"
    v = classify(None, scheduler=SchedulerInfo("gated"))
    assert (v.status, v.reason) == ("skipped", "not_run")


def test_insufficient_iterations():
    v = run(training_log(6), steady_iterations=3)
    assert (v.status, v.reason) == ("insufficient_iterations", "insufficient_iterations")


def test_throughput_not_logged_flag():
    lines = [iteration_line(i, 10, tflops=None) for i in range(1, 11)]
    v = run(lines)
    assert v.status == "ok" and "throughput_not_logged" in v.flags


# -- the payload's own diagnosis ("[payload] error <code> <kind>: <cause>", experiments/payload/errors.py) ---------
def test_payload_error_line_is_the_reason_and_ranks_are_not_repeated():
    lines = [f"[default{r}]:[payload] error 18 no_gpu: train mode found no GPU on vm; use mode=validate" for r in (1, 0)]
    lines += ["torch.distributed.elastic.multiprocessing.errors.ChildFailedError: "]
    v = run(lines, scheduler=SchedulerInfo("failed", 1))
    assert (v.status, v.reason) == ("failed", "payload_error")
    assert v.details == {"payload_exit_code": 18, "payload_error": "no_gpu"}
    assert sum("no_gpu" in e for e in v.evidence) == 1


def test_payload_check_failed_carries_the_library_messages():
    eff = effective_config("x", A2A_OFF, checks={"verdict": "fail", "messages": ["pipeline parallel needs VPP"],
                                                  "not_run": []})
    v = run(["[payload] error 1 check_failed: pipeline parallel needs VPP"], effective=eff)
    assert (v.status, v.reason) == ("failed", "preflight_reject") and "pipeline parallel needs VPP" in v.evidence


def test_payload_mismatch_is_an_invalid_variant():
    v = run(["[payload] error 16 mismatch: moe_token_dispatcher_type requested 'flex', effective 'alltoall'"],
            expect=Expectation(requested=DEEPEP))
    assert (v.status, v.reason) == ("invalid_variant", "dispatcher_fallback")
    v2 = run(["[payload] error 17 env_mismatch: CUDA_DEVICE_MAX_CONNECTIONS is 1, the variant exports 32"])
    assert (v2.status, v2.reason) == ("invalid_variant", "label_mismatch")


def test_payload_training_failed_defers_to_the_real_cause():
    oom = run(crash(["[rank0]: torch.OutOfMemoryError: CUDA out of memory.",
                     "[payload] error 20 training_failed: pretrain raised OutOfMemoryError"]))
    assert oom.reason == "cuda_oom"
    alone = run(crash(["[payload] error 20 training_failed: pretrain raised SystemExit"]))
    assert (alone.status, alone.reason) == ("failed", "traceback")


def test_validate_pass_then_stopped_by_scheduler_keeps_the_verdict_with_a_warning():
    from analysis.judge.classify import Expectation, SchedulerInfo, classify

    eff = {"checks": {"verdict": "pass", "messages": [], "not_run": ["x"]}}
    for state, reason in (("TIMEOUT", "slurm_time_limit"), ("CANCELLED by 0", "cancelled")):
        v = classify(None, scheduler=SchedulerInfo(state=state), expect=Expectation(mode="validate"), effective=eff)
        assert (v.status, v.reason) == ("ok_with_warning", reason)
        assert "stopped_after_validation" in v.flags
    v = classify(None, scheduler=SchedulerInfo(state="COMPLETED", exit_code=0), expect=Expectation(mode="validate"),
                 effective=eff)
    assert v.status == "validated"


def test_validate_mode_checks_the_label_before_validated():
    """An overlap arm whose variant.json said overlap off passes its checks, but it is not the overlap arm."""
    ovl_on = {"dispatcher": "alltoall", "overlap": True, "delay_wgrad": False}
    ran_off = effective_config("a2a.ovl1.dw0", A2A_OFF, mode="validate")  # what the payload read and checked
    v = classify(None, expect=Expectation(mode="validate", requested=ovl_on), effective=ran_off)
    assert (v.status, v.reason) == ("invalid_variant", "label_mismatch")
    assert any("overlap_moe_expert_parallel_comm" in e for e in v.evidence)
    same = effective_config("a2a.ovl1.dw0", ovl_on, mode="validate")
    assert classify(None, expect=Expectation(mode="validate", requested=ovl_on), effective=same).status == "validated"


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["core_missing", "check_failed"])  # -S: no site-packages, so no megatron.core
def test_a_validate_run_the_payload_stopped_on_an_environment_gap_is_a_payload_error(tmp_path, kind):
    """The real payload in validate mode: where megatron.core cannot be imported (``python -S``: no site-packages)
    it writes its own diagnosis (exit 13, core_missing) and the run is ``payload_error``, never
    ``preflight_reject`` (a configuration the library rejected); a real rejection stays ``preflight_reject``."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    plan = tmp_path / "s"
    ep1 = ["model.expert_model_parallel_size=1", "preflight=off"] if kind == "check_failed" else []
    subprocess.run([sys.executable, "-m", "experiments.sweep", "action=plan", "cluster=local_slurm",
                    f"output_dir={plan}", "sweep=full", "dispatcher=alltoall", "overlap=on", "delay_wgrad=off", *ep1],
                   cwd=root, check=True, capture_output=True)
    flags = ["-S"] if kind == "core_missing" else []
    out = tmp_path / "out"
    res = subprocess.run([sys.executable, *flags, "-m", "experiments.train",
                          str(plan / "variants" / "a2a.ovl1.dw0" / "variant.json"), str(out), "--mode", "validate"],
                         cwd=root, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(root)})
    assert res.returncode == (13 if kind == "core_missing" else 1), res.stdout + res.stderr
    eff = json.loads((out / "effective_config.json").read_text())
    v = classify(parse_lines(res.stdout.splitlines()), expect=Expectation(mode="validate"), effective=eff)
    assert v.status == "failed"
    assert v.reason == ("payload_error" if kind == "core_missing" else "preflight_reject"), v
