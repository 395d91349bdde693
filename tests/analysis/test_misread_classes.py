"""The failure classes the judgement used to misread, each as a general capability: real-format lines (NCCL,
NVSHMEM, DeepEP, Slurm, pyxis/enroot, Megatron) reworded, at other sizes, in the four layouts a log comes in
(srun ``--label`` ``N: ``, torchrun ``[defaultN]:``, PyTorch ``[rankN]:``, none), never the cases named in the issue.

- byte order within one output stream and resource-cause -> consequence pairs (analysis.judge.timeline rule 3b);
- causes inside another error's text, decoded by one code table (analysis.logs.codes), with ``retriable`` from the
  decoded cause;
- scheduler stops read with Slurm's own timeouts; slurmstepd/srun RPC errors are no NCCL errors;
- the launch layer below Python (pyxis, enroot, SPANK, prolog/epilog, exec): ``launch_failure``;
- trends within a run (step time, loss, grad norm against an earlier stable level);
- iteration records ended at their last complete field; bare device asserts attributed by their condition.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from analysis.judge.classify import Expectation, SchedulerInfo, classify
from analysis.logs import decode
from analysis.logs.parse import parse_lines
from tests.analysis.synth import iteration_line

LAYOUTS = ("srun", "torchrun", "rank", "none")
T0 = datetime(2026, 3, 9, 22, 40, 0)


def pre(layout: str, rank: int) -> str:
    return {"srun": f"{rank}: ", "torchrun": f"[default{rank}]:", "rank": f"[rank{rank}]:", "none": ""}[layout]


def stamp(s: float) -> str:
    return (T0 + timedelta(seconds=s)).strftime("%Y-%m-%d %H:%M:%S")


def slurm(s: float) -> str:
    return (T0 + timedelta(seconds=s)).strftime("%Y-%m-%dT%H:%M:%S")


def iters(layout: str, n: int, total: int, *, rank: int = 0, ts: bool = True, step_ms: float = 700.0,
          **kw) -> list[str]:
    return [pre(layout, rank) + iteration_line(i, total, step_ms=step_ms, ts=stamp(i) if ts else None, **kw)
            for i in range(1, n + 1)]


def judge(lines: list[str], **kw):
    kw.setdefault("steady_iterations", 20)
    return classify(parse_lines(lines), **kw)


# ---- causes inside another error's text ---------------------------------------------------------------------------
@pytest.mark.parametrize("line,reason,code", [
    ("host-3:2211:2290 [5] include/alloc.h:99 NCCL WARN Cuda failure 2 'out of memory'", "cuda_oom", 2),
    ("host-3:2211:2290 [5] include/alloc.h:41 NCCL WARN Failed to CUDA malloc 134217728 bytes", "cuda_oom", 2),
    ("Cuda failure 'misaligned address'", "cuda_error", 716),
    ("/opt/nvshmem/src/host/mem/mem_heap.cpp:874: non-zero status: 2 cuMemMap failed", "cuda_oom", 2),
    ("nvshmem_init.cpp:201: non-zero status: 2 nvshmemi_setup_symmetric_heap failed", "cuda_oom", 2),
    ("[/sw/nvshmem/src/host/proxy/proxy.cpp:370] cuda failed with unspecified launch failure", "cuda_error", 719),
    ("RuntimeError: Failed: CU error /src/DeepEP/csrc/kernels/runtime.cu:51 'CUDA_ERROR_OUT_OF_MEMORY'", "cuda_oom",
     2),
    ("RuntimeError: Failed: CUDA error /src/DeepEP/csrc/deep_ep.cpp:212 'uncorrectable ECC error encountered'",
     "hardware_failure", 214),
])
def test_the_code_table_decodes_the_cause_a_wrapper_carries(line, reason, code):
    cause = decode(line)
    assert cause is not None and (cause.reason, cause.code) == (reason, code)


@pytest.mark.parametrize("line", ["NCCL WARN NET/IB : Got completion from peer 10.1.1.2 with status=12",
                                  "bootstrap_uid.cpp:90: non-zero status: -6 ", "init.cu:998: non-zero status: 7 x failed",
                                  "ncclUnhandledCudaError: Call to CUDA function failed."])
def test_lines_without_a_cause_decode_to_nothing(line):
    assert decode(line) is None


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("payload", ["Cuda failure 2 'out of memory'", "Failed to CUDA calloc 25165824 bytes"])
def test_an_nccl_error_that_carries_an_oom_is_cuda_oom_and_not_retriable(layout, payload):
    p = pre(layout, 6)
    lines = iters(layout, 8, 40, rank=6) + [
        f"{p}gpu-x9:5021:5110 [6] NCCL INFO transport/p2p.cc:204 -> 1",
        f"{p}torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:2010, unhandled cuda error "
        "(run with NCCL_DEBUG=INFO for details), NCCL version 2.26.2",
        f"{p}ncclUnhandledCudaError: Call to CUDA function failed.", f"{p}Last error:", f"{p}{payload}"]
    v = judge(lines)
    assert (v.status, v.reason) == ("failed", "cuda_oom")
    assert "retriable" not in v.flags and "nccl_error" in v.flags


@pytest.mark.parametrize("layout", LAYOUTS)
def test_an_nccl_error_that_carries_an_illegal_access_is_cuda_error(layout):
    p = pre(layout, 1)
    lines = iters(layout, 12, 40, rank=1) + [
        f"{p}ncclUnhandledCudaError: Call to CUDA function failed.", f"{p}Last error:",
        f"{p}Cuda failure 700 'an illegal memory access was encountered'"]
    assert judge(lines).reason == "cuda_error"


def test_a_plain_network_error_stays_retriable():
    lines = iters("srun", 8, 40) + ["3: gpu-b1:77:90 [3] transport/net_ib.cc:1695 NCCL WARN NET/IB : Got completion "
                                    "from peer 10.0.0.9<4011> with status=5 opcode=1 len=0 vendor err 244 (Send)"]
    v = judge(lines)
    assert v.reason == "nccl_error" and "retriable" in v.flags


# ---- order without timestamps and resource -> consequence ---------------------------------------------------------
@pytest.mark.parametrize("layout", ["srun", "torchrun", "rank"])
@pytest.mark.parametrize("consequence", [
    "RuntimeError: Failed: CUDA error /ws/DeepEP/csrc/kernels/internode_ll.cu:388 'an illegal memory access was "
    "encountered'",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "RuntimeError: DeepEP error: CPU recv timeout"])
def test_a_resource_failure_explains_the_errors_after_it_in_its_stream(layout, consequence):
    p = pre(layout, 4)
    lines = iters(layout, 6, 50, rank=4, ts=False) + [
        f"{p}torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.25 GiB. GPU 4 has a total capacity of "
        "79.1 GiB of which 512.00 MiB is free.", f"{p}{consequence}", f"{pre(layout, 2)}{consequence}"]
    v = judge(lines, expect=Expectation(requested={"dispatcher": "deepep"}))
    assert v.reason == "cuda_oom", (v.flags, v.timeline)


@pytest.mark.parametrize("layout", ["srun", "rank"])
def test_without_stamps_byte_order_of_two_streams_does_not_decide(layout):
    """An OOM printed on one rank after another rank's kernel error says nothing of which came first: priority."""
    lines = iters(layout, 6, 50, ts=False) + [
        f"{pre(layout, 2)}RuntimeError: Failed: CUDA error /ws/DeepEP/csrc/kernels/intranode.cu:77 'an illegal "
        "memory access was encountered'",
        f"{pre(layout, 5)}torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB."]
    assert judge(lines, expect=Expectation(requested={"dispatcher": "deepep"})).reason == "flex_kernel_error"


