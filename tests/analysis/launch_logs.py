"""Real-format logs of runs stopped by a signal, for the launch-context tests, in several layouts.

Formats: Megatron's graceful exit (megatron/training/training.py ``train``: ``save_checkpoint_and_time`` prints
``saving checkpoint at iteration N to DIR in torch_dist format`` and ``successfully saved checkpoint from
iteration N to DIR [ t 1/1, p 1/1 ]``, then ``print_datetime('exiting program after receiving SIGTERM.')``, i.e.
``[exiting program after receiving SIGTERM.] datetime: YYYY-mm-dd HH:MM:SS``); torchrun's agent on a death signal
(torch/distributed/elastic/agent/server/api.py, multiprocessing/api.py: glog-prefixed ``Received 15 death signal,
shutting down workers``, ``Sending process P closing signal SIGTERM``, then ``SignalException: Process P got
signal: 15``); srun's per-task exit report (SchedMD/slurm src/srun: ``srun: error: <node>: task 0: Exited with
exit code 1``). Layouts: srun ``--label`` (``0: ``), torchrun ``--tee`` (``[default0]:``), PyTorch ``[rank0]:``,
no prefix (tests/analysis/timeline_logs.py).
"""

from __future__ import annotations

from tests.analysis import timeline_logs as tl


def graceful_exit(layout: str, it: int, seconds: float) -> list[str]:
    """Megatron saving a checkpoint at ``it`` and exiting on its signal handler, ``seconds`` after START."""
    p = tl.prefix(layout, 0)
    return [p + f"saving checkpoint at iteration {it:7d} to /ckpt in torch_dist format",
            p + f"  successfully saved checkpoint from iteration {it:7d} to /ckpt [ t 1/1, p 1/1 ]",
            p + f"[exiting program after receiving SIGTERM.] datetime: {tl.dated(seconds)} "]


def agent_signal(seconds: float, sig: str = "15", workers: int = 4) -> list[str]:
    """torchrun's agent receiving ``sig``, closing its workers, and the SignalException it exits 1 with."""
    lines = [tl.glog_agent(seconds) + f" Received {sig} death signal, shutting down workers"]
    lines += [tl.glog_agent(seconds, "torch/distributed/elastic/multiprocessing/api.py:900")
              + f" Sending process {7800 + w} closing signal SIGTERM" for w in range(workers)]
    num = {"SIGTERM": 15, "Signals.SIGTERM": 15}.get(sig, sig)
    return lines + [f"torch.distributed.elastic.multiprocessing.api.SignalException: Process 7731 got signal: {num}"]


def srun_exit(code: int = 1, task: int = 0, host: str = "node-a") -> str:
    return f"srun: error: {host}: task {task}: Exited with exit code {code}"


def run(layout: str, n: int, total: int, ending: list[str], *, header: tuple[str, ...] = (),
        step_s: float = 1.0) -> list[str]:
    """A run of ``n`` iterations of ``total`` (one per ``step_s`` s) followed by ``ending``."""
    return list(header) + tl.setup(layout) + tl.iterations(n, total, layout, step_s=step_s) + ending
