"""Where a run's GPU time goes: the fixed cost before and after its steps, and the share that measured steps.

A run holds its GPUs from the conductor's launch to the moment the conductor sees it end (``conductor.json``,
:mod:`experiments.timeline`). The payload stamps its phases in the log (``[payload] phase <name> at <epoch s>``,
:mod:`experiments.payload.phases`) and Megatron logs each iteration's step time. Together they split the held
time, in seconds:

| part | from | to |
|---|---|---|
| ``launch`` | the conductor's launch | the launcher's start (torchrun), else the payload's start |
| ``startup`` | the launcher's start | the training stack imported: interpreter, worker spawn, imports |
| ``checks`` | imported | the payload's pre-check done |
| ``init`` | checked | Megatron initialised and the model built (train start) |
| ``warmup`` | | the step times of the iterations that are not steady (the first ones: CUDA context, NCCL, JIT) |
| ``steps`` | | the step times of the steady iterations: what the sweep measures |
| ``in_training`` | train start | ``pretrain`` returned, less warm-up and steps (logging, the training loop's own set-up) |
| ``teardown`` | ``pretrain`` returned (else the payload's exit) | the conductor saw the run end |

``steps_share`` = steps / held. A part whose stamps are missing (validate mode prints only ``start`` and
``exit``; a log from before the stamps existed prints none) is None, and the parts that follow it are measured from
the last stamp seen; the held time is known whenever the conductor recorded the run.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from analysis.logs import PHASE_RE

PARTS = ("launch", "startup", "checks", "init", "warmup", "steps", "in_training", "teardown")


@dataclass(frozen=True)
class FixedCost:
    """One run's held GPU time (s) split into :data:`PARTS`; ``steps_share`` in [0, 1]. None: not measured."""

    held_s: float | None = None
    launch_s: float | None = None
    startup_s: float | None = None
    checks_s: float | None = None
    init_s: float | None = None
    warmup_s: float | None = None
    steps_s: float | None = None
    in_training_s: float | None = None
    teardown_s: float | None = None
    steps_share: float | None = None

    def to_json(self) -> dict[str, float | None]:
        return {k: (None if v is None else round(float(v), 4 if k == "steps_share" else 3))
                for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> FixedCost | None:
        if not d:
            return None
        return cls(**{k: d.get(k) for k in cls.__dataclass_fields__})


def phases(texts: Iterable[str]) -> dict[str, float]:
    """Phase name -> epoch s from the payload's stamp lines (``texts``: marker lines of kind ``payload_phase``).
    A restarted run prints its stamps again: the last ``start`` wins, with the stamps after it."""
    out: dict[str, float] = {}
    for text in texts:
        m = PHASE_RE.search(text)
        if m is None:
            continue
        name, at = m.group(1), float(m.group(2))
        if name in ("launcher_start", "start") and "imported" in out:  # a restart: its stamps replace the first's
            out = {}
        out[name] = at
    return out


def _span(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b < a else b - a


def split(stamps: dict[str, float], held: tuple[float, float | None] | None, step_ms: np.ndarray | None,
          steady: np.ndarray | None) -> FixedCost | None:
    """The :class:`FixedCost` of one run.

    ``stamps``: :func:`phases`; ``held``: (launched, ended) epoch s from the conductor (ended None while it runs);
    ``step_ms``: every logged iteration's step time (ms), ``steady``: its steady-iteration mask (same length).
    Returns None when there is neither a held time nor a stamp.
    """
    launched, ended = held if held is not None else (None, None)
    if launched is None and not stamps:
        return None
    first = stamps.get("launcher_start", stamps.get("start"))
    imported, checked, init = stamps.get("imported"), stamps.get("checked"), stamps.get("initialized")
    trained = stamps.get("trained")
    done = trained if trained is not None else stamps.get("exit")
    warm = steps = None
    if step_ms is not None and len(step_ms):
        ms = np.nan_to_num(np.asarray(step_ms, float), nan=0.0)
        mask = np.asarray(steady, bool) if steady is not None and len(steady) == len(ms) else np.zeros(len(ms), bool)
        steps, warm = float(ms[mask].sum()) / 1000.0, float(ms[~mask].sum()) / 1000.0
    in_training = _span(init, trained)
    if in_training is not None:
        in_training = max(0.0, in_training - (warm or 0.0) - (steps or 0.0))
    held_s = _span(launched, ended)
    return FixedCost(
        held_s=held_s,
        launch_s=_span(launched, first),
        startup_s=_span(first, imported),
        checks_s=_span(imported, checked),
        init_s=_span(checked, init),
        warmup_s=warm,
        steps_s=steps,
        in_training_s=in_training,
        teardown_s=_span(done, ended),
        steps_share=(steps / held_s) if steps is not None and held_s else None,
    )


def held_times(conductor_json: Path) -> dict[str, tuple[float, float | None]]:
    """Task (``<variant>.r<repeat>.a<attempt>``) -> (launched, ended) epoch s from ``conductor.json``: the launch
    from the first session that launched it, the end from the last session that saw it end (a resume or collect
    that adopted it). An unreadable file gives {} (it holds timings only)."""
    try:
        doc = json.loads(Path(conductor_json).read_text())
        sessions = list(doc.get("sessions") or [])
    except (OSError, ValueError, AttributeError):
        return {}
    launched: dict[str, float] = {}
    ended: dict[str, float] = {}
    for s in sessions:
        try:
            start = float(s["start"])
            jobs = dict(s.get("jobs") or {})
        except (KeyError, TypeError, ValueError):
            continue
        for task, marks in jobs.items():
            if not isinstance(marks, dict):
                continue
            if "launched" in marks and task not in launched:
                launched[task] = start + float(marks["launched"])
            if "ended" in marks:
                ended[task] = start + float(marks["ended"])
    return {t: (at, ended.get(t)) for t, at in launched.items()}


@dataclass(frozen=True)
class GpuTime:
    """A sweep's GPU time (s, summed over its runs; GPU-seconds per GPU of a run) and the share that measured steps:
    ``held_s``, ``steps_s``, ``steps_share``, and each part of :data:`PARTS` summed over the runs that measured it."""

    runs: int
    held_s: float
    steps_s: float
    steps_share: float | None
    parts_s: dict[str, float]

    def to_json(self) -> dict[str, Any]:
        return {"runs": self.runs, "held_s": round(self.held_s, 3), "steps_s": round(self.steps_s, 3),
                "steps_share": None if self.steps_share is None else round(self.steps_share, 4),
                "parts_s": {k: round(v, 3) for k, v in self.parts_s.items()}}


def total(costs: Iterable[FixedCost | None]) -> GpuTime | None:
    """The sweep's :class:`GpuTime` over the runs whose held time and steps are both known; None when none is."""
    known = [c for c in costs if c is not None and c.held_s is not None and c.steps_s is not None]
    if not known:
        return None
    held = sum(c.held_s or 0.0 for c in known)
    steps = sum(c.steps_s or 0.0 for c in known)
    parts = {p: sum(getattr(c, f"{p}_s") or 0.0 for c in known) for p in PARTS}
    return GpuTime(len(known), held, steps, steps / held if held else None, parts)


DECIDED = ("faster", "slower", "equivalent")


def verdict_cost(held: Iterable[tuple[float | None, int | None]], verdicts: Iterable[str]) -> dict[str, Any] | None:
    """GPU-seconds per decided verdict of a sweep: every run's held time (s) x its GPUs (``held`` = (held_s, GPUs);
    a run of unknown size counts 1 GPU), fixed cost included, over the comparisons whose verdict is decided
    (faster, slower or equivalent). Returns {gpu_s, verdicts, decided, gpu_s_per_decided (None when none is
    decided)}, or None when no run's held time is known."""
    known = [(h, g) for h, g in held if h is not None]
    if not known:
        return None
    gpu_s = float(sum(h * max(int(g or 1), 1) for h, g in known))
    vs = list(verdicts)
    decided = sum(v in DECIDED for v in vs)
    return {"gpu_s": round(gpu_s, 3), "verdicts": len(vs), "decided": decided,
            "gpu_s_per_decided": round(gpu_s / decided, 3) if decided else None}
