"""Failure taxonomy: one primary reason per failed or suspicious run, its evidence lines and secondary flags.

The log is the witness; the scheduler's word (manifest attempt status + exit code) is combined with it and is
never final (CASES C08): a run whose log reaches the final iteration completed training even when Slurm says
FAILED, and a run whose log stops early is never a success even when Slurm says COMPLETED 0:0.

| reason | run status | what it means (source of the rule) |
|---|---|---|
| preflight_reject | pruned / failed | static rules pruned the variant, or validate mode failed (the library's messages) |
| not_run | skipped | gated, skipped or never submitted (carried over from the manifest) |
| config_plumbing | failed | ``AttributeError: 'NoneType' object has no attribute '<knob>'`` before training (C03) |
| payload_error | failed | the payload's own diagnosis ``[payload] error <code> <kind>: <cause>`` (no_gpu, bridge_missing, hf_unreachable, unknown_field, ...); check_failed counts as preflight_reject, mismatch/env_mismatch as label_mismatch or dispatcher_fallback, training_failed defers to the real cause |
| flex_kernel_assertion | failed | C-level assertion in DeepEP/HybridEP kernels, e.g. ``num_rc_per_pe >= num_channels`` (C06) |
| nvshmem_init | failed | NVSHMEM bootstrap/initialisation error (DeepEP internode, HybridEP) |
| dispatcher_unavailable | failed | "DeepEP/HybridEP is not installed" (FACTS §1) |
| cuda_oom | failed | CUDA out of memory |
| dispatcher_timeout | failed | ``DeepEP error: timeout (dispatch CPU)``, ``HYBRID-EP ALLGATHER TIMEOUT``: retriable communication (C07) |
| assertion | failed | Python AssertionError or a C ``Assertion failed`` outside the EP kernels, with its text |
| nccl_timeout | failed | ProcessGroupNCCL watchdog: op, SeqNum, Timeout(ms); path ``ep_all_to_all`` (ALLTOALL, ALLTOALL_BASE) or ``data_parallel`` (ALLREDUCE, REDUCE_SCATTER, ALLGATHER, BROADCAST ...) (C09) |
| nan_inf | failed | NaN/Inf lm loss or grad norm, or NaN iterations counted by Megatron |
| traceback | failed | any other Python exception, with its type (the first exception that is not a launcher echo) |
| node_failure | failed | Slurm NODE_FAIL / "Node failure on" |
| suspected_hang | failed / incomplete | no new iteration for max(600 s, 5 x median step) before a time-limit kill, or while running (C09) |
| slurm_time_limit | failed | ``CANCELLED ... DUE TO TIME LIMIT`` or scheduler state timeout, before the final iteration |
| cancelled | incomplete | cancelled by a user or the scheduler before the final iteration |
| task_exit_code | failed / ok_with_warning | ``srun: error: node: task k: Exited with exit code c`` or a non-zero scheduler exit code |
| hang_at_exit | ok_with_warning | final iteration reached (and ``[after training is done]``), then a time-limit/cancel kill (C08) |
| dispatcher_fallback | invalid_variant | flex backend requested, alltoall ran (``Falling back to alltoall.`` or effective config) (C05) |
| label_mismatch | invalid_variant | requested != effective (effective_config.json, log config dump), outside ``allow_adjust`` (C03) |
| incomplete | incomplete | the log stops before the final iteration with no error, whatever the scheduler says (C08) |
| unrecognized_log | incomplete | the files hold nothing a Megatron/Bridge log prints (another tool's log) |
| logs_unavailable | failed / incomplete | no log file, or none readable |
| insufficient_iterations | insufficient_iterations | fewer than 5 steady iterations (analysis.stats) |

Secondary flags: the other reasons seen, plus ``retriable`` (dispatcher/NCCL timeouts), ``after_training_done``,
``throughput_not_logged``, ``damaged_lines``, ``restarted``, ``adjusted:<field>``, ``scheduler_<state>``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from analysis import catalogue, summaries
from analysis.labels import label_issues
from analysis.markers import EXCEPTION_RE, Marker
from analysis.parse import ParsedLog

# Order in which a reason becomes the primary one (root causes before their consequences: a rank that asserts
# leaves the others in a collective until the NCCL watchdog fires, and torchrun then raises ChildFailedError).
PRIORITY = (
    "config_plumbing",
    "payload_error",
    "preflight_reject",
    "dispatcher_fallback",
    "label_mismatch",
    "flex_kernel_assertion",
    "dispatcher_timeout",  # DeepEP's GPU-side timeouts trap: the "unspecified launch failure" after them is theirs
    "flex_kernel_error",
    "nvshmem_init",
    "dispatcher_unavailable",
    "hardware_failure",
    "node_failure",
    "cuda_oom",
    "host_oom",
    "preempted",
    "assertion",
    "cuda_error",
    "_hard_signal",  # killed_by_signal:SIGSEGV/SIGBUS/SIGILL/SIGFPE: before the NCCL errors the other ranks report
    "nccl_timeout",
    "nccl_error",
    "nan_inf",
    "traceback",
    "killed_by_signal",  # SIGABRT and the rest: after the exception that usually raised them
    "suspected_hang",
    "slurm_time_limit",
    "cancelled",
    "task_exit_code",
)
# the retriable flag follows the reason's catalogue family (analysis.signatures.FAMILIES)
RETRIABLE = frozenset(r for r in PRIORITY if catalogue.retriable(r))
# exceptions that only echo a failure elsewhere (torchrun's agent, c10d after an abort)
_ECHO_EXCEPTIONS = ("ChildFailedError", "DistBackendError", "DistNetworkError", "SignalException")
# knobs whose missing parent config gives the C03 AttributeError (FACTS §1)
_RANK_PREFIX = re.compile(r"^(?:\[(?:rank|default)\d+\]:\s*|\d+:\s+)+")
_PAYLOAD_RE = re.compile(r"\[payload\] error (?P<code>\d+) (?P<kind>\w+): (?P<cause>.*)")
# payload error kinds (experiments/payload/errors.py) -> reasons; every other kind is "payload_error"
_PAYLOAD_REASONS = {"check_failed": "preflight_reject", "mismatch": "label_mismatch", "env_mismatch": "label_mismatch",
                    "interrupted": "cancelled", "training_failed": "_training_failed"}
_PLUMBING_RE = re.compile(r"AttributeError: 'NoneType' object has no attribute '(\w+)'")
_PLUMBING_HINT = re.compile(r"overlap|wgrad|dispatcher|comm_|flex|moe_", re.I)
# a frame or message inside the dispatcher: DeepEP/HybridEP packages, Megatron's fused_a2a wrapper, their kernels
_FLEX_RE = re.compile(r"DeepEP|deep_ep|hybrid[-_]?ep|fused_a2a|internode(?:_ll)?\.cu|intranode\.cu|csrc/kernels", re.I)
# the rank a line is from: "[rank3]:", "[Rank 3]", "Rank 3:", "[default3]:", srun's "3: " label
_RANK_OF = re.compile(r"\[rank(\d+)\]|\bRank (\d+)\b|\[default(\d+)\]|^(\d+): ")
_TIMEOUT_RE = re.compile(r"\btime(?:d)?[ -]?out\b", re.I)
_NCCL_RE = re.compile(r"SeqNum=(?P<seq>\d+), OpType=(?P<op>\w+).*?Timeout\(ms\)=(?P<timeout>\d+)")
_RAN_FOR_RE = re.compile(r"ran for (\d+) milliseconds")
_EP_OPS = frozenset({"ALLTOALL", "ALLTOALL_BASE", "ALLTOALLV", "_ALLTOALL_BASE"})
_DP_OPS = frozenset({
    "ALLREDUCE", "REDUCE_SCATTER", "_REDUCE_SCATTER_BASE", "REDUCE_SCATTER_TENSOR_COALESCED", "ALLGATHER",
    "_ALLGATHER_BASE", "ALLGATHER_INTO_TENSOR_COALESCED", "ALLREDUCE_COALESCED", "BROADCAST", "REDUCE", "COALESCED",
})
_P2P_OPS = frozenset({"SEND", "RECV", "RECVANYSOURCE"})
_CANCEL_AT_RE = re.compile(r"CANCELLED AT (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)")
_HOST_RES = (re.compile(r"\*\*\* (?:JOB|STEP) \S+ ON (\S+) CANCELLED"), re.compile(r"srun: error: ([\w.-]+): task"),
             re.compile(r"Node failure on ([\w.-]+)"))
KILL_EXIT_CODES = frozenset({9, 15, 137, 143})  # SIGKILL / SIGTERM, as Slurm kills at the time limit
FLEX_HINT = ("DeepEP needs one NVSHMEM RC queue pair per channel (channels = SMs / 2): raise "
             "NVSHMEM_IBGDA_NUM_RC_PER_PE, or lower the DeepEP SM count (moe_flex_dispatcher_num_sms, formerly "
             "moe_deepep_num_sms, default 20)")
# Slurm job states (sacct) -> manifest statuses (CONTRACTS §4)
_SLURM_STATES = {
    "COMPLETED": "succeeded", "FAILED": "failed", "TIMEOUT": "timeout", "CANCELLED": "cancelled",
    "PREEMPTED": "cancelled", "REQUEUED": "cancelled", "NODE_FAIL": "failed", "OUT_OF_MEMORY": "failed", "RUNNING": "running",
    "PENDING": "submitted", "BOOT_FAIL": "failed", "DEADLINE": "timeout",
}
EVIDENCE_LINES = 6


@dataclass(frozen=True, slots=True)
class SchedulerInfo:
    """The scheduler's word on an attempt: a manifest status (CONTRACTS §4) or a Slurm state, and the exit code."""

    state: str | None = None
    exit_code: int | None = None
    flags: tuple[str, ...] = ()  # launcher flags on the attempt, e.g. "suspected_hang" (its monitor saw no progress)

    @property
    def status(self) -> str | None:
        """The state as a manifest status (Slurm's ``CANCELLED by 123`` -> cancelled)."""
        if self.state is None:
            return None
        word = self.state.split()[0].rstrip("+")
        return _SLURM_STATES.get(word.upper(), word.lower())


