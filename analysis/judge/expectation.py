"""What a run was meant to be, as the sweep planned it: the input the classifier and the label check share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Expectation:
    """What the run was meant to be: mode, the requested label (dispatcher/overlap/delay_wgrad/extra axes), the
    variant's resolved settings and allow_adjust, and the planned train_iters."""

    mode: str = "train"
    requested: dict[str, Any] | None = None
    settings: dict[str, Any] | None = None
    allow_adjust: tuple[str, ...] = ("moe_shared_expert_overlap",)
    train_iters: int | None = None
