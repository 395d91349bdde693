"""Real-format failure logs for the timeline and launch-context tests, in several layouts.

Every line copies a real format: Megatron ``training_log`` iteration lines (``[2026-12-02 10:00:01] iteration N/
M | ...``), PyTorch ProcessGroupNCCL watchdog lines with their c10 prefix (``[E1202 10:38:07.123456
ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(...)``), torchrun's agent
and ChildFailedError record (torch/distributed/elastic), srun/slurmstepd lines (SchedMD/slurm src/srun,
src/slurmd/slurmstepd/req.c) and Megatron's ``print_datetime`` lines. Layouts: srun ``--label`` (``3: ``), torchrun
``--tee`` (``[default3]:``), PyTorch's ``[rank3]:``, and no prefix.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from tests.analysis.synth import iteration_line

START = datetime(2026, 12, 2, 10, 0, 0)
LAYOUTS = ("srun", "torchrun", "rank", "none")


def prefix(layout: str, rank: int) -> str:
    """The line prefix of ``rank`` in ``layout``."""
    return {"srun": f"{rank}: ", "torchrun": f"[default{rank}]:", "rank": f"[rank{rank}]:", "none": ""}[layout]


def at(seconds: float) -> datetime:
    return START + timedelta(seconds=seconds)


def dated(seconds: float) -> str:
    return at(seconds).strftime("%Y-%m-%d %H:%M:%S")


def slurm_time(seconds: float) -> str:
    return at(seconds).strftime("%Y-%m-%dT%H:%M:%S")


def glog(level: str, seconds: float, where: str = "ProcessGroupNCCL.cpp:616") -> str:
    t = at(seconds)
    return f"[{level}{t.month:02d}{t.day:02d} {t.strftime('%H:%M:%S')}.{t.microsecond:06d}123 {where}]"


def glog_agent(seconds: float, where: str = "torch/distributed/elastic/agent/server/api.py:719") -> str:
    t = at(seconds)
    return f"W{t.month:02d}{t.day:02d} {t.strftime('%H:%M:%S')}.{t.microsecond:06d} 4242 {where}]"


def iterations(n: int, total: int, layout: str = "none", rank: int = 7, step_s: float = 1.0) -> list[str]:
    """``n`` iteration lines of the last rank, one per ``step_s`` seconds from START."""
    return [prefix(layout, rank) + iteration_line(i, total, ts=dated(i * step_s), prefix="").lstrip()
            for i in range(1, n + 1)]


def setup(layout: str = "none") -> list[str]:
    return [prefix(layout, 0) + "INFO:megatron.core.transformer.moe: moe_token_dispatcher_type: flex",
            prefix(layout, 0) + "training ..."]


def exception(layout: str, rank: int, etype: str = "ValueError", message: str = "bad shape (4, 7) for expert 3",
              stamp: float | None = None) -> list[str]:
    """A Python traceback of ``rank`` (a Python logging stamp on its first line when ``stamp`` is given)."""
    p = prefix(layout, rank)
    head = f"{dated(stamp)},123 - ERROR - " if stamp is not None else ""
    return [p + head + "Traceback (most recent call last):",
            p + '  File "/opt/Megatron-Bridge/src/megatron/bridge/training/train.py", line 412, in train_step',
            p + "    losses = forward_backward_func(",
            p + f"{etype}: {message}"]


def watchdog(layout: str, rank: int, seconds: float, op: str = "ALLTOALL_BASE", seq: int = 216,
             timeout_ms: int = 600000) -> str:
    """ProcessGroupNCCL's watchdog line of ``rank``, firing ``seconds`` after START."""
    return (prefix(layout, rank) + glog("E", seconds) + f" [Rank {rank}] Watchdog caught collective operation "
            f"timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn=1379328, NumelOut=1572864, "
            f"Timeout(ms)={timeout_ms}) ran for {timeout_ms + 12} milliseconds before timing out.")


def torchrun_record(seconds: float, rank: int, exitcode: int = 1, host: str = "gpu-a-01",
                    other: tuple[int, int] | None = None) -> list[str]:
    """torchrun's ChildFailedError summary with its root-cause record (and another failure, ``(rank, exitcode)``)."""
    t = at(seconds).strftime("%Y-%m-%d_%H:%M:%S")
    tb = "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"
    lines = ["Traceback (most recent call last):",
             '  File "/usr/local/bin/torchrun", line 8, in <module>',
             "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
             "============================================================",
             "/opt/Megatron-Bridge/scripts/performance/run_script.py FAILED",
             "------------------------------------------------------------",
             "Failures:"]
    if other is not None:
        lines += ["[1]:", f"  time      : {t}", f"  host      : {host}", f"  rank      : {other[0]} (local_rank: "
                  f"{other[0]})", f"  exitcode  : {other[1]} (pid: 91233)", "  error_file: <N/A>",
                  f"  traceback : {tb}"]
    else:
        lines.append("  <NO_OTHER_FAILURES>")
    lines += ["------------------------------------------------------------", "Root Cause (first observed failure):",
              "[0]:", f"  time      : {t}", f"  host      : {host}", f"  rank      : {rank} (local_rank: {rank})",
              f"  exitcode  : {exitcode} (pid: 91230)", "  error_file: <N/A>", f"  traceback : {tb}",
              "============================================================"]
    return lines


def cancel(entity: str, seconds: float, due: str | None = None, job: int = 77, host: str = "node01") -> str:
    """slurmstepd's cancel line (``entity`` JOB or STEP)."""
    what = f"JOB {job}" if entity == "JOB" else f"STEP {job}.0"
    tail = f" DUE TO {due}" if due else ""
    return f"slurmstepd: error: *** {what} ON {host} CANCELLED AT {slurm_time(seconds)}{tail} ***"


def death_signal(seconds: float, sig: str) -> list[str]:
    """torchrun's agent receiving ``sig`` (``Signals.SIGTERM`` or a number) and its SignalException."""
    num = {"SIGHUP": 1, "SIGINT": 2, "SIGTERM": 15}.get(sig.removeprefix("Signals."), sig)
    return [glog_agent(seconds) + f" Received {sig} death signal, shutting down workers",
            glog_agent(seconds, "torch/distributed/elastic/multiprocessing/api.py:897")
            + " Sending process 91230 closing signal SIGTERM",
            f"torch.distributed.elastic.multiprocessing.api.SignalException: Process 4242 got signal: {num}"]