@dataclass(frozen=True)
class Expectation:
    """What the run was meant to be: mode, the requested label (dispatcher/overlap/delay_wgrad/extra axes), the
    variant's resolved settings and allow_adjust, and the planned train_iters."""

    mode: str = "train"
    requested: dict[str, Any] | None = None
    settings: dict[str, Any] | None = None
    allow_adjust: tuple[str, ...] = ("moe_shared_expert_overlap",)
    train_iters: int | None = None


@dataclass(frozen=True)
class Verdict:
    """The classification of one run."""

    status: str
    reason: str | None
    evidence: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    hint: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()


@dataclass
class _Finding:
    evidence: list[str]
    offset: int
    details: dict[str, Any] = field(default_factory=dict)


def is_suspected_hang(last_iteration_age_s: float | None, median_step_ms: float | None, min_s: float = 600) -> bool:
    """True when no new iteration has appeared for longer than max(min_s, 5 x the median step time) (CASES C09).

    ``last_iteration_age_s``: seconds since the last iteration line; ``median_step_ms``: median step time in ms
    (None when unknown: then only ``min_s`` counts). Raises ValueError for a negative age or threshold.
    """
    if last_iteration_age_s is None:
        return False
    if last_iteration_age_s < 0 or min_s < 0:
        raise ValueError(f"age {last_iteration_age_s} s and min_s {min_s} s must be >= 0")
    limit = max(min_s, 5 * (median_step_ms or 0) / 1000.0)
    return last_iteration_age_s > limit


