"""The top-level keys of conf/config.yaml, validated (CONTRACTS §1): :class:`SweepSettings`.

The CLI reads them from the one Hydra composition of its command line (:func:`experiments.compose.compose_overrides`)
and dispatches on :attr:`SweepSettings.effective_action`. Kept apart from the planner so that ``action=status``,
``cancel``, ``collect`` and a resume read them without importing the planner's expansion and rule table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from contracts.errors import ConfigError
from experiments.config import ACTIONS, MODES, PREFLIGHT, one_of

SWEEP_ID_RE = re.compile(r"^\d{8}-\d{6}Z-[0-9a-f]{6}$")


@dataclass(frozen=True, kw_only=True)
class SweepSettings:
    """Top-level keys of conf/config.yaml (CONTRACTS §1), validated."""

    action: str
    dry_run: bool
    sweep_id: str | None
    output_dir: str | None
    results_root: str
    preflight: str
    mode: str | None
    repeats: int | str
    pack: bool
    detach: bool
    allow_dirty: bool
    max_gpu_hours: float
    hang_action: str
    hang_min_s: float
    poll_s: float
    control: bool = False
    collect_job: bool = True
    max_blocks: int = 6
    block_seed: int | None = None
    practical_threshold: float = 0.02
    reference_gate: bool = False
    prune_below_ceiling: bool = False
    ceiling_from: str | None = None

    def __post_init__(self) -> None:
        one_of("action", self.action, ACTIONS)
        one_of("preflight", self.preflight, PREFLIGHT)
        if self.mode is not None:
            one_of("mode", self.mode, MODES)
        one_of("hang_action", self.hang_action, ("cancel", "flag"))
        if self.repeats != "auto" and (not isinstance(self.repeats, int) or isinstance(self.repeats, bool)
                                       or self.repeats < 1):
            raise ConfigError(f"repeats={self.repeats!r} must be an integer >= 1 (blocks) or auto")
        if not isinstance(self.max_blocks, int) or isinstance(self.max_blocks, bool) or self.max_blocks < 3:
            raise ConfigError(f"max_blocks={self.max_blocks!r} must be an integer >= 3 (the adaptive design looks "
                              "after block 2 and needs at least one look after it)")
        if self.block_seed is not None and (not isinstance(self.block_seed, int) or isinstance(self.block_seed, bool)
                                            or self.block_seed < 0):
            raise ConfigError(f"block_seed={self.block_seed!r} must be null (derived from the sweep id) or an "
                              "integer >= 0")
        t = self.practical_threshold
        if isinstance(t, bool) or not isinstance(t, int | float) or not 0 < t < 1:
            raise ConfigError(f"practical_threshold={t!r} must be a fraction in (0, 1), e.g. 0.02 (2%)")
        if not isinstance(self.control, bool):
            raise ConfigError(f"control={self.control!r} must be true or false")
        if self.control and self.repeats == 1:
            raise ConfigError("control=true needs at least 2 blocks to judge the control arm: set repeats=N (N >= 2) "
                              "or repeats=auto")
        if self.sweep_id is not None and self.sweep_id != "latest" and not SWEEP_ID_RE.match(str(self.sweep_id)):
            raise ConfigError(f"sweep_id={self.sweep_id!r} is not of the form YYYYmmdd-HHMMSSZ-xxxxxx "
                              "(UTC time + 6 hex, e.g. 20261129-160000Z-a1b2c3) or 'latest'")
        if self.sweep_id is not None and self.sweep_id != "latest":
            import datetime as dt

            try:
                dt.datetime.strptime(str(self.sweep_id)[:16], "%Y%m%d-%H%M%SZ")
            except ValueError as e:
                raise ConfigError(f"sweep_id={self.sweep_id!r} is not a real UTC time ({e}); the id starts with the "
                                  "time it was made, YYYYmmdd-HHMMSSZ, e.g. 20261129-160000Z-a1b2c3") from None
        if self.ceiling_from is not None and not isinstance(self.ceiling_from, str):
            raise ConfigError(f"ceiling_from={self.ceiling_from!r} must be the folder of an earlier sweep or null")
        for k in ("dry_run", "pack", "detach", "allow_dirty", "collect_job", "reference_gate", "prune_below_ceiling"):
            if not isinstance(getattr(self, k), bool):
                raise ConfigError(f"{k}={getattr(self, k)!r} must be true or false")
        if not isinstance(self.max_gpu_hours, int | float) or isinstance(self.max_gpu_hours, bool):
            raise ConfigError(f"max_gpu_hours={self.max_gpu_hours!r} must be a number")

    @property
    def effective_action(self) -> str:
        """The action to run: ``plan`` for ``dry_run=true`` (an alias of ``action=plan``), else ``action``."""
        return "plan" if self.dry_run else self.action

    @classmethod
    def from_cfg(cls, cfg: dict[str, Any]) -> SweepSettings:
        """The top-level keys of a composed config.

        Raises:
            ConfigError: a key without a default is missing (deleted with Hydra's ``~key``), named with its fix.
        """
        import dataclasses

        fields = {f.name: f for f in dataclasses.fields(cls)}
        missing = [n for n, f in fields.items() if n not in cfg and f.default is dataclasses.MISSING
                   and f.default_factory is dataclasses.MISSING]
        if missing:
            raise ConfigError(f"the top-level key(s) {', '.join(missing)} cannot be deleted ('~{missing[0]}'): set a "
                              f"value instead, e.g. {missing[0]}=... (docs/CONTRACTS.md §1 lists the valid ones)")
        return cls(**{k: cfg[k] for k in fields if k in cfg})