def test_a_sticky_cuda_error_after_an_assertion_in_its_stream_is_its_echo():
    lines = iters("srun", 6, 50, ts=False) + [
        "7: Traceback (most recent call last):", "7: ValueError: token count 4097 exceeds the buffer",
        "7: RuntimeError: CUDA error: unspecified launch failure"]
    assert judge(lines).reason == "traceback"


# ---- scheduler stops that arrive late; teardown and RPC lines --------------------------------------------------------
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("grace_s", [90, 240, 900])
def test_a_preemption_announced_by_its_signal_explains_what_followed(layout, grace_s):
    lines = iters(layout, 50, 900) + [
        f"{pre(layout, 0)}[2026-03-09 22:40:51,004] torch.distributed.elastic.agent.server.api: [WARNING] Received "
        "Signals.SIGTERM death signal, shutting down workers",
        f"{pre(layout, 3)}[E309 22:40:58.100000 1201 ProcessGroupNCCL.cpp:1830] [Rank 3] Process group watchdog "
        "thread terminated with exception: NCCL error: remote process exited or there was a network error",
        f"slurmstepd: error: *** JOB 51234 ON gpu-r01 CANCELLED AT {slurm(51 + grace_s)} DUE TO PREEMPTION ***"]
    v = judge(lines)
    assert (v.status, v.reason) == ("incomplete", "preempted"), (v.flags, v.timeline)


