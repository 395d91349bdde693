"""``payload.profile``: a torch.profiler trace of a few steady training steps, for the step-time breakdown.

Megatron-Bridge 0.6 profiles through ``cfg.profiling`` (``ProfilingConfig``, training/profiling.py): with
``use_pytorch_profiler`` its train loop starts a ``torch.profiler.profile`` whose schedule waits until
``profile_step_start``, records up to ``profile_step_end`` and exports a Chrome trace to
``<logger.tensorboard_dir>/../torch_profile/rank-<r>.json.gz``. So the payload points ``tensorboard_dir`` at
``OUT_DIR/profile/tb`` and the trace lands in ``OUT_DIR/profile/torch_profile/``.

Kernel names alone do not tell an expert GEMM from a dense one, so while profiling the expert modules'
``forward`` runs inside ``torch.profiler.record_function("moe_experts")`` (their backward shows up as the autograd
node ``...GroupedLinearBackward``); :mod:`analysis.measure.profile_breakdown` attributes kernels by these names.

Nsight Systems is not used: ``nsys`` is not on every image's PATH (the H200 image the stack was proven on had
none), and the payload cannot wrap itself in it; the trace records ``"tool": "torch.profiler"``.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from contracts.atomic import write_json
from experiments.payload.runtime_info import say
from experiments.payload.spec import VariantSpec

EXPERT_LABEL = "moe_experts"  # record_function name around the expert MLP forward (analysis reads it)
PROFILE_STEPS = 2             # steps recorded; few, so the trace stays a few MB
TRACE_DIR = "profile/torch_profile"


def profile_window(train_iters: int, steps: int = PROFILE_STEPS) -> tuple[int, int]:
    """(profile_step_start, profile_step_end) for Bridge's schedule: the last ``steps`` iterations but one, so the
    recorded steps are steady (after the warm-up of max(3, 10%)) and the final iteration's teardown is outside.

    Raises:
        ValueError: ``train_iters`` too short to leave a warm-up before the window (< steps + 5).
    """
    if train_iters < steps + 5:
        raise ValueError(f"payload.train_iters={train_iters} is too short to profile {steps} steady steps "
                         f"(need >= {steps + 5})")
    end = train_iters - 1
    return end - steps, end


def wanted(spec: VariantSpec) -> bool:
    """Profile this run? ``payload.profile`` is true and this is the variant's first attempt (one run per variant;
    attempts are numbered per variant, CONTRACTS §3)."""
    return spec.profile and spec.mode == "train" and (spec.attempt or 1) == 1


def label_experts(label: str = EXPERT_LABEL) -> list[str]:
    """Wrap ``forward`` of Megatron-Core's expert MLP classes in ``record_function(label)``; returns the classes
    wrapped (idempotent: a wrapped class is not wrapped twice)."""
    import torch
    from megatron.core.transformer.moe import experts

    done = []
    for name in ("TEGroupedMLP", "SequentialMLP", "GroupedMLP"):
        cls = getattr(experts, name, None)
        if cls is None or getattr(cls.forward, "_profile_label", None) == label:
            continue
        original = cls.forward

        @functools.wraps(original)
        def forward(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            with torch.profiler.record_function(label):
                return _original(self, *args, **kwargs)

        forward._profile_label = label  # type: ignore[attr-defined]
        cls.forward = forward
        done.append(name)
    return done


def configure(cfg: Any, spec: VariantSpec, out_dir: Path) -> dict[str, Any] | None:
    """Turn on Bridge's PyTorch profiler on ``cfg`` (rank 0, the window of :func:`profile_window`) when
    :func:`wanted`; returns what was set (for effective_config.json ``profile``), or None."""
    if not wanted(spec):
        return None
    from megatron.bridge.training.config import ProfilingConfig

    start, end = profile_window(spec.train_iters)
    tb = Path(out_dir) / "profile" / "tb"
    tb.mkdir(parents=True, exist_ok=True)
    cfg.logger.tensorboard_dir = str(tb)
    cfg.profiling = ProfilingConfig(use_pytorch_profiler=True, use_nsys_profiler=False, profile_step_start=start,
                                    profile_step_end=end, profile_ranks=[0], record_shapes=False,
                                    pytorch_profiler_collect_shapes=False,
                                    pytorch_profiler_collect_callstack=False)
    wrapped = label_experts()
    say(f"[payload] profile: torch.profiler steps {start}..{end} on rank 0 -> {Path(out_dir) / TRACE_DIR}; "
        f"expert modules labelled {EXPERT_LABEL!r}: {', '.join(wrapped) or 'none found'}")
    request = {"tool": "torch.profiler", "step_start": start, "step_end": end, "trace_dir": TRACE_DIR,
               "expert_label": EXPERT_LABEL, "labelled": wrapped}
    write_json(Path(out_dir) / "profile" / "request.json", request)
    return request
