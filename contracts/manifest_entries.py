"""The records inside ``manifest.json`` (docs/CONTRACTS.md §3): a variant's entry with its attempts, and a stage.
The whole file, its lock and its writes are :mod:`contracts.manifest`. The JSON keeps every key it had: fields these
records do not type travel in ``extra``."""

from __future__ import annotations

import datetime as dt
import functools
import json
from dataclasses import dataclass, field, fields
from typing import Any

from contracts.records import RunRef, Variant
from contracts.statuses import FINAL_STATUSES, ManifestStatus, StageStatus


def now_iso() -> str:
    """Current UTC time, ISO 8601 with a trailing Z, to the second."""
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


@functools.cache
def code_revision() -> str | None:
    """The git commit of the code this process runs (``git rev-parse HEAD`` of this project's checkout), or None
    when the project is not a git checkout of its own: a copy of the code inside some other repository (a run
    folder, a home directory under git) must not record that repository's commit."""
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    try:
        top, sha = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel", "HEAD"],
                                  capture_output=True, text=True, timeout=10, check=True).stdout.split()[:2]
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return sha if Path(top).resolve() == root else None


def split_extra(cls: type, data: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the fields of dataclass ``cls`` in ``data``, every other key): the second travels in ``extra``."""
    names = {f.name for f in fields(cls) if f.name != "extra"}
    return {k: v for k, v in data.items() if k in names}, {k: v for k, v in data.items() if k not in names}


@dataclass(kw_only=True)
class Attempt:
    """One submission of one run (variant, repeat). Attempts are numbered per variant (1, 2, ...); a resume or
    requeue makes k+1 and older attempts stay. ``extra`` holds launcher fields (``job_dir``, ``host_dir``,
    ``pack_step``, ``note``...)."""

    attempt: int
    repeat: int
    status: ManifestStatus = ManifestStatus.PLANNED
    job_id: str | None = None
    submitted: str | None = None
    finished: str | None = None
    exit_code: int | None = None
    log_dir: str = ""
    task: str = ""
    experiment_id: str | None = None
    flags: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.status = ManifestStatus(self.status)

    def ref(self, variant: str) -> RunRef:
        return RunRef(variant, self.repeat, self.attempt)

    def set(self, *, status: str | None = None, force: bool = False, add_flags: tuple[str, ...] | list[str] = (),
            **values: Any) -> None:
        """Update the attempt. A final status sticks unless ``force`` (a late poll never undoes a timeout);
        reaching a final status stamps ``finished``. Unknown field names go to ``extra``."""
        if status is not None and (self.status not in FINAL_STATUSES or force or status == self.status):
            self.status = ManifestStatus(status)
        typed = {f.name for f in fields(self)}
        for k, v in values.items():
            if k in typed and k != "extra":
                setattr(self, k, v)
            else:
                self.extra[k] = v
        self.flags = sorted(set(self.flags) | set(add_flags))
        if self.status in FINAL_STATUSES and not self.finished:
            self.finished = now_iso()

    def get(self, key: str, default: Any = None) -> Any:
        """A launcher field from ``extra`` (``job_dir``, ``host_dir``, ``pack_step``)."""
        return self.extra.get(key, default)

    def to_json(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        d["status"] = str(self.status)
        d.update(self.extra)
        return d

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Attempt:
        typed, extra = split_extra(cls, data)
        return cls(**typed, extra=extra)


@dataclass(kw_only=True)
class VariantEntry:
    """A variant of the sweep with its attempts. The frozen :class:`Variant` changes only by replacement."""

    variant: Variant
    attempts: list[Attempt] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.variant.name

    @property
    def status(self) -> ManifestStatus:
        return self.variant.status

    def set_status(self, status: str, reason: str | None = None) -> None:
        """Set the plan status (gated -> planned when a gate opens, -> skipped or pruned), adding ``reason``."""
        from dataclasses import replace

        reasons = self.variant.reasons + ((reason,) if reason else ())
        self.variant = replace(self.variant, status=ManifestStatus(status), reasons=reasons)

    def add_adjustments(self, adjustments: list[dict[str, Any]]) -> None:
        """Merge the payload's adjustments (docs/CONTRACTS.md §6), each once."""
        from dataclasses import replace

        known = {json.dumps(a, sort_keys=True) for a in self.variant.adjustments}
        new = tuple(a for a in adjustments if json.dumps(a, sort_keys=True) not in known)
        if new:
            self.variant = replace(self.variant, adjustments=self.variant.adjustments + new)

    def attempt(self, k: int, repeat: int | None = None) -> Attempt:
        """Attempt ``k`` (of ``repeat`` when given: attempts are numbered per repeat). Raises KeyError."""
        for a in self.attempts:
            if a.attempt == k and (repeat is None or a.repeat == repeat):
                return a
        raise KeyError(f"attempt {k} of {self.name} is not in the manifest; attempts: "
                       + (", ".join(str(a.attempt) for a in self.attempts) or "none"))

    def new_attempt(self, repeat: int) -> Attempt:
        """Append a ``planned`` attempt of ``repeat``, numbered that repeat's previous max + 1 (a repeat is a
        repeat, an attempt a retry: repeats 0-2 of a nightly are each attempt 1); return it."""
        k = max((a.attempt for a in self.attempts if a.repeat == repeat), default=0) + 1
        ref = RunRef(self.name, repeat, k)
        a = Attempt(attempt=k, repeat=repeat, log_dir=f"variants/{self.name}/{ref.folder}/logs", task=ref.task)
        sha = code_revision()
        if sha:
            a.extra["git_sha"] = sha  # the code that submits it: a resume after a commit runs other code
        self.attempts.append(a)
        return a

    def to_json(self) -> dict[str, Any]:
        d = self.variant.to_json()
        d["status"] = str(self.variant.status)
        d["role"] = str(self.variant.role)
        d["attempts"] = [a.to_json() for a in self.attempts]
        d.update(self.extra)
        return d

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> VariantEntry:
        known = set(Variant.__dataclass_fields__)
        extra = {k: v for k, v in data.items() if k not in known and k != "attempts"}
        return cls(variant=Variant.from_json(data),
                   attempts=[Attempt.from_json(a) for a in data.get("attempts") or []], extra=extra)


@dataclass(kw_only=True)
class StageEntry:
    """A stage of a staged preset (docs/CONTRACTS.md §2): ``gate`` None or ``overlap_passed``."""

    index: int
    name: str
    gate: str | None = None
    status: StageStatus = StageStatus.OPEN
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "gate": self.gate, "status": str(self.status), **self.extra}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StageEntry:
        typed, extra = split_extra(cls, data)
        typed["status"] = StageStatus(typed.get("status", "open"))
        return cls(**typed, extra=extra)