def _before_frame(markers: Sequence[Marker], m: Marker) -> list[str]:
    frames = [f for f in markers if f.kind == "frame" and f.offset < m.offset and f.file == m.file]
    return [frames[-1].text] if frames else []


_CONTEXT_REASONS = frozenset({"flex_kernel_assertion", "flex_kernel_error", "assertion", "cuda_oom", "cuda_error"})


def _in_dispatcher(markers: Sequence[Marker], m: Marker, frames: int = 3, window: int = 16384) -> bool:
    """True when the line or one of the last ``frames`` traceback frames before it (same file, within ``window``
    bytes) is inside DeepEP/HybridEP (``_FLEX_RE``)."""
    if _FLEX_RE.search(m.text):
        return True
    near = [f for f in markers if f.kind == "frame" and f.file == m.file and m.offset - window < f.offset < m.offset]
    return any(_FLEX_RE.search(f.text) for f in near[-frames:])


def _backend(text: str, markers: Sequence[Marker], m: Marker) -> str:
    near = " ".join([text] + _before_frame(markers, m))
    return "HybridEP" if re.search(r"hybrid|nixl", near, re.I) else "DeepEP"


def _signature_details(reason: str, details: dict[str, Any], m: Marker,
                       markers: Sequence[Marker]) -> tuple[str | None, dict[str, Any]]:
    """The reason and details of a catalogue hit, with what the line's context adds: a generic assertion or CUDA
    error inside a DeepEP/HybridEP frame becomes the dispatcher's, the NCCL op gives its path, exit code 0 is no
    failure, a signal names itself."""
    text = m.text
    if "location2" in details or "condition2" in details:
        details.setdefault("location", details.pop("location2", None))
        details.setdefault("condition", details.pop("condition2", None))
    if reason == "assertion":
        if "AssertionError" in text and "location" not in details:
            details["assertion"] = text.split("AssertionError", 1)[1].lstrip(": ").strip() or None
        else:
            details["assertion"] = text
        if _in_dispatcher(markers, m):
            reason = "flex_kernel_assertion"
    elif reason == "cuda_error" and _in_dispatcher(markers, m):
        reason = "flex_kernel_error"
    if reason == "flex_kernel_assertion":
        details.setdefault("assertion", text)
        if "num_rc_per_pe" in (details.get("condition") or text):
            details["hint"] = FLEX_HINT
    elif reason == "flex_kernel_error" and details.get("tokens") is not None:
        details["hint"] = ("HybridEP across NVLink domains holds at most 21844 tokens per rank (IB tx_depth = 3 x "
                           "tokens + 1 < 65536): lower micro_batch_size or seq_length, or raise TP/CP")
    elif reason == "dispatcher_timeout":
        details.update({"backend": _backend(text, markers, m), "retriable": True})
    elif reason == "nan_inf":
        r = _RANK_OF.search(text)
        details["rank"] = int(next(g for g in r.groups() if g is not None)) if r else None
        it = re.search(r"\biteration[ :]+(\d+)", text)
        if it:
            details["iteration"] = int(it.group(1))
    elif reason == "nccl_timeout":
        n = _NCCL_RE.search(text)
        if n:
            op = n.group("op")
            path = ("ep_all_to_all" if op in _EP_OPS else "data_parallel" if op in _DP_OPS
                    else "pipeline_p2p" if op in _P2P_OPS else "other")
            details.update({"op": op, "seq": int(n.group("seq")), "timeout_ms": int(n.group("timeout")), "path": path})
            ran = _RAN_FOR_RE.search(text)
            if ran:
                details["ran_for_ms"] = int(ran.group(1))
    elif reason == "task_exit_code":
        details.setdefault("exit_code", None)
        details["node"] = details.get("host")
        if details["exit_code"] == 0:
            return None, details
    elif reason == "killed_by_signal":
        if details.get("signal") is None:
            return None, details
        reason = f"killed_by_signal:{details['signal']}"
    return reason, details