def test_a_node_failure_declared_after_slurmd_timeout_explains_the_network_errors():
    lines = iters("srun", 80, 900) + [
        "2: [E309 22:42:10.000000 311 ProcessGroupNCCL.cpp:1830] [Rank 2] NCCL error: remote process exited or there "
        "was a network error",
        f"slurmstepd: error: *** STEP 600.0 ON gpu-s02 CANCELLED AT {slurm(80 + 290)} DUE TO NODE FAIL ***"]
    assert judge(lines).reason == "node_failure"


def test_an_oom_long_before_a_node_failure_is_not_explained_by_it():
    lines = iters("rank", 30, 900) + [
        "[rank2]:[E309 22:40:35.000000 311 Something.cpp:1] torch.OutOfMemoryError: CUDA out of memory.",
        f"slurmstepd: error: *** JOB 601 ON gpu-s02 CANCELLED AT {slurm(30 + 2000)} DUE TO NODE FAIL ***"]
    assert judge(lines).reason == "cuda_oom"


@pytest.mark.parametrize("rpc", ["slurmstepd: error: Failed to send MESSAGE_TASK_EXIT: Connection refused",
                                 "srun: error: slurm_receive_msgs: [[gpu-q1]:6818] failed: Socket timed out on send/recv operation",
                                 "slurmstepd: error: Unable to send job complete message: Connection reset by peer"])
def test_slurm_rpc_errors_are_no_nccl_errors(rpc):
    killed = iters("none", 40, 900) + [
        f"slurmstepd: error: *** STEP 777.0 ON gpu-q1 CANCELLED AT {slurm(45)} DUE TO TIME LIMIT ***",
        "srun: Job step aborted: Waiting up to 62 seconds for job step to finish.", rpc]
    v = judge(killed)
    assert v.reason == "slurm_time_limit" and "nccl_error" not in v.flags
    done = iters("srun", 30, 30) + [f"0: [after training is done] datetime: {stamp(31)}", rpc]
    assert judge(done).status == "ok"


# ---- the launch layer below Python --------------------------------------------------------------------------------
@pytest.mark.parametrize("lines,layer", [
    (["pyxis: importing docker image: registry.local#team/train:latest",
      "slurmstepd: error: pyxis: child 4410 failed with error code: 1",
      "slurmstepd: error: pyxis: failed to import docker image",
      "slurmstepd: error: pyxis:     [ERROR] Could not process JSON input",
      "srun: error: gpu-t3: task 2: Exited with exit code 1"], "pyxis"),
    (["slurmstepd: error: pyxis: container start failed with error code: 1",
      "slurmstepd: error: pyxis:     enroot-mount: failed to mount: /lustre/data at /data: No such file or directory",
      "srun: error: gpu-t4: task 0: Exited with exit code 1"], "pyxis"),
    (["slurmstepd: error: spank: required plugin spank_pyxis.so: task_init_privileged() failed with rc=-1",
      "slurmstepd: error: Failed to invoke spank plugin stack", "srun: error: gpu-t5: task 0: Exited with exit code 1"],
     "spank"),
    (["srun: error: Task launch for StepId=44.0 failed on node gpu-t6: Prolog hung on node",
      "srun: error: Application launch failed: Prolog hung on node"], "prolog"),
    (["error: epilog failed, status=256", "srun: error: gpu-t7: task 0: Exited with exit code 1"], "epilog"),
    (["slurmstepd: error: execve(): torchrun: No such file or directory",
      "srun: error: gpu-t8: tasks 0-3: Exited with exit code 2"], "exec"),
    (["srun: error: Unable to create step for job 5512: Invalid generic resource (gres) specification"], "srun"),
    (["/var/spool/slurmd/job5513/slurm_script: line 14: torchrun: command not found"], "exec"),
])
def test_a_run_that_never_reached_python_has_a_launch_reason(lines, layer):
    v = judge(lines, scheduler=SchedulerInfo("FAILED", 1))
    assert (v.status, v.reason) == ("failed", "launch_failure"), (v.evidence, v.flags)
    assert v.details["layer"] == layer and v.details["reached_python"] is False
    assert "retriable" not in v.flags


