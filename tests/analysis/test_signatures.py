"""The signature catalogue (issue 14): real-format logs of every family get their reason, rewordings within a family
keep it (hypothesis), and every entry is well formed (triggers cover its matches, both engines agree, sources)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis.judge.classify import SchedulerInfo, classify
from analysis.logs import catalogue
from analysis.logs.markers import NEEDLES
from analysis.logs.parse import parse_files, parse_lines
from analysis.logs.signatures import FAMILIES, SIGNATURES
from tests.analysis.synth import FIXTURES, iteration_line

SIG = FIXTURES / "signatures"
# fixture file -> (run status, primary reason); every family of analysis/logs/signatures.py has at least one
EXPECTED = {
    "deepep_cpu_recv_timeout.log": ("failed", "dispatcher_timeout"),
    "deepep_gpu_receiver_timeout.log": ("failed", "dispatcher_timeout"),
    "hybridep_allgather_timeout.log": ("failed", "dispatcher_timeout"),
    "deepep_illegal_access_in_frame.log": ("failed", "flex_kernel_error"),
    "deepep_qp_assertion_c06.log": ("failed", "flex_kernel_assertion"),
    "nccl_remote_error.log": ("failed", "nccl_error"),
    "nccl_ib_completion.log": ("failed", "nccl_error"),
    "nccl_watchdog_stuck.log": ("failed", "nccl_timeout"),
    "nccl_alltoall_timeout_c09.log": ("failed", "nccl_timeout"),
    "host_oom_kill.log": ("failed", "host_oom"),
    "cuda_oom.log": ("failed", "cuda_oom"),
    "cuda_illegal_access.log": ("failed", "cuda_error"),
    "ecc_hardware.log": ("failed", "hardware_failure"),
    "xid_fallen_off_bus.log": ("failed", "hardware_failure"),
    "node_fail.log": ("failed", "node_failure"),
    "preempted.log": ("incomplete", "preempted"),
    "requeued.log": ("incomplete", "preempted"),
    "time_limit.log": ("failed", "slurm_time_limit"),
    "pre_limit_sigterm.log": ("failed", "slurm_time_limit"),
    "torchrun_sigterm_no_slurm.log": ("incomplete", "cancelled"),
    "user_cancel.log": ("incomplete", "cancelled"),
    "torchrun_sigsegv.log": ("failed", "killed_by_signal:SIGSEGV"),
    "torchrun_sigbus.log": ("failed", "killed_by_signal:SIGBUS"),
    "torchrun_sigkill.log": ("failed", "host_oom"),
    "srun_segfault.log": ("failed", "killed_by_signal:SIGSEGV"),
    "nan_grad_norm.log": ("failed", "nan_inf"),
    "bridge_config_assert.log": ("failed", "assertion"),
    "c_assertion.log": ("failed", "assertion"),
    "python_exception.log": ("failed", "traceback"),
    "dispatcher_fallback.log": ("invalid_variant", "dispatcher_fallback"),
    "pyxis_container_start.log": ("failed", "launch_failure"),
    "nccl_cuda_failure_oom.log": ("failed", "cuda_oom"),
}


def test_every_fixture_is_expected_and_every_family_has_one():
    assert sorted(p.name for p in SIG.glob("*.log")) == sorted(EXPECTED)
    reasons = {r for _, r in EXPECTED.values()}
    assert {catalogue.family_of(r) for r in reasons} >= set(FAMILIES)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_format_fixture_gets_its_reason(name):
    v = classify(parse_files([SIG / name]))
    assert (v.status, v.reason) == EXPECTED[name], (v.evidence, v.flags)
    assert v.evidence
    assert ("retriable" in v.flags) == catalogue.retriable(v.reason)


def test_torchrun_table_fields_reach_details_and_evidence():
    v = classify(parse_files([SIG / "torchrun_sigsegv.log"]))
    assert v.details["torchrun"] == {"root_cause": True, "time": "2026-11-30_08:14:02", "host": "gpu-d-01",
                                     "rank": 3, "local_rank": 3, "exitcode": -11, "pid": 91230,
                                     "signal": "SIGSEGV", "error_file": "<N/A>",
                                     "traceback": "Signal 11 (SIGSEGV) received by PID 91230"}
    assert v.details["torchrun_failures"] == 2 and v.details["host"] == "gpu-d-01"
    assert v.evidence[0].startswith("torchrun: rank 3 (local_rank 3) on gpu-d-01 exitcode -11 (SIGSEGV)")


def test_crash_at_teardown_after_last_iteration_is_a_warning():
    lines = [iteration_line(i, 20) for i in range(1, 21)] + ["[after training is done] datetime: 2026-11-30 08:40:00"]
    table = (SIG / "torchrun_sigsegv.log").read_text().splitlines()[15:]
    v = classify(parse_lines(lines + table))
    assert (v.status, v.reason) == ("ok_with_warning", "killed_by_signal:SIGSEGV")
    assert "after_training_done" in v.flags


@pytest.mark.parametrize("state,reason,status", [
    ("PREEMPTED", "preempted", "incomplete"), ("REQUEUED", "preempted", "incomplete"),
    ("OUT_OF_MEMORY", "host_oom", "failed"), ("NODE_FAIL", "node_failure", "failed"),
    ("BOOT_FAIL", "node_failure", "failed"), ("DEADLINE", "slurm_time_limit", "failed"),
    ("TIMEOUT", "slurm_time_limit", "failed"), ("CANCELLED by 1234", "cancelled", "incomplete"),
])
def test_sacct_states_are_honoured(state, reason, status):
    lines = [iteration_line(i, 100) for i in range(1, 30)]
    v = classify(parse_lines(lines), scheduler=SchedulerInfo(state, None))
    assert (v.status, v.reason) == (status, reason)


def test_plain_cancel_line_is_not_a_user_cancel_when_the_scheduler_says_timeout_or_preempted():
    lines = [iteration_line(i, 100, ts=None) for i in range(1, 30)]
    lines += (SIG / "user_cancel.log").read_text().splitlines()[-1:]
    assert classify(parse_lines(lines)).reason == "cancelled"
    assert classify(parse_lines(lines), scheduler=SchedulerInfo("TIMEOUT", 0)).reason == "slurm_time_limit"
    assert classify(parse_lines(lines), scheduler=SchedulerInfo("PREEMPTED", 0)).reason == "preempted"


def test_sigterm_with_a_user_cancel_state_is_a_cancel():
    v = classify(parse_files([SIG / "pre_limit_sigterm.log"]), scheduler=SchedulerInfo("CANCELLED by 4242", 15))
    assert (v.status, v.reason) == ("incomplete", "cancelled")


def test_nan_has_iteration_and_rank():
    v = classify(parse_files([SIG / "nan_grad_norm.log"]))
    assert v.details["rank"] == 3 and v.details["iteration"] == 13


# -- rewordings within a family keep the reason --------------------------------------------------------------------
_prefix = st.sampled_from(["", "[rank3]: ", "[rank117]:", "[default5]:", "12: ", "[2026-11-30 08:00:01] ",
                           "E1130 08:00:01.123 4242 file.cpp:10] "])
_host = st.from_regex(r"[a-z]{2,6}-?[0-9]{1,4}", fullmatch=True)
_n = st.integers(0, 10**6)
_path = st.sampled_from(["/usr/local/lib/python3.12/dist-packages", "/opt/venv/lib/python3.10/site-packages",
                         "/workspace/src"])
_case = st.sampled_from([str.lower, str.upper, str.title, lambda s: s])
FAMILY_LINES = {
    "dispatcher_timeout": st.one_of(
        st.builds(lambda n, k: f"DeepEP dispatch NVL receiver timeout, channel: {n}, RDMA: {k}, nvl: 1", _n, _n),
        st.builds(lambda n: f"DeepEP combine RDMA receiver timeout, channel: {n}, RDMA: 0, src RDMA: 1", _n),
        st.builds(lambda n: f"DeepEP timeout for dispatch receivers, rank {n}, responsible_channel = 2", _n),
        st.sampled_from(["RuntimeError: DeepEP error: CPU recv timeout", "RuntimeError: DeepEP error: timeout "
                         "(dispatch CPU)", "RuntimeError: DeepEP error: timeout (combine CPU)"]),
        st.builds(lambda s, n: f"HYBRID-EP ALLGATHER TIMEOUT:SM {s} [{n}]:expecting 4 got 3", _n, _n),
        st.builds(lambda c, n: c("HybridEP dispatch") + f" timed out after {n} ms", _case, _n),
        st.builds(lambda n: f"ERROR: [Rank {n}] _nixl_agents_connect: timed out after 120000 ms waiting for peers",
                  _n)),
    "network": st.one_of(
        st.sampled_from(["ncclRemoteError: A call failed possibly due to a network error or a remote process "
                         "exiting prematurely.", "ncclSystemError: System call (e.g. socket, malloc) or external "
                         "library call failed or device error.", "ncclInternalError: Internal check failed.",
                         "torch.distributed.DistBackendError: NCCL error in: NCCLUtils.cpp:77, unhandled system "
                         "error"]),
        st.builds(lambda h, n: f"{h}:{n}:{n} [1] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from "
                  f"peer 10.0.0.{n % 250}<4567> with error 12, opcode 0, len 0, vendor err 129 (Recv)", _host, _n),
        st.builds(lambda n: f"ProcessGroupNCCL's watchdog got stuck for {n} seconds without making progress", _n),
        st.builds(lambda n, op: f"Watchdog caught collective operation timeout: WorkNCCL(SeqNum={n}, OpType={op}, "
                  f"NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600100 milliseconds before timing out.", _n,
                  st.sampled_from(["ALLTOALL_BASE", "ALLREDUCE", "_REDUCE_SCATTER_BASE"]))),
    "memory": st.one_of(
        st.builds(lambda n, s: f"Detected {n + 1} oom_kill event{s} in StepId={n}.0. Some of the step tasks have "
                  "been OOM Killed.", _n, st.sampled_from(["", "s"])),
        st.builds(lambda h, n: f"srun: error: {h}: task {n}: Out Of Memory", _host, _n),
        st.builds(lambda n: f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {n} MiB.", _n)),
    "hardware": st.one_of(
        st.builds(lambda n: f"NVRM: Xid (PCI:0000:{n % 99:02d}:00): 79, pid={n}, GPU has fallen off the bus.", _n),
        st.sampled_from(["RuntimeError: CUDA error: uncorrectable ECC error encountered", "uncorrectable memory "
                         "error detected on GPU 3"]),
        st.builds(lambda h: f"srun: error: Node failure on {h}", _host)),
    "preemption": st.builds(lambda n, h, w: f"slurmstepd: error: *** JOB {n} ON {h} CANCELLED AT "
                            f"2026-11-30T08:00:00 DUE TO {w} ***", _n, _host, st.sampled_from(["PREEMPTION",
                                                                                                "JOB REQUEUE"])),
    "signal": st.builds(lambda h, n, w: f"srun: error: {h}: task {n}: {w}", _host, _n,
                        st.sampled_from(["Segmentation fault", "Bus error", "Segmentation fault (core dumped)"])),
    "assertion": st.one_of(
        st.builds(lambda p, n: f"AssertionError: num_moe_experts ({n}) must be divisible by EP", _path, _n),
        st.builds(lambda p, n: f"python: {p}/te/gemm.cu:{n}: void f(): Assertion `x != nullptr' failed.", _path, _n)),
    "dispatcher_kernel": st.builds(
        lambda p, n: f"Assertion failed: {p}/DeepEP/csrc/kernels/internode.cu:{n}, condition: num_rc_per_pe >= 1",
        _path, _n),
    "numerics": st.builds(lambda n, w: f"Rank {n}: found {w} in local grad norm for bucket #0", _n,
                          st.sampled_from(["NaN", "nan", "Inf"])),
}
FAMILY_REASONS = {"memory": {"host_oom", "cuda_oom"}, "hardware": {"hardware_failure", "node_failure"},
                  "network": {"nccl_error", "nccl_timeout"}, "assertion": {"assertion"},
                  "dispatcher_kernel": {"flex_kernel_assertion"}, "numerics": {"nan_inf"},
                  "preemption": {"preempted"}, "signal": {"killed_by_signal:SIGSEGV", "killed_by_signal:SIGBUS"},
                  "dispatcher_timeout": {"dispatcher_timeout"}}


@pytest.mark.parametrize("family", sorted(FAMILY_LINES))
@given(data=st.data())
def test_rewording_within_a_family_keeps_the_reason(family, data):
    line = data.draw(_prefix) + data.draw(FAMILY_LINES[family])
    lines = [iteration_line(i, 200) for i in range(1, 12)] + [line, "srun: error: n1: task 0: Exited with exit code 1"]
    v = classify(parse_lines(lines))
    assert v.reason in FAMILY_REASONS[family], (line, v.reason, v.evidence)
    assert catalogue.family_of(v.reason) == family


# -- the catalogue itself ------------------------------------------------------------------------------------------
def test_every_entry_has_a_known_family_a_source_and_lower_case_triggers():
    for fam, reason, triggers, pattern, source in SIGNATURES:
        assert fam in FAMILIES and reason and source and triggers
        assert all(t == t.lower() for t in triggers)
        re.compile(pattern)
    assert all(catalogue.family_of(r) == catalogue.REASON_FAMILY[r] for r in catalogue.REASONS)


@pytest.mark.parametrize("index", range(len(SIGNATURES)))
@given(data=st.data())
def test_every_match_holds_a_trigger_and_a_needle(index, data):
    entry = catalogue.ENTRIES[index]
    text = data.draw(st.from_regex(entry.pattern))
    hit = entry.pattern.search(text)
    low = text[hit.start():hit.end()].lower()
    assert any(t in low for t in entry.triggers), (entry.reason, text)
    assert any(n.decode() in text.lower() for n in NEEDLES), (entry.reason, text)