def _findings(log: ParsedLog) -> dict[str, _Finding]:
    found: dict[str, _Finding] = {}
    markers = log.markers

    def add(reason: str, m: Marker, details: dict[str, Any] | None = None, context: bool = False) -> None:
        if reason in found:
            seen = {_RANK_PREFIX.sub("", e) for e in found[reason].evidence}
            if len(found[reason].evidence) < EVIDENCE_LINES and _RANK_PREFIX.sub("", m.text) not in seen:
                found[reason].evidence.append(m.text)  # the same line from another rank adds nothing
            return
        lines = (_before_frame(markers, m) if context else []) + [m.text]
        found[reason] = _Finding(lines, m.offset, details or {})

    first_iter = log.first_iteration_offset
    for m in markers:
        k = m.kind
        if k == "exception":
            plumbing = _PLUMBING_RE.search(m.text)
            if plumbing and _PLUMBING_HINT.search(plumbing.group(1)) and (first_iter is None or m.offset < first_iter):
                add("config_plumbing", m, {"attribute": plumbing.group(1), "before_training": True}, context=True)
                continue
            exc = EXCEPTION_RE.search(m.text)
            etype = exc.group(1) if exc else "Exception"
            message = exc.group(2).strip() if exc else ""
            if _TIMEOUT_RE.search(message) and _in_dispatcher(markers, m):
                # any timeout raised inside a DeepEP/HybridEP frame is the dispatcher's (family fallback)
                add("dispatcher_timeout", m, {"exception_type": etype, "message": message,
                                              "backend": _backend(m.text, markers, m)}, True)
            elif not any(etype.endswith(e) for e in _ECHO_EXCEPTIONS):
                add("traceback", m, {"exception_type": etype, "message": message}, True)
            else:
                found.setdefault("_echo", _Finding([m.text], m.offset, {"exception_type": etype}))
        elif k == "payload_error":
            p = _PAYLOAD_RE.search(m.text)
            if p:
                reason = _PAYLOAD_REASONS.get(p.group("kind"), "payload_error")
                if reason == "label_mismatch" and re.search(r"moe_token_dispatcher_type requested '?flex'?, effective "
                                                            r"'?alltoall", p.group("cause")):
                    reason = "dispatcher_fallback"
                add(reason, m, {"payload_exit_code": int(p.group("code")), "payload_error": p.group("kind")})
        elif k in catalogue.REASONS:
            hit = catalogue.match(m.text)
            if hit is None:
                continue
            reason, details = _signature_details(k, catalogue.details(*hit), m, markers)
            if reason is not None:
                add(reason, m, details, context=reason in _CONTEXT_REASONS)
    s = log.series
    bad = np.flatnonzero(s.nonfinite | (s.nan_iterations > 0))
    if bad.size:
        i = int(bad[0])
        f = found.setdefault("nan_inf", _Finding([], log.last_iteration_offset or 0, {"rank": None}))
        f.evidence.insert(0, (f"iteration {int(s.iteration[i])}: lm loss {s.lm_loss[i]}, grad norm "
                              f"{s.grad_norm[i]}, nan iterations {max(int(s.nan_iterations[i]), 0)}"
                              + (f" (rank {f.details['rank']})" if f.details.get("rank") is not None else "")))
        f.details.update({"iteration": int(s.iteration[i]), "iterations_affected": int(bad.size)})
    elif "nan_inf" in found and "iteration" not in found["nan_inf"].details and len(s):
        # the NaN check fired before the iteration line was printed: it is the iteration after the last logged one
        found["nan_inf"].details["iteration"] = int(s.iteration[-1]) + 1
    return found


