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
| launch_failure | failed | pyxis/enroot, SPANK, prolog/epilog or exec failed: the run never reached Python (family ``launch``) |
| flex_kernel_assertion | failed | C-level assertion in DeepEP/HybridEP kernels, e.g. ``num_rc_per_pe >= num_channels`` (C06) |
| nvshmem_init | failed | NVSHMEM bootstrap/initialisation error (DeepEP internode, HybridEP) |
| dispatcher_unavailable | failed | "DeepEP/HybridEP is not installed" (FACTS §1) |
| cuda_oom | failed | CUDA out of memory |
| dispatcher_timeout | failed | ``DeepEP error: timeout (dispatch CPU)``, ``HYBRID-EP ALLGATHER TIMEOUT``: retriable communication (C07) |
| assertion | failed | Python AssertionError or a C ``Assertion failed`` outside the EP kernels, with its text |
| nccl_timeout | failed | ProcessGroupNCCL watchdog: op, SeqNum, Timeout(ms); path ``ep_all_to_all`` (ALLTOALL, ALLTOALL_BASE) or ``data_parallel`` (ALLREDUCE, REDUCE_SCATTER, ALLGATHER, BROADCAST ...) (C09) |
| nan_inf | failed | NaN/Inf lm loss or grad norm, NaN iterations counted by Megatron, or a loss key that vanishes (analysis.judge.health) |
| diverged | failed | loss / grad norm at orders of magnitude above their own running level, and staying there (analysis.judge.health) |
| traceback | failed | any other Python exception, with its type (the first exception that is not a launcher echo) |
| node_failure | failed | Slurm NODE_FAIL / "Node failure on" |
| suspected_hang | failed / incomplete | no new iteration for max(600 s, 5 x median step) before a time-limit kill, or while running (C09) |
| slurm_time_limit | failed | ``CANCELLED ... DUE TO TIME LIMIT`` or scheduler state timeout, before the final iteration |
| cancelled | incomplete | cancelled by a user or the scheduler before the final iteration |
| task_exit_code | failed / ok_with_warning | ``srun: error: node: task k: Exited with exit code c`` or a non-zero scheduler exit code |
| hang_at_exit | ok_with_warning | final iteration reached (and ``[after training is done]``), then a time-limit/cancel kill (C08) |
| slowdown | ok_with_warning | complete, but the last quarter's step time is >= 2x the first's (analysis.judge.health) |
| dispatcher_fallback | invalid_variant | flex backend requested, alltoall ran (``Falling back to alltoall.`` or effective config) (C05) |
| label_mismatch | invalid_variant | requested != effective (effective_config.json, log config dump), outside ``allow_adjust`` (C03) |
| incomplete | incomplete | the log stops before the final iteration with no error, whatever the scheduler says (C08) |
| unrecognized_log | incomplete | the files hold nothing a Megatron/Bridge log prints (another tool's log) |
| logs_unavailable | failed / incomplete | no log file, or none readable |
| insufficient_iterations | insufficient_iterations | fewer than 5 steady iterations (analysis.measure.stats) |

Severity and phase (analysis.judge.phase): error-level findings rank before warning-level ones; warning-level findings
after the final iteration of a complete run are teardown noise (flag ``teardown_noise``, the run stays ok).

Secondary flags: the other reasons seen, plus ``retriable`` (the primary reason's family is: network, dispatcher
timeout, hardware, preemption; read from the cause inside a wrapper, analysis.logs.codes), ``slowdown``,
``after_training_done``, ``teardown_noise``, ``throughput_not_logged``, ``damaged_lines``, ``restarted``, ``adjusted:<field>``, ``scheduler_<state>``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from analysis.judge import launch_context, phase, structure, summaries, timeline
from analysis.judge.expectation import Expectation
from analysis.judge.findings import (
    EVIDENCE_LINES,
    FLEX_HINT,
    KILL_EXIT_CODES,
    PAYLOAD_DOC_RE,
    _findings,
    _hosts,
    payload_reason,
)
from analysis.judge.labels import label_issues
from analysis.judge.records import Finding
from analysis.logs import EXCEPTION_RE, ParsedLog, catalogue
from analysis.options import is_suspected_hang
from contracts.slurm import STATES as SLURM_STATES
from contracts.slurm import manifest_status, state_word

# Order in which a reason becomes the primary one (root causes before their consequences: a rank that asserts
# leaves the others in a collective until the NCCL watchdog fires, and torchrun then raises ChildFailedError).
PRIORITY = (
    "config_plumbing",
    "payload_error",
    "preflight_reject",
    "dispatcher_fallback",
    "label_mismatch",
    "launch_failure",  # the launch layer below Python: nothing of the run started (analysis.logs.signatures)
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
    "diverged",  # loss / grad norm left their own running level by orders of magnitude (analysis.judge.health)
    "traceback",
    "killed_by_signal",  # SIGABRT and the rest: after the exception that usually raised them
    "suspected_hang",
    "slurm_time_limit",
    "cancelled",
    "task_exit_code",
)
# reasons a verdict gives outside the priority order: a run that never ran, ended well with a warning, or says
# nothing of a failure
OUTCOME_REASONS = ("not_run", "hang_at_exit", "slowdown", "incomplete", "unrecognized_log", "logs_unavailable",
                   "insufficient_iterations")
# catalogue findings that never become a run's reason: evidence only
EVIDENCE_ONLY = frozenset({"memory_limit_warning", "slurm_rpc_error", "nvshmem_config"})


def vocabulary() -> tuple[str, ...]:
    """Every reason a verdict can give (``runs[].reason``, docs/CONTRACTS.md §4 and docs/REPORT.md are tested
    against it): PRIORITY in its order, ``killed_by_signal:<SIG>`` for the signals (its name is the signal's), then
    OUTCOME_REASONS."""
    failures = tuple("killed_by_signal:<SIG>" if r == "killed_by_signal" else r for r in PRIORITY
                     if r != "_hard_signal")
    return failures + OUTCOME_REASONS


# the retriable flag follows the reason's catalogue family (analysis.logs.signatures.FAMILIES)
RETRIABLE = frozenset(r for r in PRIORITY if catalogue.retriable(r))
# exceptions that only echo a failure elsewhere (torchrun's agent, c10d after an abort)
@dataclass(frozen=True, slots=True)
class SchedulerInfo:
    """The scheduler's word on an attempt: a manifest status (CONTRACTS §4) or a Slurm state, and the exit code."""

    state: str | None = None
    exit_code: int | None = None
    flags: tuple[str, ...] = ()  # launcher flags on the attempt, e.g. "suspected_hang" (its monitor saw no progress)
    signal: str | None = None  # the sbatch --signal spec the launcher asked for (``TERM@60``), when known
    ended_at: str | None = None  # when the scheduler saw the attempt end (``YYYY-MM-DDTHH:MM:SS``, the cluster's clock)
    # the cluster's Slurm timeouts (s; None when unknown: the judgement uses slurm.conf(5)'s defaults), read at
    # collect time (launchers.slurm_timeouts): how late a NODE_FAIL, time-limit or preemption line may come
    kill_wait_s: float | None = None
    slurmd_timeout_s: float | None = None
    grace_time_s: float | None = None

    @property
    def status(self) -> str | None:
        """The state as a manifest status (Slurm's ``CANCELLED by 123`` -> cancelled)."""
        if self.state is None:
            return None
        word = state_word(self.state)  # the one Slurm state map (contracts.slurm); manifest statuses pass through
        return str(manifest_status(word)) if word in SLURM_STATES else self.state.split()[0].lower()


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
    timeline: dict[str, Any] | None = None  # analysis.judge.timeline.Timeline.to_json: cause, then consequences
    launch: dict[str, Any] | None = None  # analysis.judge.launch_context.LaunchContext.to_json


def _rank(reason: str) -> int:
    """Position of a reason in PRIORITY (``killed_by_signal:SIGSEGV`` and the other hard signals rank before NCCL)."""
    base, _, sig = reason.partition(":")
    if base == "killed_by_signal" and sig in summaries.HARD_SIGNALS:
        return PRIORITY.index("_hard_signal")
    return PRIORITY.index(base)


def _summarise(log: ParsedLog, found: dict[str, Finding], scheduler: SchedulerInfo, sched_line: str,
               after: int | None, details: dict[str, Any]) -> dict[str, Any] | None:
    """Fold the structured summaries into ``found`` (analysis.judge.summaries): the scheduler's raw state and torchrun's
    failure table (its root cause's rank, host, exit code and signal go into ``details["torchrun"]``); returns the
    root-cause record (None without a table). What each signal means is read afterwards, in its launch context
    (analysis.judge.timeline.read)."""
    state_reason = summaries.scheduler_reason(scheduler.state)
    if state_reason is not None:
        f = found.setdefault(state_reason, Finding([sched_line], after or 0))
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
            f = found.setdefault(f"killed_by_signal:{sig}", Finding([], offset))
            f.evidence.insert(0, summaries.describe(root))
            f.details.update({k: root[k] for k in ("rank", "local_rank", "host", "exitcode") if k in root})
            f.details["signal"] = sig
    return root


def _in_priority(base: str) -> bool:
    return base in PRIORITY


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
    ``steady_iterations`` / ``median_step_ms``: from analysis.measure.stats; ``last_log_age_s``: seconds since the log last
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
        not_run = tuple(n if str(n).startswith("not checked: ") else f"not run: {n}" for n in checks.get("not_run") or ())
        issues, _ = label_issues(expect, effective, log)
        if issues and checks.get("verdict") == "pass":
            # the checks passed for what the payload ran, which is not the arm the manifest labels it (C03):
            # judged like a training run's label check, before any verdict of the checks themselves
            return Verdict("invalid_variant", issues[0][0], tuple(text for _, text in issues), ("validate",),
                           notes=not_run)
        if checks.get("verdict") == "pass":
            if sched in ("timeout", "cancelled", "lost", "failed"):
                # the checks finished and passed, then the job was stopped (e.g. held past its time limit): the
                # verdict stands, with a warning, like a hang at exit after complete training (CASES C08)
                reason = {"timeout": "slurm_time_limit", "cancelled": "cancelled"}.get(sched, "task_exit_code")
                return Verdict("ok_with_warning", reason, (sched_line,), ("stopped_after_validation",),
                               notes=not_run)
            return Verdict("validated", None, notes=not_run)
        messages = tuple(str(m) for m in checks.get("messages") or ())
        diagnosed = next((d for d in map(PAYLOAD_DOC_RE.match, messages) if d), None)
        if diagnosed and str(effective.get("written_at", "")).startswith("error"):
            # the payload stopped before the config was built (its own diagnosis, CONTRACTS §5.1): an environment
            # gap such as megatron.core missing where the job ran is no rejection of the configuration
            return Verdict("failed", payload_reason(diagnosed.group("kind")), messages, ("validate",))
        return Verdict("failed", "preflight_reject", messages or ("validate mode: checks failed without a message",),
                       ("validate",))
    running = sched in ("running", "submitted")
    if sched == "cancelled" and (log is None or not log.files):
        # cancelled before it wrote a log (a pending job the user cancelled, Ctrl-C locally): no result, and not
        # a failure of the run either: nothing ran, so there is nothing to judge
        who = "by the user" if "cancelled_by_user" in scheduler.flags else (
            "by Ctrl-C" if "interrupted" in scheduler.flags else "")
        return Verdict("cancelled", "cancelled", (f"cancelled {who} before it wrote a log".replace("  ", " "),
                                                  sched_line))
    if log is None or not log.files or len(log.unreadable) == len(log.files):
        why = ("no log files",) if log is None or not log.files else log.unreadable
        return Verdict("incomplete" if running else "failed", "logs_unavailable", (*why, sched_line))

    found = _findings(log)
    _attribute_device_assert(found, structure.effective_dispatcher(expect, effective, log))
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

    root = _summarise(log, found, scheduler, sched_line, after, details)
    levels = {r: phase.finding_level(f.evidence) for r, f in found.items()}
    ctx = launch_context.read(log.markers, scheduler.state, scheduler.signal)
    def level_then_priority(r: str) -> tuple[bool, int]:
        """Error-level findings before warning-level ones (analysis.judge.phase), then by PRIORITY."""
        return levels.get(r) == phase.WARNING, _rank(r)

    failures, chain, read_flags = timeline.read(
        log, found, ctx, sched=sched, sched_line=sched_line, complete=complete, median_step_ms=median_step_ms,
        hang_min_s=hang_min_s, ended_at=scheduler.ended_at, launcher_flags=scheduler.flags, priority=_in_priority,
        rank_key=level_then_priority, root=root,
        slurm=timeline.SlurmTimeouts.of(kill_wait_s=scheduler.kill_wait_s, slurmd_timeout_s=scheduler.slurmd_timeout_s,
                                        grace_time_s=scheduler.grace_time_s))
    flags += read_flags
    if failures and failures[0] == "traceback" and chain.cause is not None:
        _exception_of(found["traceback"], chain.cause.line)
    chain_json, launch_json = chain.to_json(), ctx.to_json()
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
        if catalogue.retriable(reason):  # the primary reason's, decoded from inside its wrapper (analysis.logs.codes)
            others.append("retriable")
        if "slowdown" in found and reason != "slowdown":
            others.append("slowdown")
        all_flags = tuple(dict.fromkeys(others + flags + [i[0] for i in issues if i[0] != reason]))
        return Verdict(status, reason, tuple(evidence[:EVIDENCE_LINES + 2]), all_flags, hint, d, tuple(notes),
                       _hosts(log), chain_json if chain.cause is not None and chain.cause.reason == reason else None,
                       launch_json)

    if complete:
        post = [r for r in failures if found[r].offset > (after or -1)]
        noise = [r for r in post if phase.is_teardown_noise(r, found[r].evidence)]
        if noise:  # warnings printed while the process groups were torn down: not the run's result
            post = [r for r in post if r not in noise]
            failures = [r for r in failures if r not in noise]
            flags.append("teardown_noise")
        killed = sched in ("timeout", "cancelled", "lost") or scheduler.exit_code in KILL_EXIT_CODES
        status, reason = "ok", None
        if any(r in ("slurm_time_limit", "cancelled", "nccl_timeout", "suspected_hang") for r in post) or killed:
            status, reason = "ok_with_warning", "hang_at_exit"
            found["hang_at_exit"] = Finding(
                [m.text for m in log.markers_of("training_done")][:1]
                + [found[r].evidence[-1] for r in post if r in ("slurm_time_limit", "cancelled", "nccl_timeout")],
                after or 0)
        elif post:
            status, reason = "ok_with_warning", post[0]
        elif sched == "failed" or (scheduler.exit_code not in (None, 0)):
            status, reason = "ok_with_warning", "task_exit_code"
            found.setdefault("task_exit_code", Finding([], after or 0, {"exit_code": scheduler.exit_code}))
        elif "slowdown" in found:  # the step time climbed and stayed (analysis.judge.health): a result, with a warning
            status, reason = "ok_with_warning", "slowdown"
        if status == "ok_with_warning":
            flags.append("after_training_done")
        if "nan_inf" in found:
            return verdict("failed", "nan_inf")
        if "diverged" in found:  # the numbers of a diverged run are no result, even when it ran to the end
            return verdict("failed", "diverged")
        if issues:
            reason0, text0 = issues[0]
            found[reason0] = Finding([t for r, t in issues if r == reason0], 0)
            return verdict("invalid_variant", reason0)
        if steady_iterations is not None and steady_iterations < min_steady:
            return verdict("insufficient_iterations", "insufficient_iterations",
                           [f"{steady_iterations} steady iteration(s); at least {min_steady} are needed"])
        return verdict(status, reason, [sched_line] if status != "ok" and sched else [])
    if failures:
        reason = failures[0]
        if reason == "launch_failure":
            found[reason].details["reached_python"] = bool(len(s)) or "exception" in log.marker_counts
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
            found["suspected_hang"] = Finding([f"{progress}; the log has not grown for {last_log_age_s:.0f} s"], 0,
                                               {"last_iteration_age_s": last_log_age_s})
            return verdict("incomplete", "suspected_hang", [sched_line])
        return verdict("incomplete", "incomplete", [f"{progress}; the job is still {sched}", sched_line])
    if sched in ("cancelled", "lost"):
        found[sched] = Finding([progress], 0)
        return verdict("incomplete", "cancelled" if sched == "cancelled" else "incomplete", [sched_line])
    if sched == "failed" or scheduler.exit_code not in (None, 0):
        found["task_exit_code"] = Finding([progress], 0, {"exit_code": scheduler.exit_code})
        return verdict("failed", "task_exit_code", [sched_line])
    if not log.recognized:
        notes.append("no Megatron or Megatron-Bridge line found: is this a training log?")
        return verdict("incomplete", "unrecognized_log", [progress, sched_line] if sched else [progress])
    return verdict("incomplete", "incomplete", [f"{progress}; no error in the log", sched_line if sched else ""])


def _exception_of(f: Finding, line: str) -> None:
    """Make ``line`` (the timeline's cause) the traceback finding's first evidence and its exception details."""
    exc = EXCEPTION_RE.search(line)
    if exc is None:
        return
    f.details.update({"exception_type": exc.group(1), "message": exc.group(2).strip()})
    if line in f.evidence:
        f.evidence.remove(line)
    f.evidence.insert(1 if len(f.evidence) > 1 and "File \"" in f.evidence[0] else 0, line)


def _attribute_device_assert(found: dict[str, Finding], dispatcher: tuple[str | None, str | None]) -> None:
    """A bare device-side assertion (no DeepEP/HybridEP frame; analysis.judge.structure) whose condition names
    DeepEP's variables, or in a run whose effective dispatcher is flex in a kernel that is not another library's
    (its condition names no PyTorch variable), is the flex kernel's: ``assertion`` becomes
    ``flex_kernel_assertion`` (``attributed_by``: ``identifiers`` or ``effective_dispatcher``)."""
    f = found.get("assertion")
    kind, backend = dispatcher
    if f is None or not f.details.get("device_assert") or "flex_kernel_assertion" in found:
        return
    by_name = structure.kernel_of_condition(f.details.get("condition"))
    if by_name == "foreign" or (by_name is None and kind != "flex"):
        return
    if by_name is None and structure.foreign_kernel(f.details.get("location"), f.evidence[-1] if f.evidence else ""):
        return
    f.details.update({"attributed_by": "identifiers" if by_name == "flex" else "effective_dispatcher",
                      "backend": {"hybridep": "HybridEP"}.get(backend or "", "DeepEP")})
    if "num_rc_per_pe" in str(f.details.get("condition") or f.details.get("assertion") or ""):
        f.details["hint"] = FLEX_HINT
    found["flex_kernel_assertion"] = found.pop("assertion")


def _int(value: Any) -> int | None:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None
