"""``payload.train_iters=auto``: stop a run once its steady step time is known to the precision a verdict needs.

After each iteration n (Megatron-Bridge's ``on_train_step_end`` callback, which fires on every rank after the
step and before the step counter advances; megatron/bridge/training/train.py 0.6.2, the ``while step <
train_iters`` loop at line 377, the callback at 497-510, the increment at 564), the rule looks at the wall time
between consecutive step ends (ms; the first step: from its start):

- warm-up: the analysis' own rule, ``contracts.steady.default_warmup(n)`` iterations dropped (the report later
  drops the same ones, since it applies the rule to the last logged iteration);
- the 95% distribution-free interval of the median of the steady steps (``contracts.steady.median_interval``,
  the interval the report checks its bootstrap against); once at least MIN_STEADY steady steps are in and the
  interval's half-width is at most ``precision`` of the median, the run stops after this iteration, by lowering
  ``cfg.train.train_iters`` to n (the loop's own bound, so Megatron ends the loop and returns normally);
- ``max_iters`` is the cap: ``train_iters`` as planned, which also sets the learning-rate schedule.

On several ranks the decision is rank 0's, broadcast every step (one int on the GPU) so every rank stops at the
same iteration; on one rank nothing is communicated.

The default precision, +-0.5%, is a quarter of the default 2% practical threshold: the run-to-run noise between
runs of the same config is about that large (0.4-1.1% between blocks of moe_bench_h200 on an H100, 0.3-0.5% on the
H200), so a longer run would not make a block's verdict sharper.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from contracts.steady import default_warmup, median_interval

MIN_STEADY = 8  # steady steps before the rule may stop a run (the report needs >= 5)
DEFAULT_PRECISION = 0.005  # relative half-width of the median's 95% interval
DEFAULT_MAX_ITERS = 60


@dataclass
class StopRule:
    """The stopping rule over step durations (ms); :meth:`add` returns True when the run may stop after it."""

    precision: float = DEFAULT_PRECISION
    max_iters: int = DEFAULT_MAX_ITERS
    min_steady: int = MIN_STEADY
    steps_ms: list[float] = field(default_factory=list)

    def add(self, ms: float) -> bool:
        self.steps_ms.append(float(ms))
        return self.done()

    def interval(self) -> tuple[float, float, float, int] | None:
        """(median, low, high, steady count) of the steady steps so far, or None before MIN_STEADY of them."""
        n = len(self.steps_ms)
        steady = self.steps_ms[default_warmup(n):]
        if len(steady) < self.min_steady:
            return None
        med, lo, hi = median_interval(steady)
        return med, lo, hi, len(steady)

    def done(self) -> bool:
        got = self.interval()
        if got is None:
            return False
        med, lo, hi, _ = got
        return max(med - lo, hi - med) <= self.precision * med


class AutoIters:
    """The ``on_train_step_end`` hook: times each step, applies :class:`StopRule`, lowers ``train_iters``."""

    def __init__(self, rule: StopRule, say: Any):
        self.rule, self.say = rule, say
        self.last: float | None = None
        self.stopped_at: int | None = None

    def step_start(self) -> None:
        if self.last is None:
            self.last = time.perf_counter()

    def step_end(self, cfg: Any, step: int) -> None:
        """``step``: Megatron's ``train_state.step`` before its increment (iteration ``step + 1`` just ran)."""
        now = time.perf_counter()
        stop = self.rule.add(1000 * (now - (self.last if self.last is not None else now)))
        self.last = now
        stop = _agree(stop)
        if stop and self.stopped_at is None:
            n = step + 1
            self.stopped_at = n
            med, lo, hi, k = self.rule.interval() or (0.0, 0.0, 0.0, 0)
            cfg.train.train_iters = n
            self.say(f"[payload] train_iters=auto: stop after iteration {n} of at most {self.rule.max_iters}: "
                     f"median step {med:.1f} ms, 95% [{lo:.1f}, {hi:.1f}] over {k} steady steps "
                     f"(+-{100 * max(med - lo, hi - med) / med:.2f}% <= {100 * self.rule.precision:.2f}%)")


def _agree(stop: bool) -> bool:
    """Rank 0's decision on every rank (a broadcast of one int), or ``stop`` itself without a process group."""
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        return stop
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return stop
    flag = torch.tensor([1 if stop else 0], dtype=torch.int32, device="cuda")
    dist.broadcast(flag, src=0)
    return bool(flag.item())