def _hosts(log: ParsedLog) -> tuple[str, ...]:
    hosts: list[str] = []
    for m in log.markers:
        for pattern in _HOST_RES:
            h = pattern.search(m.text)
            if h and h.group(1) not in hosts and h.group(1) != "...":
                hosts.append(h.group(1))
    return tuple(hosts)


def _hang_age_s(log: ParsedLog, found: dict[str, _Finding]) -> float | None:
    """Seconds from the last iteration's timestamp to the time-limit kill, when both are printed."""
    kill = found.get("slurm_time_limit")
    if kill is None or log.last_timestamp is None:
        return None
    at = _CANCEL_AT_RE.search(kill.evidence[-1])
    if at is None:
        return None
    try:
        last = datetime.fromisoformat(log.last_timestamp.replace(" ", "T"))
        return (datetime.fromisoformat(at.group(1)) - last).total_seconds()
    except ValueError:
        return None


def _rank(reason: str) -> int:
    """Position of a reason in PRIORITY (``killed_by_signal:SIGSEGV`` and the other hard signals rank before NCCL)."""
    base, _, sig = reason.partition(":")
    if base == "killed_by_signal" and sig in summaries.HARD_SIGNALS:
        return PRIORITY.index("_hard_signal")
    return PRIORITY.index(base)