def test_a_pyxis_hint_line_alone_is_no_failure():
    lines = iters("none", 30, 30) + ["slurmstepd: error: pyxis: if the image has an unusual entrypoint, try using "
                                     "--no-container-entrypoint", f"[after training is done] datetime: {stamp(31)}"]
    assert judge(lines).status == "ok"


# ---- trends --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("factor,n", [(2.5, 40), (6.0, 120), (12.0, 400)])
def test_a_step_time_that_climbs_and_stays_is_a_slowdown(layout, factor, n):
    step = [600.0 if i < n // 3 else 600.0 * min(factor, 1 + (factor - 1) * (i - n // 3) / (n // 3))
            for i in range(n)]
    lines = [pre(layout, 0) + iteration_line(i + 1, n, step_ms=step[i], ts=stamp(i)) for i in range(n)]
    v = judge(lines + [f"{pre(layout, 0)}[after training is done] datetime: {stamp(n + 1)}"])
    assert (v.status, v.reason) == ("ok_with_warning", "slowdown")
    assert v.details["factor"] >= 2


@pytest.mark.parametrize("spikes", [(5, 17), (3, 9, 30, 31)])
def test_step_time_spikes_are_no_slowdown(spikes):
    n = 40
    lines = [iteration_line(i, n, step_ms=2100.0 if i in spikes else 700.0 + i % 7) for i in range(1, n + 1)]
    assert judge(lines + ["[after training is done] datetime: 2026-03-09 23:00:00"]).status == "ok"


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("key,rate", [("loss", 1.06), ("loss", 1.15), ("grad", 1.1), ("grad", 1.25)])
def test_a_ramp_against_the_earlier_level_is_diverged(layout, key, rate):
    n, start = 140, 40
    lines = []
    for i in range(1, n + 1):
        up = rate ** max(0, i - start)
        lines.append(pre(layout, 0) + iteration_line(i, 400, loss=2.1 * (up if key == "loss" else 1.0),
                                                     grad=0.8 * (up if key == "grad" else 1.0), ts=stamp(i)))
    v = judge(lines)
    assert (v.status, v.reason) == ("failed", "diverged"), v.flags


def test_a_slowly_rising_grad_norm_is_healthy():
    lines = [iteration_line(i, 200, loss=9.0 - 3.0 * i / 200, grad=0.3 * (1 + 4 * i / 200)) for i in range(1, 201)]
    assert judge(lines + ["[after training is done] datetime: 2026-03-09 23:00:00"]).status == "ok"


# ---- grammars ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("glued", ["Saving checkpoint at iteration", "wandb: logging", "tensorboard: step",
                                   "{'memory_gb': 71.2}", "(min, max) time across ranks (ms):",
                                   " wandb: WARNING Step must only increase", " note: checkpoint saved in 3.2 s"])
def test_an_iteration_record_ends_at_its_last_complete_field(layout, glued):
    lines = [pre(layout, 0) + iteration_line(i, 30, ts=stamp(i)) + glued for i in range(1, 31)]
    log = parse_lines(lines + [f"{pre(layout, 0)}[after training is done] datetime: {stamp(31)}"])
    assert len(log.series) == 30 and log.damaged_lines == 0
    assert judge(lines + [f"{pre(layout, 0)}[after training is done] datetime: {stamp(31)}"]).status == "ok"


