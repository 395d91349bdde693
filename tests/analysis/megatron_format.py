"""Megatron-LM ``training_log`` iteration lines with any set of loss keys, and the launcher layouts real logs wrap
them in, for the series-health and phase tests.

The field order and number formats are those of megatron/training/training.py ``training_log`` (core_r0.x): the
losses ``' {key}: {avg:.6E} |'`` only when their average is > 0 (so a NaN loss leaves its key out), ``loss scale``,
``grad norm`` only when the optimizer returned one (a skipped fp16 step returns none), then the skipped and NaN
counters of the interval.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

# launcher layouts: none, srun --label ("0: "), torchrun --tee / log prefix ("[default0]:"), Megatron's rank prefix
LAYOUTS = {"plain": "", "srun": "0: ", "torchrun": "[default0]:", "rank": "[rank0]: "}


def megatron_line(i: int, total: int, *, losses: dict[str, float] | None = None, grad: float | None = 1.0,
                  skipped: int = 0, nans: int = 0, step_ms: float = 812.4, loss_scale: float = 1.0,
                  ts: str | None = None, gbs: int = 256, lr: float = 2.5e-4) -> str:
    """One iteration line; ``losses`` in print order (default ``lm loss`` and ``load_balancing_loss``); a loss
    that is NaN, infinite or <= 0 is left out, as ``training_log`` does."""
    losses = {"lm loss": 3.2, "load_balancing_loss": 1.02} if losses is None else losses
    stamp = ts or f"2026-11-30 08:{(i // 60) % 60:02d}:{i % 60:02d}"
    parts = [f" [{stamp}] iteration {i:8d}/{total:8d} |", f" consumed samples: {i * gbs:12d} |",
             f" elapsed time per iteration (ms): {step_ms:.1f} |", " throughput per GPU (TFLOP/s/GPU): 412.7 |",
             f" learning rate: {lr:.6E} |", f" global batch size: {gbs:5d} |"]
    parts += [f" {k}: {v:.6E} |" for k, v in losses.items() if v > 0.0]  # (NaN > 0 is False)
    parts.append(f" loss scale: {loss_scale:.1f} |")
    if grad is not None:
        parts.append(f" grad norm: {grad:.3f} |")
    parts.append(f" number of skipped iterations: {skipped:3d} | number of nan iterations: {nans:3d} |")
    return "".join(parts)


def in_layout(lines: Iterable[str], layout: str) -> list[str]:
    """Each line with the launcher prefix of ``layout`` (a key of LAYOUTS); a line that already starts with a
    prefix of its own (glog, Slurm) gets it in front too, as srun and torchrun add theirs to every line."""
    prefix = LAYOUTS[layout]
    return [prefix + line if prefix else line for line in lines]


HEAD = ["using world size: 16, data-parallel size: 2, context-parallel size: 1, tensor-model-parallel size: 2",
        "  moe_token_dispatcher_type ....................... alltoall",
        "  train_iters ..................................... {total}",
        "[after dataloaders are built] datetime: 2026-11-30 07:59:58",
        "training ..."]
DONE = ["[after training is done] datetime: 2026-11-30 09:00:01",
        "saving checkpoint at iteration {total} to /ckpt in torch_dist format",
        "  successfully saved checkpoint from iteration {total} to /ckpt [ t 1/2, p 1/1 ]"]


def run_log(lines: Sequence[str], total: int, *, done: bool = True, dispatcher: str = "alltoall") -> list[str]:
    """A whole log: Megatron's set-up lines, ``lines``, and the end-of-training lines when ``done``."""
    head = [h.format(total=total).replace("alltoall", dispatcher) for h in HEAD]
    return head + list(lines) + ([d.format(total=total) for d in DONE] if done else [])