def _summarise(log: ParsedLog, found: dict[str, _Finding], scheduler: SchedulerInfo, sched_line: str,
               after: int | None, details: dict[str, Any]) -> None:
    """Fold the structured summaries into ``found`` (analysis.summaries): the scheduler's raw state, torchrun's
    failure table (its root cause's rank, host, exit code and signal go into ``details["torchrun"]``), and what
    each signal means once both are known."""
    state_reason = summaries.scheduler_reason(scheduler.state)
    if state_reason is not None:
        f = found.setdefault(state_reason, _Finding([sched_line], after or 0))
        f.details["scheduler_state"] = scheduler.state
        if state_reason != "cancelled" and "cancelled" in found:
            f.evidence.extend(found.pop("cancelled").evidence)  # the scheduler's own cancel for that reason
    records = summaries.torchrun_failures(log.markers)
    root = summaries.root_failure(records)
    if root is not None:
        offset = root.pop("offset", after or 0)
        for r in records:
            r.pop("offset", None)
        details["torchrun"] = root
        details["torchrun_failures"] = len(records)
        sig = root.get("signal")
        if sig is not None:
            f = found.setdefault(f"killed_by_signal:{sig}", _Finding([], offset))
            f.evidence.insert(0, summaries.describe(root))
            f.details.update({k: root[k] for k in ("rank", "local_rank", "host", "exitcode") if k in root})
            f.details["signal"] = sig
    sched = scheduler.status
    for key in [k for k in found if k.startswith("killed_by_signal:")]:
        sig = key.partition(":")[2]
        target = summaries.signal_reason(sig, [k for k in found if k != key], sched)
        if target == key:
            continue
        f = found.pop(key)
        if target is not None:
            f.details.update({"signal": sig, "inferred_from_signal": True})
            if target == "slurm_time_limit":
                f.details["pre_limit_term"] = True  # the TERM that sbatch --signal=TERM@60 sends (launchers/slurm.py)
            found.setdefault(target, f)


