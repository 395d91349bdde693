"""Evidence from a parsed log, before any verdict: which signatures matched where, with the details each one
carries (rank, op, timeout, host), and the context a marker sits in (a DeepEP/HybridEP frame). The verdict itself
is :func:`analysis.judge.classify.classify`."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np

from analysis.judge import health, structure
from analysis.judge.records import Finding
from analysis.logs import EXCEPTION_RE, Marker, ParsedLog, catalogue, decode

_ECHO_EXCEPTIONS = ("ChildFailedError", "DistBackendError", "DistNetworkError", "SignalException")
# knobs whose missing parent config gives the C03 AttributeError (FACTS §1)
_RANK_PREFIX = re.compile(r"^(?:\[(?:rank|default)\d+\]:\s*|\d+:\s+)+")
_PAYLOAD_RE = re.compile(r"\[payload\] error (?P<code>\d+) (?P<kind>\w+): (?P<cause>.*)")
# payload error kinds (experiments/payload/errors.py) -> reasons; every other kind is "payload_error"
_PAYLOAD_REASONS = {"check_failed": "preflight_reject", "mismatch": "label_mismatch", "env_mismatch": "label_mismatch",
                    "interrupted": "cancelled", "training_failed": "_training_failed"}
# the payload's diagnosis as its effective_config.json records it: "payload: <kind> (<code>): <cause>"
PAYLOAD_DOC_RE = re.compile(r"payload: (?P<kind>\w+) \((?P<code>\d+)\): ")


def payload_reason(kind: str) -> str:
    """The failure reason of a payload error ``kind`` (experiments/payload/errors.py): the library's own check is
    ``preflight_reject``, a label problem ``label_mismatch``, an interrupt ``cancelled``; every other kind (an
    environment gap such as ``core_missing`` or ``bridge_missing``, a bad variant file, ...) is ``payload_error``."""
    reason = _PAYLOAD_REASONS.get(kind, "payload_error")
    return "payload_error" if reason.startswith("_") else reason


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
EVIDENCE_LINES = 6


def _before_frame(markers: Sequence[Marker], m: Marker) -> list[str]:
    frames = [f for f in markers if f.kind == "frame" and f.offset < m.offset and f.file == m.file]
    return [frames[-1].text] if frames else []


_CONTEXT_REASONS = frozenset({"flex_kernel_assertion", "flex_kernel_error", "assertion", "cuda_oom", "cuda_error"})
# wrappers whose text may carry the real cause (analysis.logs.codes): the cause becomes a finding of its own and the
# wrapper its consequence (``caused_by``, read by analysis.judge.timeline.order)
_WRAPPERS = frozenset({"nccl_error", "flex_kernel_error", "nvshmem_init", "cuda_error", "dispatcher_unavailable"})
_LAUNCH_LAYERS = (("spank", "spank"), ("pyxis", "pyxis"), ("enroot", "enroot"), ("prolog", "prolog"),
                  ("epilog", "epilog"), ("execve", "exec"), ("command not found", "exec"), ("launch", "srun"),
                  ("create step", "srun"), ("allocate resources", "srun"), (": line ", "exec"))


def _in_dispatcher(markers: Sequence[Marker], m: Marker, frames: int = 3, window: int = 16384) -> bool:
    """True when the line, one of the last ``frames`` traceback frames before it, or one of the C++ frames that
    follow it (c10::Error prints its frames after the message; same file, within ``window`` bytes) is inside
    DeepEP/HybridEP (``_FLEX_RE``)."""
    if _FLEX_RE.search(m.text):
        return True
    near = [f for f in markers if f.kind in ("frame", "cpp_frame") and f.file == m.file
            and m.offset - window < f.offset < m.offset]
    after = [f for f in markers if f.kind == "cpp_frame" and f.file == m.file and m.offset < f.offset < m.offset
             + window][:4 * frames]
    return any(_FLEX_RE.search(f.text) for f in near[-frames:] + after)


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
        elif structure.is_device_assert(text) or (details.get("condition") and "location" not in details):
            # a bare device-side assert: the run's dispatcher decides whose kernel it is (analysis.judge.classify)
            details["device_assert"] = True
    elif reason == "hardware_failure" and structure.xid_reason(details.get("xid")) == "cuda_error":
        reason = "cuda_error"  # an Xid the driver reports for an application's own fault (analysis.judge.structure)
        details["xid_application"] = True
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


def _findings(log: ParsedLog) -> dict[str, Finding]:
    found: dict[str, Finding] = {}
    markers = log.markers

    def add(reason: str, m: Marker, details: dict[str, Any] | None = None, context: bool = False) -> None:
        if reason in found:
            if details and "caused_by" in details:
                found[reason].details.setdefault("caused_by", details["caused_by"])
            if len(found[reason].offsets) < 4 * EVIDENCE_LINES:
                found[reason].offsets.append(m.offset)
            seen = {_RANK_PREFIX.sub("", e) for e in found[reason].evidence}
            if len(found[reason].evidence) < EVIDENCE_LINES and _RANK_PREFIX.sub("", m.text) not in seen:
                found[reason].evidence.append(m.text)  # the same line from another rank adds nothing
            return
        lines = (_before_frame(markers, m) if context else []) + [m.text]
        found[reason] = Finding(lines, m.offset, details or {}, [m.offset])

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
                found.setdefault("_echo", Finding([m.text], m.offset, {"exception_type": etype}))
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
            if reason is None:
                continue
            cause = decode(m.text) if reason in _WRAPPERS else None
            if cause is not None and cause.reason == "cuda_error" and reason == "flex_kernel_error":
                cause = None  # the dispatcher kernel's own CUDA error: the kernel is the more specific reason
            if cause is not None and cause.reason != reason:
                add(cause.reason, m, {"decoded_from": reason, "cause": cause.cause, "code": cause.code,
                                      "layer": cause.layer}, context=cause.reason in _CONTEXT_REASONS)
                details["caused_by"] = cause.reason
            elif reason == "nccl_error" and re.search(r"(?i)UnhandledCudaError|unhandled cuda error", m.text):
                details["caused_by"] = "cuda"  # ncclUnhandledCudaError: a CUDA call failed (its cause follows)
            elif reason == "launch_failure":
                low = m.text.lower()
                details["layer"] = next((layer for word, layer in _LAUNCH_LAYERS if word in low), "launch")
            add(reason, m, details, context=reason in _CONTEXT_REASONS)
    s = log.series
    bad = np.flatnonzero(s.nonfinite | (s.nan_iterations > 0))
    if bad.size:
        i = int(bad[0])
        f = found.setdefault("nan_inf", Finding([], log.last_iteration_offset or 0, {"rank": None}))
        f.evidence.insert(0, (f"iteration {int(s.iteration[i])}: lm loss {s.lm_loss[i]}, grad norm "
                              f"{s.grad_norm[i]}, nan iterations {max(int(s.nan_iterations[i]), 0)}"
                              + (f" (rank {f.details['rank']})" if f.details.get("rank") is not None else "")))
        f.details.update({"iteration": int(s.iteration[i]), "iterations_affected": int(bad.size)})
    elif "nan_inf" in found and "iteration" not in found["nan_inf"].details and len(s):
        # the NaN check fired before the iteration line was printed: it is the iteration after the last logged one
        found["nan_inf"].details["iteration"] = int(s.iteration[-1]) + 1
    for h in health.series_findings(s, log.restart_first_iterations):  # the series' own health (analysis.judge.health)
        f = found.setdefault(h.reason, Finding([], log.last_iteration_offset or 0, {"rank": None}
                                                if h.reason == "nan_inf" else {}))
        if h.reason == "nan_inf" and "iteration" in f.details and f.details["iteration"] <= h.iteration:
            f.evidence.append(h.evidence)  # an earlier NaN already named; the vanished key backs it
            continue
        f.evidence.insert(0, h.evidence)
        f.details.update({"iteration": h.iteration, **h.details})
    return found


def _hosts(log: ParsedLog) -> tuple[str, ...]:
    hosts: list[str] = []
    for m in log.markers:
        for pattern in _HOST_RES:
            h = pattern.search(m.text)
            if h and h.group(1) not in hosts and h.group(1) != "...":
                hosts.append(h.group(1))
    return tuple(hosts)


def _hang_age_s(log: ParsedLog, found: dict[str, Finding]) -> float | None:
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
