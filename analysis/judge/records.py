"""The records of the judgement, the room's leaf (imports nothing of the analysis): one piece of evidence for a
reason (:class:`Finding`), built by :mod:`analysis.judge.findings`, ordered and completed by
:mod:`analysis.judge.timeline`, weighed by :mod:`analysis.judge.classify`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Finding"]


@dataclass
class Finding:
    """The evidence of one reason: the log lines (``evidence``, at most a few), the byte ``offset`` of the first
    (in the concatenated stream of the run's files), the reason's ``details`` (rank, op, timeout, host ...) and the
    offsets of every marker it was built from (``offsets``, read by :mod:`analysis.judge.timeline`)."""

    evidence: list[str]
    offset: int
    details: dict[str, Any] = field(default_factory=dict)
    offsets: list[int] = field(default_factory=list)