@pytest.mark.parametrize("cut", ["| number of nan itera", "| number of nan iterations:", "| lm loss: 2.3",
                                 "| grad norm: nan"])
def test_a_field_cut_in_its_middle_is_still_damage(cut):
    good = [iteration_line(i, 30) for i in range(1, 30)]
    line = iteration_line(30, 30).rsplit("|", 2)[0] + cut
    log = parse_lines(good + [line])
    assert log.damaged_lines == 1 or len(log.series) == 29


@pytest.mark.parametrize("layout", ["srun", "rank", "none"])
@pytest.mark.parametrize("condition,dispatcher,reason", [
    ("num_max_nvl_chunked_recv_tokens % num_max_nvl_chunked_send_tokens == 0", None, "flex_kernel_assertion"),
    ("rdma_rank < num_rdma_ranks", "alltoall", "flex_kernel_assertion"),
    ("dstIndex < dstAddDimSize", "deepep", "assertion"),
    ("t >= 0 && t < n_classes", "deepep", "assertion"),
    ("ptr != nullptr", "alltoall", "assertion"),
])
def test_a_bare_device_assert_is_attributed_by_its_condition(layout, condition, dispatcher, reason):
    p = pre(layout, 3)
    lines = iters(layout, 5, 60, rank=3, ts=False) + [f"{p}Assertion `{condition}' failed.",
                                                       f"{p}RuntimeError: CUDA error: device-side assert triggered"]
    expect = Expectation(requested={"dispatcher": dispatcher}) if dispatcher else None
    assert judge(lines, expect=expect).reason == reason


@pytest.mark.parametrize("wait_s", [32, 62, 120])
def test_srun_teardown_lines_count_only_after_a_task_failure(wait_s):
    abort = f"srun: Job step aborted: Waiting up to {wait_s} seconds for job step to finish."
    killed = iters("srun", 40, 900) + [
        f"slurmstepd: error: *** STEP 9.0 ON gpu-u1 CANCELLED AT {slurm(45)} DUE TO TIME LIMIT ***", abort,
        "srun: error: gpu-u1: tasks 0-7: Terminated"]
    assert "srun_teardown" not in judge(killed).flags
    failed = iters("srun", 10, 900) + ["srun: error: gpu-u1: task 5: Exited with exit code 1", abort,
                                       "srun: Terminating StepId=9.0"]
    assert "srun_teardown" in judge(failed).flags


@pytest.mark.parametrize("layout", LAYOUTS)
def test_nvshmems_settings_dump_and_init_warnings_are_no_failure(layout):
    p = pre(layout, 0)
    dump = [f"{p}NVSHMEM_ENABLE_ERROR_CHECKS false (type: bool, default: false)",
            f"{p}NVSHMEM_DISABLE_CUDA_VMM false (type: bool, default: false)",
            f"{p}gpu-v1:88:99 [0] misc/socket.cc:484 NCCL WARN Could not find real path of /sys/class/net/ib7"]
    oom = [f"{p}torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB."]
    assert judge(dump + oom).reason == "cuda_oom"  # died at start-up: the dump is no NVSHMEM error
    assert judge(dump + iters(layout, 12, 60) + oom).reason == "cuda_oom"  # training outlived the warning
    done = dump + iters(layout, 30, 30) + [f"{p}[after training is done] datetime: {stamp(31)}"]
    assert judge(done).status == "ok"


def test_a_batch_size_ramp_up_is_no_slowdown():
    """Megatron's --rampup-batch-size: longer steps for bigger batches, the same time per sample."""
    n = 60
    gbs = [64 if i < 20 else 128 if i < 40 else 256 for i in range(n)]
    lines = [iteration_line(i + 1, n, step_ms=5.0 * gbs[i], gbs=gbs[i]) for i in range(n)]
    assert judge(lines + ["[after training is done] datetime: 2026-03-09 23:00:00"]).status == "ok"


def test_an_nvshmem_status_2_outside_the_heap_is_no_oom():
    """NVSHMEM's transport code returns nvshmemResult_t through the same macro, where 2 is a system error."""
    assert decode("/sw/nvshmem/src/host/transport/transport.cpp:400: non-zero status: 2 connect EPS failed") is None
