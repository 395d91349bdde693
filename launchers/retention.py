"""Retention of the code copies a Slurm sweep ships (``python -m launchers.retention SWEEP_FOLDER``).

Each Slurm job gets the commit's code as ``<job folder>/<name>.tar.gz``, unpacked by NeMo-Run into ``code/`` next to
it (without ``tests/`` and ``docs/``, :data:`launchers.archive.NOT_SHIPPED`), under ``<sweep>/nemo_run/``: about
3 MB a run, kept with the sweep so that a finished run can be looked at with the code it ran. The manifest records
each attempt's commit (``git_sha``), so the copies of finished jobs can go: this command removes them, and keeps
those of jobs still queued or running (their job reads them). With ``pack=true`` the runs of one allocation share
its copy (each run's step starts in it, :mod:`launchers.pack`): it goes only once every run of the allocation has
ended. Logs, outputs and the manifest are never touched. It may run while the sweep runs: it reads the manifest
as the conductor last wrote it, so a job the conductor has not yet seen end counts as live.

Exit codes (CONTRACTS §5): 0 done (also when nothing was left to remove), 2 not a sweep folder or not writable.
A sweep folder moved or copied elsewhere is found by the part of each recorded job folder below ``nemo_run/``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from contracts.errors import ContractError
from contracts.manifest import Manifest
from contracts.sweepdir import SweepDir
from launchers.pack import allocation_folder


def code_copies(job_dir: Path) -> list[Path]:
    """The shipped code of one job folder: ``code/`` and the ``*.tar.gz`` it was unpacked from."""
    return [p for p in (job_dir / "code", *sorted(job_dir.glob("*.tar.gz"))) if p.exists()]


HOME_NAMES = ("nemo_run", ".nemorun_home")  # the sweep's NeMo-Run home and its alias (launchers/home.py)


def _in_this_folder(recorded: Path, root: Path) -> Path | None:
    """The job folder ``recorded`` (as the manifest holds it: absolute, where the sweep was when it ran) inside the
    sweep's NeMo-Run home ``root`` as it is now: the same path when the sweep has not moved, else the part below
    the recorded path's last ``nemo_run``/``.nemorun_home`` re-anchored at ``root`` (a sweep folder copied to shared
    storage, a renamed checkout). None for a folder of another sweep."""
    resolved = recorded.resolve()
    if resolved.is_relative_to(root):
        return resolved
    parts = recorded.parts
    cut = max((i for i, part in enumerate(parts) if part in HOME_NAMES), default=None)
    if cut is None:
        return None
    moved = root.joinpath(*parts[cut + 1:]).resolve()
    return moved if moved.is_relative_to(root) and moved.exists() else None


def prune(sweep: Path) -> tuple[int, int, list[str], list[str]]:
    """Remove the code copies of every job of ``sweep`` whose attempts have all ended (a packed allocation's: all of
    its runs).

    Returns (copies removed, bytes freed, the job folders kept because a job there is still live, the recorded
    job folders found neither in this sweep folder nor below its ``nemo_run/``: left alone).

    Raises:
        ContractError: ``sweep`` is not a sweep folder (its manifest is missing or damaged).
        PermissionError: the sweep folder cannot be written (read-only file system or permissions); nothing is
            removed.
    """
    sd = SweepDir(sweep)
    m = Manifest.load(sd)
    root = sd.nemo_run.resolve()
    live: set[Path] = set()
    ended: set[Path] = set()
    elsewhere: list[str] = []
    for v in m.variants:
        for a in v.attempts:
            if not a.get("job_dir"):
                continue
            folder = _in_this_folder(Path(str(a.get("job_dir"))), root)
            if folder is None:  # only this sweep's own job folders
                elsewhere.append(str(a.get("job_dir")))
                continue
            if a.get("pack_step"):  # a packed run's own folder: the code is its allocation's, shared
                folder = allocation_folder(folder)
            (ended if a.status.final else live).add(folder)
    doomed = [(p, f) for f in sorted(ended - live) for p in code_copies(f)]
    for parent in {p.parent for p, _ in doomed}:
        if not os.access(parent, os.W_OK | os.X_OK):
            raise PermissionError(f"the sweep folder {sd.root} is not writable (read-only file system or "
                                  f"permissions): {parent} cannot be changed, so no code copy was removed. Run it "
                                  "where the folder can be written")
    removed = freed = 0
    for p, _ in doomed:
        size = sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.is_dir() else p.stat().st_size
        shutil.rmtree(p) if p.is_dir() else p.unlink()
        removed, freed = removed + 1, freed + size
    return removed, freed, [str(f) for f in sorted(live)], sorted(set(elsewhere))


def main(argv: list[str] | None = None) -> int:
    from contracts.exits import in_print_order

    in_print_order()
    p = argparse.ArgumentParser(prog="python -m launchers.retention",
                                description="Remove the code copies of a sweep's finished Slurm jobs.")
    p.add_argument("sweep", help="the sweep folder (results/<preset>/<sweep_id>)")
    a = p.parse_args(argv)
    try:
        removed, freed, kept, elsewhere = prune(Path(a.sweep))
    except (ContractError, PermissionError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"removed {removed} code cop{'y' if removed == 1 else 'ies'} ({freed / 1e6:.1f} MB) of finished jobs in "
          f"{a.sweep}" + (f"; kept those of {len(kept)} live job folder(s)" if kept else ""))
    if elsewhere:
        print(f"warning: {len(elsewhere)} job folder(s) the manifest records are not in this sweep folder and were "
              f"not touched, e.g. {elsewhere[0]}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
