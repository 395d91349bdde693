"""The typed ``manifest.json`` (schema_version 1, docs/CONTRACTS.md §3): load, create and update under the file lock.

Readers call :meth:`Manifest.load` at any time. Writers go through :meth:`Manifest.create` (exclusive: a folder that
already holds a manifest is refused) or :meth:`Manifest.update`, which holds ``manifest.json.lock`` (``flock``, the
same lock the ``filelock`` package takes) while it reads, applies a change and replaces the file atomically
(``contracts.atomic``). The JSON keeps every key it had: fields this module does not type travel in ``extra``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from contracts.atomic import dumps, write_text
from contracts.errors import ManifestError, SweepExistsError
from contracts.records import SCHEMA_VERSION, RunRef, Variant
from contracts.statuses import FINAL_STATUSES, LIVE_STATUSES, ManifestStatus, StageStatus
from contracts.sweepdir import SweepDir

LOCK_TIMEOUT_S = 60.0
PLAN_STATE = "plan_state"  # manifest key: "writing" from the claim until every variant file is written
PLAN_WRITING, PLAN_COMPLETE = "writing", "complete"
T = TypeVar("T")


def now_iso() -> str:
    """Current UTC time, ISO 8601 with a trailing Z, to the second."""
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _split(cls: type, data: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
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
        typed, extra = _split(cls, data)
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
        typed, extra = _split(cls, data)
        typed["status"] = StageStatus(typed.get("status", "open"))
        return cls(**typed, extra=extra)


@dataclass(kw_only=True)
class Manifest:
    """The whole manifest.json. ``runs`` is the planned run order as (variant, repeat) pairs, block after block:
    ``blocks`` records each block's seeded random order, and a run's repeat is its block index."""

    sweep_id: str
    name: str
    created: str = ""
    git_sha: str | None = None
    dirty: bool | None = None
    allow_dirty: bool = False
    preflight: str = "static"
    mode: str = "train"
    model: str = ""
    cluster: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    container: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    gpu_hours_estimate: float | None = None
    overrides: list[str] = field(default_factory=list)
    stages: list[StageEntry] = field(default_factory=list)
    runs: list[tuple[str, int]] = field(default_factory=list)
    variants: list[VariantEntry] = field(default_factory=list)
    design: dict[str, Any] = field(default_factory=dict)  # the block design (CONTRACTS §12): repeats, seed, control
    blocks: list[dict[str, Any]] = field(default_factory=list)  # [{"index": b, "order": [variant, ...]}]
    extra: dict[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------------------------------------------ queries
    def variant(self, name: str) -> VariantEntry:
        """The entry of variant ``name``. Raises KeyError listing the variants of the sweep."""
        for v in self.variants:
            if v.name == name:
                return v
        raise KeyError(f"variant {name!r} is not in sweep {self.sweep_id}; variants: "
                       + ", ".join(v.name for v in self.variants))

    def attempt(self, ref: RunRef) -> Attempt:
        return self.variant(ref.variant).attempt(ref.attempt, ref.repeat)

    def latest_attempts(self) -> dict[tuple[str, int], Attempt]:
        """(variant, repeat) -> its latest attempt (the one that counts)."""
        out: dict[tuple[str, int], Attempt] = {}
        for v in self.variants:
            for a in v.attempts:
                key = (v.name, a.repeat)
                if key not in out or a.attempt > out[key].attempt:
                    out[key] = a
        return out

    def refs(self, statuses: frozenset[ManifestStatus] | set[str] | None = None) -> list[RunRef]:
        """Every attempt (optionally only those in ``statuses``) as a RunRef, in manifest order."""
        return [a.ref(v.name) for v in self.variants for a in v.attempts
                if statuses is None or a.status in statuses]

    def live_refs(self) -> list[RunRef]:
        """Attempts whose job still exists (submitted or running)."""
        return self.refs(LIVE_STATUSES)

    def add_block(self, order: list[str]) -> int:
        """Append a block (one run of each arm in ``order``, repeat = block index) to ``blocks`` and ``runs``;
        returns its index (CONTRACTS §12). Raises ValueError for a name that is not a variant of the sweep."""
        known = {v.name for v in self.variants}
        bad = [n for n in order if n not in known]
        if bad:
            raise ValueError(f"block names unknown variant(s) {', '.join(bad)}; variants: {', '.join(sorted(known))}")
        index = max((int(b["index"]) for b in self.blocks), default=-1) + 1
        self.blocks.append({"index": index, "order": list(order)})
        self.runs.extend((n, index) for n in order)
        return index

    @property
    def cluster_config(self) -> dict[str, Any]:
        """``config.cluster`` as recorded (secret values masked as ``***``)."""
        return dict(self.config.get("cluster") or {})

    def require_complete(self, root: Path | str) -> None:
        """Refuse a sweep whose planner died between claiming the folder and writing its variant files
        (``plan_state: writing``): nothing was submitted from it, and its variant.json files may be missing.

        Raises:
            ManifestError: names the folder and how to recover (remove it and plan again).
        """
        if self.extra.get(PLAN_STATE) == PLAN_WRITING:
            raise ManifestError(f"sweep {self.sweep_id} in {root} was never completely planned (the planner stopped "
                                f"while writing its variant files; nothing was submitted). Remove {root} and plan "
                                "again")

    # ------------------------------------------------------------------------------------------------ JSON
    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
        for f in fields(self):
            if f.name in ("extra", "stages", "runs", "variants"):
                continue
            if f.name in ("design", "blocks") and not getattr(self, f.name):
                continue  # a manifest from before issue 15 round-trips unchanged
            d[f.name] = getattr(self, f.name)
        d["stages"] = [s.to_json() for s in self.stages]
        d["runs"] = [{"variant": n, "repeat": r} for n, r in self.runs]
        d["variants"] = [v.to_json() for v in self.variants]
        d.update(self.extra)
        return d

    @classmethod
    def from_json(cls, data: dict[str, Any], where: str = "manifest.json") -> Manifest:
        """Raises ManifestError: a schema_version other than 1, or a field of the wrong shape."""
        if data.get("schema_version") != SCHEMA_VERSION:
            raise ManifestError(f"{where} has schema_version {data.get('schema_version')!r}; this tool reads "
                                f"{SCHEMA_VERSION}")
        body = {k: v for k, v in data.items() if k != "schema_version"}
        typed, extra = _split(cls, body)
        try:
            typed["stages"] = [StageEntry.from_json(s) for s in typed.get("stages") or []]
            typed["runs"] = [(r["variant"], int(r["repeat"])) for r in typed.get("runs") or []]
            typed["variants"] = [VariantEntry.from_json(v) for v in typed.get("variants") or []]
            return cls(**typed, extra=extra)
        except (KeyError, TypeError, ValueError) as e:
            raise ManifestError(f"{where} is not a valid manifest ({type(e).__name__}: {e}); restore it from a "
                                "backup, or plan a new sweep") from None

    # ------------------------------------------------------------------------------------------------ files
    @classmethod
    def load(cls, sweep: SweepDir | str | os.PathLike[str]) -> Manifest:
        """Read the manifest of ``sweep`` (a SweepDir or its folder).

        Raises:
            ManifestError: missing file, invalid JSON (a truncated or half-copied file; names the file and how to
                recover), or a schema_version other than 1.
        """
        sd = sweep if isinstance(sweep, SweepDir) else SweepDir(Path(sweep))
        path = sd.manifest
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise ManifestError(f"{path} does not exist: is {sd.root} a sweep folder?") from None
        except (OSError, ValueError) as e:
            raise ManifestError(f"{path} cannot be read ({e}); nothing was changed. Restore it from a backup "
                                f"or plan a new sweep in another output_dir") from None
        if not isinstance(data, dict):
            raise ManifestError(f"{path} does not hold a JSON object; restore it from a backup")
        return cls.from_json(data, str(path))

    def create(self, sweep: SweepDir) -> str:
        """Write this new manifest; returns the text written. Raises SweepExistsError if the folder already holds
        one."""
        sweep.root.mkdir(parents=True, exist_ok=True)
        with lock(sweep):
            if sweep.manifest.exists():
                held = _existing_id(sweep)
                raise SweepExistsError(f"{sweep.root} is held by sweep {held} ({sweep.manifest} exists); nothing was "
                                       f"written. Resume that sweep with: python -m experiments.sweep action=run "
                                       f"sweep_id={held} output_dir={sweep.root} ; or choose another output_dir")
            text = dumps(self.to_json())
            write_text(sweep.manifest, text, durable=True)
            return text

    @classmethod
    def mark_plan_complete(cls, sweep: SweepDir, written: str) -> None:
        """Set ``plan_state`` from ``writing`` to ``complete`` under the lock (docs/CONTRACTS.md §3).

        ``written`` is the text :meth:`create` returned. When the file still holds exactly that text, only the
        top-level ``plan_state`` line changes (the bytes :meth:`update` would write, without parsing and
        serialising a 1,000-variant manifest again: about 0.3 s; issue 17); otherwise it is a full :meth:`update`.

        Raises:
            ManifestError: like :meth:`load`. OSError: the file cannot be written (it is left as it was).
        """
        old, new = (f'\n  "{PLAN_STATE}": "{state}"' for state in (PLAN_WRITING, PLAN_COMPLETE))
        with lock(sweep):
            current = None
            with contextlib.suppress(OSError):
                current = sweep.manifest.read_text()
            if current == written and current.count(old) == 1:  # a top-level key: the only one at indent 2
                write_text(sweep.manifest, current.replace(old, new), durable=True)
                return
        cls.update(sweep, lambda m: m.extra.__setitem__(PLAN_STATE, PLAN_COMPLETE))

    def save(self, sweep: SweepDir) -> None:
        """Replace the file with this manifest (the caller holds :func:`lock`)."""
        write_text(sweep.manifest, dumps(self.to_json()), durable=True)

    @classmethod
    def update(cls, sweep: SweepDir, change: Callable[[Manifest], T]) -> tuple[Manifest, T]:
        """Load, apply ``change(manifest)`` (mutating it) and write the result, all under the lock.

        Returns (the new manifest, what ``change`` returned). Raises ManifestError like :meth:`load`.
        """
        with lock(sweep):
            m = cls.load(sweep)
            out = change(m)
            m.save(sweep)
            return m, out


def _existing_id(sweep: SweepDir) -> str:
    try:
        return str(json.loads(sweep.manifest.read_text()).get("sweep_id"))
    except (OSError, ValueError, AttributeError):
        return "?"


@contextlib.contextmanager
def lock(sweep: SweepDir, timeout_s: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold ``manifest.json.lock`` (an exclusive ``flock``) for the block.

    Raises:
        ManifestError: the lock was not free within ``timeout_s`` seconds (another writer hangs).
    """
    sweep.root.mkdir(parents=True, exist_ok=True)
    fd = os.open(sweep.lock, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ManifestError(f"{sweep.lock} is held by another process for over {timeout_s:.0f} s; "
                                        "is another sweep command running on this folder?") from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
