"""The records of a read log, the room's leaf (imports nothing of the analysis): a failure-marker line
(:class:`Marker`, found by :mod:`analysis.logs.markers`), one parsed iteration line (:class:`IterationRecord`), the
iteration columns (:class:`IterationSeries`) and what the parser keeps of one run's files (:class:`ParsedLog`,
built by :mod:`analysis.logs.parse`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["IterationRecord", "IterationSeries", "Marker", "ParsedLog"]


@dataclass(frozen=True, slots=True)
class Marker:
    """One evidence candidate: ``kind`` (see ``analysis.logs.markers``), the cleaned line ``text`` (at most 400 characters),
    the ``file`` it came from and its byte ``offset`` in the concatenated stream of the run's files."""

    kind: str
    text: str
    file: str
    offset: int


@dataclass(frozen=True, eq=False)
class IterationSeries:
    """Per-iteration columns, one entry per distinct iteration number, sorted by iteration.

    Units: ``step_ms`` in ms, ``tflops`` in TFLOP/s/GPU. Unknown floats are NaN, unknown integers -1.
    A column that holds one value throughout (batch size, skipped counts, a missing field) may be a read-only
    zero-stride view (``np.broadcast_to``): no memory per iteration; treat every column as read-only.
    ``extra_losses`` maps each other loss key ("load_balancing_loss", "mtp_1 loss") to its column.
    """

    iteration: np.ndarray
    train_iters: np.ndarray
    step_ms: np.ndarray
    tflops: np.ndarray
    lm_loss: np.ndarray
    grad_norm: np.ndarray
    skipped: np.ndarray
    nan_iterations: np.ndarray
    global_batch_size: np.ndarray
    nonfinite: np.ndarray  # bool: the line printed nan or inf in some field
    extra_losses: dict[str, np.ndarray] = field(default_factory=dict)
    partial: np.ndarray | None = None  # bool: read from the head of a line another print was glued to (its later
    # fields are unknown, not missing); None: no such row

    def __len__(self) -> int:
        return int(self.iteration.size)


@dataclass(frozen=True, slots=True)
class IterationRecord:
    """One parsed iteration line (ms, TFLOP/s/GPU; None when the line lacks the field)."""

    iteration: int
    train_iters: int
    step_ms: float
    tflops: float | None
    lm_loss: float | None
    grad_norm: float | None
    skipped: int | None
    nan_iterations: int | None
    global_batch_size: int | None
    losses: dict[str, float]
    timestamp: str | None


@dataclass(frozen=True, eq=False)
class ParsedLog:
    """What the parser keeps from one run's log files (all restarts, in order).

    ``peak_mem_gb``: the largest max-allocated value over all memory lines and ranks (GB as logged; MB/1024).
    ``tflops_source``: "iteration_line", "step_time_line", "mixed" or None when throughput logging was off.
    ``step_time_lines``: the Bridge ``Step Time`` lines read. Once every iteration line so far carries its own
    throughput, later chunks' Step Time lines add nothing and are skipped unread, so on a long log this is a lower
    bound of the lines present, not a count of them.
    Offsets are byte positions in the concatenation of ``files``.
    """

    files: tuple[str, ...]
    series: IterationSeries
    train_iters: int | None
    peak_mem_gb: float | None
    memory_lines: int
    config: dict[str, str]
    markers: tuple[Marker, ...]
    marker_counts: dict[str, int]
    first_iteration_offset: int | None
    last_iteration_offset: int | None
    first_timestamp: str | None
    last_timestamp: str | None
    damaged_lines: int
    step_time_lines: int
    tflops_source: str | None
    restart_first_iterations: tuple[int, ...]
    bytes_read: int
    notes: tuple[str, ...]
    unreadable: tuple[str, ...]

    @property
    def recognized(self) -> bool:
        """True when anything Megatron-like was found (iterations, Step Time, memory, config or a marker)."""
        return bool(len(self.series) or self.step_time_lines or self.memory_lines or self.config or self.markers)

    def markers_of(self, *kinds: str) -> list[Marker]:
        """The kept markers of the given kinds, in log order."""
        return [m for m in self.markers if m.kind in kinds]
