"""The launch context of a run, read from its log (and the scheduler's word when there is one): which launcher ran
it, what the Slurm job asked for, how it was stopped, and so what each signal means.

Sources of the rules:

- ``*** JOB|STEP <id> ON <node> CANCELLED AT <time>( DUE TO <REASON>)? ***``: SchedMD/slurm
  src/slurmd/slurmstepd/req.c (``_handle_signal_container``): the batch step prints ``JOB <id>``, every other step
  ``STEP <id>.<step>``; ``DUE TO`` TIME LIMIT, PREEMPTION, JOB REQUEUE, NODE FAILURE (newer releases add TASK
  FAILURE, the step cancelled because one of its tasks failed); with no ``DUE TO`` the step got a SIGTERM or
  SIGKILL by request: ``scancel`` (then the batch step prints the JOB line too) or a ``--signal`` delivery to the
  steps only (a STEP line alone).
- srun's teardown after a task fails (src/srun, ``--kill-on-bad-exit``): ``srun: error: <node>: task 3: Exited
  with exit code 1``, ``srun: Terminating StepId=12.0`` (``Terminating job step`` before 21.08),
  ``srun: error: <node>: tasks 0-2: Terminated``, ``srun: Force Terminated StepId=``, ``srun: Job step aborted:
  Waiting up to 32 seconds for job step to finish.``: every line after the first failed task is its consequence.
  The same lines follow any kill (a cancel, the time limit): they count as teardown only after a task failed.
- ``#SBATCH --signal=[{R|B}:]<sig>[@<sec>]`` and ``#SBATCH --time`` (sbatch(1)): the job asked Slurm to send
  ``<sig>`` ``<sec>`` s (default 60) before its time limit; only such a job gets a pre-limit TERM.
- torchrun (torch/distributed/elastic/agent/server/api.py ``run``): ``Received <sig> death signal, shutting down
  workers`` (``Signals.SIGTERM`` or the number, e.g. ``Received 1 death signal`` = SIGHUP, as Python formats
  the enum); the agent then sends its workers ``closing signal SIGTERM``.
- Megatron (megatron/training/training.py, ``--exit-signal-handler``; ``train`` checks
  ``get_signal_handler().signals_received()`` after each step, calls ``save_checkpoint_and_time`` and then
  ``print_datetime('exiting program after receiving SIGTERM.')``; Megatron-Bridge's ``barrier_and_log`` prints the
  same words): ``[exiting program after receiving SIGTERM.] datetime: ...`` is its graceful exit on the signal its
  handler listens for (the text says SIGTERM whatever ``--exit-signal`` was). Slurm prints nothing when it delivers
  a ``--signal`` (sbatch(1): the signal is sent, no ``CANCELLED`` line), so the job then ends COMPLETED 0, FAILED 1
  (a launcher that exits non-zero after its workers) or TIMEOUT, before its last iteration.

Meaning of a soft signal (:func:`signal_meaning`): SIGHUP = the launching terminal or ssh session went away,
SIGINT = an interrupt (Ctrl-C), both ``cancelled``; a SIGTERM (or SIGINT) after another task's failure is its echo
(no reason of its own); a SIGTERM in a Slurm job that asked for that signal before its limit (``--signal``), or a
STEP-only cancel followed by Megatron's graceful exit, is the pre-limit warning (``slurm_time_limit``); so is
Megatron's graceful exit alone in a job that asked for a soft signal (whatever cancel lines follow it: they are the
end of that job; a plain JOB cancel printed *before* it is an ``scancel`` that caused it); any other SIGTERM is a
stop from outside (``cancelled``). Printed after training ended, a soft signal is teardown noise.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from analysis.logs import Marker

CANCEL_RE = re.compile(r"\*\*\* (?P<entity>JOB|STEP) (?P<id>\S+) (?:ON (?P<host>\S+) )?CANCELLED AT (?P<at>\S+)"
                       r"(?: DUE TO (?P<due>[A-Z][A-Z_ ]*[A-Z]))?")
# DUE TO <reason> -> the run's reason (TASK FAILURE: the step's teardown after a failed task, not a cause)
DUE_TO_REASONS = {"TIME LIMIT": "slurm_time_limit", "PREEMPTION": "preempted", "JOB REQUEUE": "preempted",
                  "NODE FAILURE": "node_failure", "NODE FAIL": "node_failure", "TASK FAILURE": "task_exit_code"}
_SIGNAL_DIRECTIVE = re.compile(r"--signal[= ](?:[RB]+:)*(?:SIG)?(?P<sig>[A-Z0-9]+)(?:@(?P<lead>\d+))?", re.I)
_TIME_DIRECTIVE = re.compile(r"(?:--time[= ]|-t\s+)(?P<limit>[\d:-]+)")
_TEARDOWN_RE = re.compile(r"srun: (?:launch/\w+: _step_signal: )?(?:Force )?Terminat(?:ing|ed) (?:StepId=|job step)"
                          r"|Job step aborted: Waiting up to \d+ seconds", re.I)
# a task that failed on its own, the only thing srun's teardown lines answer (a kill prints "Job step aborted:
# Waiting up to N seconds" too, and "Terminated" for every task it stopped: those are no task failure)
_TASK_FAILED_RE = re.compile(r"srun: error: \S+: tasks? [\d,\-\[\]]+: (?:Exited with exit code [1-9]|Segmentation fault"
                             r"|Aborted|Bus error|Floating point exception|Illegal instruction)|DUE TO TASK FAILURE")
_GRACEFUL_RE = re.compile(r"exiting program after receiving (?P<sig>SIG\w+)")
_TORCHRUN_RE = re.compile(r"torch[./]distributed[./]elastic|torchrun|ChildFailedError|^\s*\[default\d+\]:")
_SLURM_RE = re.compile(r"slurmstepd|\bsrun: |\bsalloc: |\bsbatch: |#SBATCH|SLURM_JOB_ID|StepId=")
_SIGNUMS = {"1": "SIGHUP", "2": "SIGINT", "9": "SIGKILL", "10": "SIGUSR1", "12": "SIGUSR2", "15": "SIGTERM"}
SOFT_SIGNALS = frozenset({"SIGTERM", "SIGINT", "SIGHUP", "SIGUSR1", "SIGUSR2"})


@dataclass(frozen=True, slots=True)
class CancelLine:
    """One ``CANCELLED AT`` line: ``entity`` JOB or STEP, the job/step ``id``, ``host``, ``at`` (Slurm's time
    text), ``due`` (the DUE TO words, None for a plain cancel), its byte ``offset`` and ``text``."""

    entity: str
    id: str
    host: str | None
    at: str
    due: str | None
    offset: int
    text: str


@dataclass(frozen=True)
class LaunchContext:
    """What launched the run and how it ended (module docstring).

    ``launcher``: ``slurm``, ``torchrun``, ``slurm+torchrun`` or ``unknown``; ``signal_asked``: the signal the job
    asked for before its limit (``SIGTERM``) and ``signal_lead_s`` (s before the limit), from ``#SBATCH --signal``
    or the scheduler; ``time_limit``: the ``--time`` text; ``cancels``: every ``CANCELLED AT`` line;
    ``teardown``: srun killed the step after a task failed (its lines seen); ``graceful_exit``: the signal of
    Megatron's graceful exit, when printed.
    """

    launcher: str = "unknown"
    signal_asked: str | None = None
    signal_lead_s: int | None = None
    time_limit: str | None = None
    cancels: tuple[CancelLine, ...] = ()
    teardown: bool = False
    graceful_exit: str | None = None
    lines: tuple[str, ...] = field(default=())
    graceful_offset: int | None = None  # byte offset of Megatron's graceful-exit line

    @property
    def pre_limit_graceful(self) -> bool:
        """Megatron exited gracefully in a Slurm job that asked for a soft signal before its limit (``--signal``):
        the pre-limit stop it asked for, unless a plain JOB cancel (an ``scancel``) was printed before it."""
        if self.graceful_exit is None or not self.slurm or self.signal_asked not in SOFT_SIGNALS:
            return False
        job = self.job_cancel
        return job is None or self.graceful_offset is None or job.offset > self.graceful_offset

    @property
    def slurm(self) -> bool:
        return "slurm" in self.launcher

    @property
    def job_cancel(self) -> CancelLine | None:
        """The plain (no DUE TO) JOB cancel line: an ``scancel`` of the whole job."""
        return next((c for c in self.cancels if c.entity == "JOB" and c.due is None), None)

    @property
    def step_only_cancel(self) -> CancelLine | None:
        """A plain STEP cancel line when no JOB line was printed (a ``--signal`` delivery or a step's scancel)."""
        if any(c.entity == "JOB" for c in self.cancels):
            return None
        return next((c for c in self.cancels if c.entity == "STEP" and c.due is None), None)

    def to_json(self) -> dict[str, Any]:
        """summary.json ``runs[].launch`` (docs/CONTRACTS.md §7)."""
        return {"launcher": self.launcher, "signal_asked": self.signal_asked, "signal_lead_s": self.signal_lead_s,
                "time_limit": self.time_limit, "teardown": self.teardown, "graceful_exit": self.graceful_exit,
                "cancels": [{"entity": c.entity, "id": c.id, "host": c.host, "at": c.at, "due": c.due}
                            for c in self.cancels]}


def read(markers: Sequence[Marker], scheduler_state: str | None = None, scheduler_signal: str | None = None,
         ) -> LaunchContext:
    """The launch context of a run from its kept markers; ``scheduler_state``: a Slurm state the scheduler
    reported (then it was a Slurm job); ``scheduler_signal``: the ``--signal`` spec the launcher asked for
    (``TERM@60``), when known. Never raises."""
    slurm = scheduler_signal is not None or bool(scheduler_state and scheduler_state.split()[0].isupper())
    torchrun = False
    sig = lead = limit = graceful = graceful_at = None
    cancels: list[CancelLine] = []
    teardown = task_failed = False
    for m in markers:
        text = m.text
        if not slurm and _SLURM_RE.search(text):
            slurm = True
        if not torchrun and (m.kind == "torchrun_summary" or _TORCHRUN_RE.search(text)):
            torchrun = True
        if c := CANCEL_RE.search(text):
            cancels.append(CancelLine(c.group("entity"), c.group("id"), c.group("host"), c.group("at"),
                                      c.group("due"), m.offset, text))
        if "#SBATCH" in text:
            if s := _SIGNAL_DIRECTIVE.search(text):
                sig, lead = _signal(s.group("sig")), int(s.group("lead") or 60)
            if t := _TIME_DIRECTIVE.search(text):
                limit = t.group("limit")
        if _TASK_FAILED_RE.search(text):
            task_failed = True
        elif task_failed and _TEARDOWN_RE.search(text):
            teardown = True  # counted only after a task failed: the same lines follow every kill
        if graceful is None and (g := _GRACEFUL_RE.search(text)):
            graceful, graceful_at = g.group("sig"), m.offset
    if sig is None and scheduler_signal:
        head, _, tail = scheduler_signal.partition("@")
        sig, lead = _signal(head.split(":")[-1]), int(tail or 60)
    launcher = "slurm+torchrun" if slurm and torchrun else "slurm" if slurm else "torchrun" if torchrun else "unknown"
    return LaunchContext(launcher, sig, lead, limit, tuple(cancels), teardown, graceful, (), graceful_at)


def _signal(word: str) -> str:
    w = word.upper().removeprefix("SIG")
    return _SIGNUMS.get(w, f"SIG{w}")


def cancel_meaning(ctx: LaunchContext, other_failure_before: bool) -> tuple[str | None, str]:
    """What a plain (no DUE TO) ``CANCELLED AT`` means: (reason or None when it is only teardown, why).

    ``other_failure_before``: another failure (a task's exit code, an exception) precedes the cancel line."""
    if ctx.pre_limit_graceful and not other_failure_before:
        return "slurm_time_limit", (f"Megatron exited gracefully on the pre-limit {ctx.signal_asked} the job asked "
                                    f"for (--signal, {ctx.signal_lead_s} s before); the cancel lines are its end")
    if ctx.job_cancel is not None:
        return "cancelled", "scancel of the job (the batch step printed the JOB line)"
    if other_failure_before or ctx.teardown:
        return None, "srun tore the step down after a task failed"
    if ctx.step_only_cancel is not None and (ctx.graceful_exit or ctx.signal_asked):
        return "slurm_time_limit", ("the pre-limit signal the job asked for (--signal), delivered to the steps"
                                    + (f"; Megatron exited gracefully on {ctx.graceful_exit}" if ctx.graceful_exit
                                       else ""))
    return "cancelled", "the step was cancelled by request (scancel of the step)"


def signal_meaning(sig: str, ctx: LaunchContext, *, echo_of: str | None, complete: bool,
                   scheduler_kill: bool) -> tuple[str | None, str]:
    """What a signal the run received means: (reason or None when it has no reason of its own, why).

    ``echo_of``: the failure that precedes it (then it is that failure's echo); ``complete``: training reached
    its last iteration; ``scheduler_kill``: a scheduler line or state already names the stop (time limit,
    preemption, cancel, node failure, OOM). Hard signals (SIGSEGV ...) are always ``killed_by_signal:<sig>``."""
    if sig not in SOFT_SIGNALS and sig != "SIGKILL":
        return f"killed_by_signal:{sig}", "a fatal signal of the process itself"
    if scheduler_kill:
        return None, "the scheduler's stop, already named"
    if echo_of is not None:
        return None, f"teardown after {echo_of}"
    if complete:
        return None, "teardown after training ended"
    if sig == "SIGKILL":
        return "host_oom", "SIGKILL with no scheduler kill: most often the kernel's OOM killer"
    if sig == "SIGHUP":
        return "cancelled", "SIGHUP: the launching terminal or ssh session went away"
    if sig == "SIGINT":
        return "cancelled", "SIGINT: interrupted (Ctrl-C)"
    if ctx.slurm and ctx.signal_asked == sig:
        return "slurm_time_limit", f"the pre-limit {sig} the job asked for (--signal, {ctx.signal_lead_s} s before)"
    if sig == "SIGTERM" and ctx.pre_limit_graceful:
        return "slurm_time_limit", (f"Megatron's graceful exit on the pre-limit {ctx.signal_asked} the job asked for "
                                    f"(--signal, {ctx.signal_lead_s} s before its limit)")
    if ctx.slurm and ctx.step_only_cancel is not None and ctx.graceful_exit:
        return "slurm_time_limit", "a STEP-only cancel with Megatron's graceful exit: the pre-limit signal"
    where = "a Slurm job" if ctx.slurm else "no scheduler line" if ctx.launcher == "unknown" else ctx.launcher
    return "cancelled", f"{sig} from outside ({where}; nothing names a time limit)"
