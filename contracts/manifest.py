"""The typed ``manifest.json`` (schema_version 1, docs/CONTRACTS.md §3): load, create and update under the file lock.

Readers call :meth:`Manifest.load` at any time. Writers go through :meth:`Manifest.create` (exclusive: a folder that
already holds a manifest is refused) or :meth:`Manifest.update`, which holds ``manifest.json.lock`` (``flock``, the
same lock the ``filelock`` package takes) while it reads, applies a change and replaces the file atomically
(``contracts.atomic``). A writer that works in rounds (the conductor) holds one :class:`ManifestWriter`: the manifest
is read once, passed on typed, and each round's changes go through :meth:`Manifest.update` in one write. The JSON
keeps every key it had: fields these records do not type travel in ``extra`` (the records of one variant and one
stage are in :mod:`contracts.manifest_entries`).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from contracts.atomic import dumps, write_text
from contracts.errors import ManifestError, SweepExistsError
from contracts.locks import LockTimeout, locked
from contracts.manifest_entries import Attempt, StageEntry, VariantEntry, now_iso, split_extra
from contracts.manifest_schema import check_shape
from contracts.records import SCHEMA_VERSION, RunRef
from contracts.statuses import LIVE_STATUSES, ManifestStatus
from contracts.sweepdir import SweepDir

LOCK_TIMEOUT_S = 60.0
PLAN_STATE = "plan_state"  # manifest key: "writing" from the claim until every variant file is written
PLAN_WRITING, PLAN_COMPLETE = "writing", "complete"
T = TypeVar("T")

__all__ = ["PLAN_COMPLETE", "PLAN_STATE", "PLAN_WRITING", "Attempt", "Manifest", "ManifestWriter", "StageEntry",
           "VariantEntry", "lock", "now_iso"]


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
                continue  # a manifest written before blocks existed round-trips unchanged
            d[f.name] = getattr(self, f.name)
        d["stages"] = [s.to_json() for s in self.stages]
        d["runs"] = [{"variant": n, "repeat": r} for n, r in self.runs]
        d["variants"] = [v.to_json() for v in self.variants]
        d.update(self.extra)
        return d

    @classmethod
    def from_json(cls, data: dict[str, Any], where: str = "manifest.json") -> Manifest:
        """Raises ManifestError: a schema_version other than 1, a field of the wrong shape, a variant name that is
        not a plain folder name or an attempt path outside its variant's folder (names the value)."""
        if data.get("schema_version") != SCHEMA_VERSION:
            raise ManifestError(f"{where} has schema_version {data.get('schema_version')!r}; this tool reads "
                                f"{SCHEMA_VERSION}")
        body = {k: v for k, v in data.items() if k != "schema_version"}
        check_shape(body, where)  # types, names and paths, once at load (contracts/manifest_schema.py)
        typed, extra = split_extra(cls, body)
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
        serialising a 1,000-variant manifest again: about 0.3 s); otherwise it is a full :meth:`update`.

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


class ManifestWriter:
    """The manifest one writer works on, and the changes it made since its last write.

    :attr:`m` is read once (or given) and then kept current: each change applies to it at once, so the round reads
    its own changes, and :meth:`commit` replays the round's changes onto the file's current content under the lock
    (:meth:`Manifest.update`), so that another process's write in between (``action=cancel`` from another shell)
    is kept; the manifest written becomes :attr:`m`. Attempt fields and adjustments are replayed, so they must not
    depend on when they are applied (:meth:`Attempt.set` and :meth:`VariantEntry.add_adjustments` do not);
    structural changes (new attempts, blocks, gates) go through :meth:`change`, which writes at once.
    """

    def __init__(self, sweep: SweepDir, m: Manifest | None = None) -> None:
        """Raises ManifestError like :meth:`Manifest.load` (when ``m`` is not given)."""
        self.sweep = sweep
        self.m = m if m is not None else Manifest.load(sweep)
        self._pending: list[Callable[[Manifest], object]] = []

    def set(self, ref: RunRef, **values: Any) -> None:
        """Set fields of the attempt ``ref`` (:meth:`Attempt.set`'s arguments) in this round."""
        self._edit(lambda m: m.attempt(ref).set(**values))

    def adjust(self, variant: str, adjustments: list[dict[str, Any]]) -> None:
        """Add the payload's ``adjustments`` to ``variant`` (nothing when there are none) in this round."""
        if adjustments:
            self._edit(lambda m: m.variant(variant).add_adjustments(adjustments))

    def _edit(self, edit: Callable[[Manifest], object]) -> None:
        edit(self.m)
        self._pending.append(edit)

    def commit(self) -> Manifest:
        """Write this round's changes (nothing when there are none) and start the next round; returns :attr:`m`.

        Raises:
            ManifestError: like :meth:`Manifest.load`. OSError: the file cannot be written (it is left as it was).
        """
        if self._pending:
            edits, self._pending = self._pending, []
            self.m = Manifest.update(self.sweep, lambda m: [edit(m) for edit in edits])[0]
        return self.m

    def change(self, change: Callable[[Manifest], T]) -> T:
        """Write this round's changes and ``change(manifest)`` at once, in one locked write; returns what ``change``
        returned. Errors as :meth:`commit`."""
        edits, self._pending = self._pending, []

        def apply(m: Manifest) -> T:
            for edit in edits:
                edit(m)
            return change(m)

        self.m, out = Manifest.update(self.sweep, apply)
        return out


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
    try:
        with locked(sweep.lock, timeout_s):
            yield
    except LockTimeout:
        raise ManifestError(f"{sweep.lock} is held by another process for over {timeout_s:.0f} s; "
                            "is another sweep command running on this folder?") from None