def classify(
    log: ParsedLog | None,
    *,
    scheduler: SchedulerInfo | None = None,
    expect: Expectation | None = None,
    effective: dict[str, Any] | None = None,
    steady_iterations: int | None = None,
    median_step_ms: float | None = None,
    last_log_age_s: float | None = None,
    hang_min_s: float = 600,
    min_steady: int = 5,
) -> Verdict:
    """Classify one attempt (see the module docstring for the taxonomy).

    ``log``: the parsed logs (None when there are none); ``effective``: effective_config.json as a dict;
    ``steady_iterations`` / ``median_step_ms``: from analysis.stats; ``last_log_age_s``: seconds since the log last
    grew (only used while the scheduler says the job runs). Never raises for bad log content.
    """
    expect = expect or Expectation()
    scheduler = scheduler or SchedulerInfo()
    sched = scheduler.status
    sched_line = f"scheduler: {scheduler.state}" + (f", exit code {scheduler.exit_code}"
                                                    if scheduler.exit_code is not None else "")
    if sched == "pruned":
        return Verdict("pruned", "preflight_reject")
    if sched in ("gated", "skipped", "planned") and (log is None or not log.files):
        return Verdict("skipped", "not_run", (f"manifest status: {sched}",))
    if expect.mode == "validate" and effective and isinstance(effective.get("checks"), dict):
        checks = effective["checks"]
        not_run = tuple(f"not run: {n}" for n in checks.get("not_run") or ())
        if checks.get("verdict") == "pass":
            if sched in ("timeout", "cancelled", "lost", "failed"):
                # the checks finished and passed, then the job was stopped (e.g. held past its time limit): the
                # verdict stands, with a warning, like a hang at exit after complete training (CASES C08)
                reason = {"timeout": "slurm_time_limit", "cancelled": "cancelled"}.get(sched, "task_exit_code")
                return Verdict("ok_with_warning", reason, (sched_line,), ("stopped_after_validation",),
                               notes=not_run)
            return Verdict("validated", None, notes=not_run)
        return Verdict("failed", "preflight_reject", tuple(str(m) for m in checks.get("messages") or ())
                       or ("validate mode: checks failed without a message",), ("validate",))
    running = sched in ("running", "submitted")
    if log is None or not log.files or len(log.unreadable) == len(log.files):
        why = ("no log files",) if log is None or not log.files else log.unreadable
        return Verdict("incomplete" if running else "failed", "logs_unavailable", (*why, sched_line))

    found = _findings(log)
    echo = found.pop("_echo", None)
    training_failed = found.pop("_training_failed", None)
    pre = found.get("preflight_reject")
    if expect.mode == "train" and pre is not None and "assertion" in found \
            and pre.details.get("payload_error") == "check_failed":
        # a training run whose library check asserted (e.g. Bridge's CommOverlapConfig at EP=1, forced through with
        # preflight=off): the primary reason is the library's own assertion; the payload's diagnosis stays a flag
        found.pop("preflight_reject")
    s = log.series
    last_it = int(s.iteration[-1]) if len(s) else None
    target = log.train_iters or expect.train_iters or _int(log.config.get("train_iters"))
    complete = last_it is not None and target is not None and last_it >= target
    after = log.last_iteration_offset
    flags: list[str] = []
    notes = list(log.notes)
    details: dict[str, Any] = {}
    if log.tflops_source is None and len(s):
        flags.append("throughput_not_logged")
    if log.damaged_lines:
        flags.append("damaged_lines")
    if log.restart_first_iterations:
        flags.append("restarted")
    if sched and sched not in ("succeeded",):
        flags.append(f"scheduler_{sched}")
    issues, adjusted = label_issues(expect, effective, log)
    flags += [f"adjusted:{a}" for a in adjusted]

    _summarise(log, found, scheduler, sched_line, after, details)
    failures = sorted((r for r in found if r.split(":", 1)[0] in PRIORITY), key=_rank)
    if sched == "timeout" and "slurm_time_limit" not in found:
        found["slurm_time_limit"] = _Finding([sched_line], after or 0)
        failures.append("slurm_time_limit")
    hang_age = _hang_age_s(log, found)
    if not complete and hang_age is not None and is_suspected_hang(hang_age, median_step_ms, hang_min_s):
        found["suspected_hang"] = _Finding(
            [f"last iteration at {log.last_timestamp}, killed {hang_age:.0f} s later"], after or 0,
            {"last_iteration_age_s": hang_age})
        failures.insert(failures.index("slurm_time_limit"), "suspected_hang")
    if not complete and "suspected_hang" in scheduler.flags and "suspected_hang" not in found:
        found["suspected_hang"] = _Finding(["the launcher flagged a suspected hang: no new iteration for "
                                            "max(hang_min_s, 5 x median step)"], after or 0)
        failures.insert(0, "suspected_hang")
        failures.sort(key=_rank)
    if "training_done" in log.marker_counts:
        details["training_done"] = True

    def verdict(status: str, reason: str | None, extra_evidence: Sequence[str] = ()) -> Verdict:
        f = found.get(reason) if reason else None
        evidence = list(f.evidence if f else ()) + [e for e in extra_evidence if e]
        d = dict(details)
        if f:
            d.update(f.details)
        hint = d.pop("hint", None)
        others = [r for r in failures if r != reason]
        if any(catalogue.retriable(r) for r in [reason, *others]):
            others.append("retriable")
        all_flags = tuple(dict.fromkeys(others + flags + [i[0] for i in issues if i[0] != reason]))
        return Verdict(status, reason, tuple(evidence[:EVIDENCE_LINES + 2]), all_flags, hint, d, tuple(notes),
                       _hosts(log))

    if complete:
        post = [r for r in failures if found[r].offset > (after or -1)]
        killed = sched in ("timeout", "cancelled", "lost") or scheduler.exit_code in KILL_EXIT_CODES
        status, reason = "ok", None
        if any(r in ("slurm_time_limit", "cancelled", "nccl_timeout", "suspected_hang") for r in post) or killed:
            status, reason = "ok_with_warning", "hang_at_exit"
            found["hang_at_exit"] = _Finding(
                [m.text for m in log.markers_of("training_done")][:1]
                + [found[r].evidence[-1] for r in post if r in ("slurm_time_limit", "cancelled", "nccl_timeout")],
                after or 0)
        elif post:
            status, reason = "ok_with_warning", post[0]
        elif sched == "failed" or (scheduler.exit_code not in (None, 0)):
            status, reason = "ok_with_warning", "task_exit_code"
            found.setdefault("task_exit_code", _Finding([], after or 0, {"exit_code": scheduler.exit_code}))
        if status == "ok_with_warning":
            flags.append("after_training_done")
        if "nan_inf" in found:
            return verdict("failed", "nan_inf")
        if issues:
            reason0, text0 = issues[0]
            found[reason0] = _Finding([t for r, t in issues if r == reason0], 0)
            return verdict("invalid_variant", reason0)
        if steady_iterations is not None and steady_iterations < min_steady:
            return verdict("insufficient_iterations", "insufficient_iterations",
                           [f"{steady_iterations} steady iteration(s); at least {min_steady} are needed"])
        return verdict(status, reason, [sched_line] if status != "ok" and sched else [])
    if failures:
        reason = failures[0]
        status = ("incomplete" if reason in ("cancelled", "preempted") else
                  "invalid_variant" if reason in ("label_mismatch", "dispatcher_fallback") else "failed")
        messages = [str(x) for x in ((effective or {}).get("checks") or {}).get("messages") or ()]
        return verdict(status, reason, (messages if reason == "preflight_reject" else []) + ([sched_line] if sched
                                                                                             else []))
    if training_failed is not None:
        found["traceback"] = training_failed
        failures.append("traceback")
        return verdict("failed", "traceback", [sched_line] if sched else [])
    if echo is not None:
        found["traceback"] = echo
        failures.append("traceback")
        return verdict("failed", "traceback", [sched_line] if sched else [])
    progress = f"last iteration {last_it} of {target}" if last_it is not None else "no iteration line"
    if running:
        if is_suspected_hang(last_log_age_s, median_step_ms, hang_min_s):
            found["suspected_hang"] = _Finding([f"{progress}; the log has not grown for {last_log_age_s:.0f} s"], 0,
                                               {"last_iteration_age_s": last_log_age_s})
            return verdict("incomplete", "suspected_hang", [sched_line])
        return verdict("incomplete", "incomplete", [f"{progress}; the job is still {sched}", sched_line])
    if sched in ("cancelled", "lost"):
        found[sched] = _Finding([progress], 0)
        return verdict("incomplete", "cancelled" if sched == "cancelled" else "incomplete", [sched_line])
    if sched == "failed" or scheduler.exit_code not in (None, 0):
        found["task_exit_code"] = _Finding([progress], 0, {"exit_code": scheduler.exit_code})
        return verdict("failed", "task_exit_code", [sched_line])
    if not log.recognized:
        notes.append("no Megatron or Megatron-Bridge line found: is this a training log?")
        return verdict("incomplete", "unrecognized_log", [progress, sched_line] if sched else [progress])
    return verdict("incomplete", "incomplete", [f"{progress}; no error in the log", sched_line if sched else ""])


def _int(value: Any) -> int | None:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None
