"""Severity, phase and per-family structure (analysis/judge/phase.py, analysis/judge/structure.py): teardown warnings and
accounting warnings leave a good run ok, OOM needs a kill, C++ frames are no Python exception, bare device asserts
follow the run's dispatcher, glued iteration lines keep their fields, Xid codes are read after the PCI address."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.judge import phase
from analysis.judge.classify import SchedulerInfo, classify
from analysis.judge.expectation import Expectation
from analysis.logs.parse import parse_files, parse_lines
from tests.analysis.megatron_format import LAYOUTS, in_layout, megatron_line, run_log
from tests.analysis.synth import FIXTURES

HEALTH = FIXTURES / "health"
T = 40
GOOD = [megatron_line(i, T, losses={"lm loss": 9.0 - i / 10}) for i in range(1, T + 1)]
PART = GOOD[:20]


def fixture(name: str, layout: str = "plain") -> list[str]:
    return in_layout((HEALTH / name).read_text().splitlines(), layout)


# -- log levels ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("line,level", [
    ("[W1130 09:00:03.409846512 TCPStore.cpp:125] [c10d] recvValue failed: Connection reset by peer", "warning"),
    ("[rank3]:[E1130 09:00:03.409 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation", "error"),
    ("W1130 09:00:03.409846 4242 socket.cpp:20] [c10d] connect failed", "warning"),
    ("0: E1130 09:00:03.409846 4242 socket.cpp:20] [c10d] connect failed", "error"),
    ("[default1]:WARNING:torch.distributed.elastic.agent.server.api:Received Signals.SIGTERM", "warning"),
    ("2026-11-30 09:00:03,123 - megatron - ERROR - checkpoint writer failed", "error"),
    ("[2026-11-30 09:00:03] [WARNING] [torch.distributed] store closed", "warning"),
    ("/x/y.py:12: UserWarning: TypedStorage is deprecated", "warning"),
    ("gpu-a-01:4242:4300 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion with error 12", "error"),
    ("RuntimeError: NCCL communicator destroy failed", "error"),
    ("[I1130 09:00:03.409 ProcessGroupNCCL.cpp:900] [PG 0 Rank 0] ProcessGroupNCCL initialized", "info"),
])
def test_line_levels(line, level):
    assert phase.line_level(line) == level


# -- teardown ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("name", ["teardown_tcpstore_ok.log", "accounting_warning_ok.log"])
def test_good_run_with_teardown_or_accounting_warnings_stays_ok(layout, name):
    v = classify(parse_lines(fixture(name, layout)))
    assert (v.status, v.reason) == ("ok", None), (v.evidence, v.flags)
    assert not any(f.startswith("nccl") for f in v.flags)


def test_teardown_noise_is_flagged_and_the_exit_still_speaks():
    v = classify(parse_files([HEALTH / "teardown_tcpstore_ok.log"]))
    assert "teardown_noise" in v.flags
    failed = classify(parse_files([HEALTH / "teardown_tcpstore_ok.log"]), scheduler=SchedulerInfo("FAILED", 1))
    assert (failed.status, failed.reason) == ("ok_with_warning", "task_exit_code")
    stepd = classify(parse_lines(fixture("teardown_tcpstore_ok.log") + ["srun: error: gpu-a-01: task 3: Exited with "
                                                                        "exit code 1"]))
    assert (stepd.status, stepd.reason) == ("ok_with_warning", "task_exit_code")


def test_an_error_level_line_at_teardown_is_still_a_warning():
    lines = run_log(GOOD, T) + ["[rank0]:[E1130 09:00:04.1 ProcessGroupNCCL.cpp:1200] NCCL communicator abort failed: "
                                "ncclSystemError"]
    assert (classify(parse_lines(lines)).status, classify(parse_lines(lines)).reason) == ("ok_with_warning",
                                                                                          "nccl_error")


def test_a_warning_during_a_failed_run_ranks_after_the_error():
    lines = run_log(PART, T, done=False) + [
        "[rank1]:[W1130 08:30:00.1 TCPStore.cpp:125] [c10d] recvValue failed: Connection reset by peer",
        "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."]
    assert classify(parse_lines(lines)).reason == "cuda_oom"
    only = run_log(PART, T, done=False) + [
        "[rank1]:[W1130 08:30:00.1 TCPStore.cpp:125] [c10d] recvValue failed: Connection reset by peer"]
    assert classify(parse_lines(only)).reason == "nccl_error"  # nothing else: the warning is all there is


# -- OOM needs a kill ------------------------------------------------------------------------------------------------
def test_accounting_warning_mid_run_is_no_oom():
    lines = run_log(PART, T, done=False) + ["slurmstepd: error: Exceeded job memory limit at some point."] + GOOD[20:]
    lines += ["[after training is done] datetime: 2026-11-30 09:00:01"]
    assert classify(parse_lines(lines)).status == "ok"
    cut = run_log(PART, T, done=False) + ["slurmstepd: error: Exceeded step memory limit at some point."]
    assert classify(parse_lines(cut)).reason == "incomplete"


@pytest.mark.parametrize("kill", [
    "slurmstepd: error: Detected 1 oom_kill event in StepId=4242.0. Some of the step tasks have been OOM Killed.",
    "slurmstepd: error: Detected 3 oom-kill event(s) in StepId=4242.batch cgroup.",
    "[Mon Nov 30 08:25:13 2026] Out of memory: Killed process 48213 (python) total-vm:81234kB, anon-rss:5031kB",
    "slurmstepd: error: Step 4242.0 exceeded memory limit (52428800 > 41943040), being killed",
    "srun: error: gpu-a-07: task 5: Out Of Memory",
])
def test_kill_evidence_is_host_oom(kill):
    lines = run_log(PART, T, done=False) + ["slurmstepd: error: Exceeded job memory limit at some point.", kill]
    assert classify(parse_lines(lines)).reason == "host_oom"


def test_kernel_oom_killer_fixture_is_host_oom():
    v = classify(parse_files([HEALTH / "oom_killed_process.log"]))
    assert (v.status, v.reason) == ("failed", "host_oom")


# -- C++ frames ---------------------------------------------------------------------------------------------------
def test_c10_frames_are_context_not_the_exception():
    v = classify(parse_files([HEALTH / "c10_frames_python_exception.log"]))
    assert (v.status, v.reason) == ("failed", "traceback")
    assert v.details["exception_type"] == "ValueError"
    log = parse_files([HEALTH / "c10_frames_python_exception.log"])
    assert all("frame #" not in m.text for m in log.markers_of("exception"))
    assert log.marker_counts["cpp_frame"] == 4


def test_c10_frames_alone_are_no_python_traceback():
    frames = ["Exception raised from recvBytes at /pytorch/torch/csrc/distributed/c10d/Utils.hpp:682 (most recent "
              "call first):", "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x98 (0x7f in libc10.so)",
              "frame #1: c10::DistBackendError::DistBackendError(c10::SourceLocation, std::string) + 0x51 (0x7f in x)"]
    v = classify(parse_lines(run_log(PART, T, done=False) + frames))
    assert v.reason == "incomplete" and "exception_type" not in v.details


def test_c10_frames_naming_deepep_tie_the_error_to_the_dispatcher():
    lines = run_log(PART, T, done=False, dispatcher="flex") + [
        "[rank2]: RuntimeError: CUDA error: an illegal memory access was encountered",
        "[rank2]: Exception raised from intranode_dispatch at csrc/deep_ep.cpp:501 (most recent call first):",
        "[rank2]: frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x98 (0x7f in libc10.so)",
        "[rank2]: frame #1: deep_ep::Buffer::intranode_dispatch(at::Tensor const&) + 0x1a2 (0x7f in deep_ep_cpp.so)"]
    assert classify(parse_lines(lines)).reason == "flex_kernel_error"


# -- bare device asserts -------------------------------------------------------------------------------------------
FLEX = {"effective": {"moe_token_dispatcher_type": "flex", "moe_flex_dispatcher_backend": "deepep"}}
A2A = {"effective": {"moe_token_dispatcher_type": "alltoall"}}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_bare_device_assert_follows_the_effective_dispatcher(layout):
    log = parse_lines(fixture("device_assert_bare.log", layout))
    flex = classify(log, effective=FLEX)
    assert (flex.status, flex.reason) == ("failed", "flex_kernel_assertion")
    assert flex.details["attributed_by"] == "effective_dispatcher" and flex.details["condition"] == (
        "dst_row < num_out_tokens")
    a2a = classify(log, effective=A2A)
    assert (a2a.status, a2a.reason) == ("failed", "assertion")
    assert a2a.details["location"] == "/workspace/kernels/moe_permute.cu:214"


def test_dispatcher_from_the_config_dump_or_the_label():
    lines = [x.replace("alltoall", "flex") for x in fixture("device_assert_bare.log")]
    assert classify(parse_lines(lines)).reason == "flex_kernel_assertion"
    log = parse_files([HEALTH / "device_assert_bare.log"])  # dump says alltoall: the effective record wins over it
    assert classify(log, effective=FLEX).reason == "flex_kernel_assertion"
    plain = [x for x in fixture("device_assert_bare.log") if "moe_token_dispatcher_type" not in x]
    assert classify(parse_lines(plain), expect=Expectation(requested={"dispatcher": "hybridep"})).reason == (
        "flex_kernel_assertion")
    assert classify(parse_lines(plain)).reason == "assertion"


def test_a_device_assert_in_a_pytorch_kernel_stays_an_assertion_under_flex():
    lines = run_log(PART, T, done=False, dispatcher="flex") + [
        "[rank3]: /pytorch/aten/src/ATen/native/cuda/Indexing.cu:1289: indexSelectLargeIndex: block: [19,0,0], "
        "thread: [96,0,0] Assertion `srcIndex < srcSelectDimSize` failed."]
    v = classify(parse_lines(lines))
    assert v.reason == "assertion" and v.details["condition"] == "srcIndex < srcSelectDimSize"


# -- glued iteration lines -------------------------------------------------------------------------------------------
def test_glued_lines_keep_their_fields_and_the_run_completes():
    log = parse_files([HEALTH / "glued_iteration_lines.log"])
    s = log.series
    assert list(s.iteration) == list(range(1, 61)) and log.damaged_lines == 0
    assert s.partial is not None and list(s.iteration[s.partial]) == [21, 41]  # (60: glued after its last field, whole)
    assert s.lm_loss[20] == s.lm_loss[20] and s.grad_norm[20] != s.grad_norm[20]  # kept up to the glue, then NaN
    v = classify(log)
    assert (v.status, v.reason) == ("ok", None), v.evidence  # a glued head is no vanished key


@given(layout=st.sampled_from(sorted(LAYOUTS)), at=st.integers(0, 9), glue=st.sampled_from([
    "[rank5]: > saving checkpoint", "[default2]:INFO:megatron.core: x", "3: building model",
    "E1130 08:00:01.000123 4242 ProcessGroupNCCL.cpp:1] x", "[W1130 08:00:01.000123000 TCPStore.cpp:1] x",
    "Traceback (most recent call last):", "RuntimeError: boom", "WARNING:root:x", "NCCL INFO x"]))
@settings(max_examples=80, deadline=None)
def test_a_print_glued_after_any_field_keeps_the_fields_before_it(layout, at, glue):
    line = megatron_line(7, 60)
    cuts = [i + 1 for i, c in enumerate(line) if c == "|"][2:]  # after each field from the elapsed time on
    cut = cuts[min(at, len(cuts) - 1)]
    lines = [megatron_line(i, 60) for i in range(1, 7)] + [line[:cut] + " " + glue] + [megatron_line(8, 60)]
    log = parse_lines(in_layout(lines, layout))
    assert 7 in log.series.iteration.tolist() and log.damaged_lines == 0
    row = log.series.iteration.tolist().index(7)
    assert log.series.step_ms[row] == 812.4


# -- Xid ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("line,xid,reason", [
    ("[Mon Nov 30 08:14:01 2026] NVRM: Xid (PCI:0000:3b:00): 79, pid=91230, name=python, GPU has fallen off the "
     "bus.", 79, "hardware_failure"),
    ("kernel: NVRM: Xid (0000:b3:00): 48, pid=1, An uncorrectable double bit error (DBE) has been detected", 48,
     "hardware_failure"),
    ("NVRM: Xid (PCI:0000:41:00.0): 119, pid=2, name=python, Timeout after 6s of waiting for RPC response from GPU1 "
     "GSP!", 119, "hardware_failure"),
    ("dcgm: XID error 94 detected on GPU 3 (contained ECC error)", 94, "hardware_failure"),
    ("NVRM: Xid (PCI:0000:19:00): 31, pid=1234, name=python, Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS "
     "GPCCLIENT_T1_0 faulted @ 0x7f_12340000. Fault is of type FAULT_PDE ACCESS_TYPE_READ", 31, "cuda_error"),
    ("NVRM: Xid (PCI:0000:9a:00): 13, pid=777, name=python, Graphics Exception on GPC 0: SM 1", 13, "cuda_error"),
])
@pytest.mark.parametrize("layout", ["plain", "srun"])
def test_xid_code_is_read_after_the_pci_address(line, xid, reason, layout):
    v = classify(parse_lines(in_layout(run_log(PART, T, done=False) + [line], layout)))
    assert (v.reason, v.details["xid"]) == (reason, xid)


@given(bus=st.integers(0, 255), dev=st.integers(0, 31), xid=st.sampled_from([48, 63, 64, 74, 79, 92, 94, 95, 119]),
       pci=st.booleans(), pid=st.integers(1, 10**6), stamp=st.booleans())
def test_xid_rewordings(bus, dev, xid, pci, pid, stamp):
    addr = f"{'PCI:' if pci else ''}0000:{bus:02x}:{dev:02x}"
    line = f"{'[Mon Nov 30 08:14:01 2026] ' if stamp else ''}NVRM: Xid ({addr}): {xid}, pid={pid}, name=python"
    v = classify(parse_lines(run_log(PART, T, done=False) + [line]))
    assert (v.reason, v.details["xid"]) == ("hardware_failure", xid)


_TEARDOWN = [
    "[W{d} 09:00:03.409846512 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=72, addr=[gpu-a-01]:51532, "
    "remote=[gpu-a-01]:29500): Connection reset by peer",
    '[W{d} 09:00:03.412014077 ProcessGroupNCCL.cpp:1659] [PG ID 0 PG GUID 0(default_pg) Rank 3] Failed to check the '
    '"should dump" flag on TCPStore, (maybe TCPStore server has shut down too early), with error: Connection reset by '
    "peer",
    "W{d} 09:00:03.412014 4242 socket.cpp:752] [c10d] sendBytes failed on SocketImpl(fd=9): Broken pipe",
    "[W{d} 09:00:04.001722401 ProcessGroupNCCL.cpp:1496] Warning: WARNING: process group has NOT been destroyed before "
    "we destruct ProcessGroupNCCL.",
    "WARNING:torch.distributed.elastic.rendezvous.dynamic_rendezvous:The node 'gpu-a-01_4242_0' has failed to send a "
    "keep-alive heartbeat to the rendezvous: Connection reset by peer",
    "Exception raised from recvBytes at /pytorch/torch/csrc/distributed/c10d/Utils.hpp:682 (most recent call first):",
    "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x98 (0x7f8a1b96c788 in libc10.so)",
    "slurmstepd: error: Exceeded job memory limit at some point.",
    "slurmstepd: error: Exceeded step memory limit at some point.",
]


@settings(max_examples=60, deadline=None)
@given(picked=st.lists(st.sampled_from(_TEARDOWN), min_size=1, max_size=8), layout=st.sampled_from(sorted(LAYOUTS)),
       rank=st.sampled_from(["", "[rank3]:", "[rank0]: "]), day=st.sampled_from(["1130", "0101", "0715"]),
       sched=st.sampled_from([None, SchedulerInfo("COMPLETED", 0)]))
def test_teardown_warnings_in_any_order_and_layout_leave_a_good_run_ok(picked, layout, rank, day, sched):
    tail = [rank + t.format(d=day) if t.startswith(("[W", "W")) else t.format(d=day) for t in picked]
    v = classify(parse_lines(in_layout(run_log(GOOD, T) + tail, layout)), scheduler=sched)
    assert (v.status, v.reason) == ("ok", None), (tail, v.evidence)


@pytest.mark.parametrize("line", [
    "[E socket.cpp:957] [c10d] recvValue failed: Connection reset by peer",
    "[rank2]:[E1130 09:00:03.1 TCPStore.cpp:125] [c10d] sendBytes failed on SocketImpl(fd=3): Broken pipe",
    "RuntimeError: Connection reset by peer",
])
def test_store_teardown_errors_after_a_complete_run_are_noise_at_any_level(line):
    v = classify(parse_lines(run_log(GOOD, T) + [line]))
    assert (v.status, v.reason) == ("ok", None) and "teardown_noise" in v.flags
    mid = classify(parse_lines(run_log(PART, T, done=False) + [line]))
    assert mid.reason == "nccl_error"  # the same line before the end is the failure


def test_old_undated_glog_headers_have_levels():
    assert phase.line_level("[W socket.cpp:464] [c10d] The server socket has failed to bind") == "warning"
    assert phase.line_level("[E ProcessGroupNCCL.cpp:475] [Rank 1] Watchdog caught collective operation") == "error"
