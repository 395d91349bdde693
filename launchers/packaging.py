"""Ship the repository's code to Slurm jobs: NeMo-Run's GitArchivePackager, with a clean-tree guard.

A job runs in ``<job folder>/code``, a ``git archive`` of the repository, so what runs is a known commit.
A tree with uncommitted changes to tracked files is refused unless ``allow_dirty`` is true (CONTRACTS §1); then
the archive is made from ``git stash create`` (a commit object of the working tree that touches neither the
tree, the index nor the stash list), so the job runs exactly the files the user sees. Untracked files are never
shipped. The archive is made once per commit (:mod:`launchers.archive`). The local executor needs no packager: it runs in the checkout, which need not be a git repository.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launchers.errors import LaunchConfigError


@dataclass(frozen=True)
class GitState:
    """The checkout a submission ships: ``root`` (top folder), ``sha`` (HEAD), ``dirty``, ``changed`` paths."""

    root: Path
    sha: str
    dirty: bool
    changed: tuple[str, ...] = ()


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], check=True, capture_output=True, text=True
    ).stdout.rstrip("\n")


def git_state(path: str | Path) -> GitState:
    """Describe the git checkout containing ``path``.

    Raises:
        LaunchConfigError: ``path`` is not inside a git checkout with at least one commit (names the path).
    """
    try:
        root = Path(_git(Path(path), "rev-parse", "--show-toplevel"))
        sha = _git(root, "rev-parse", "HEAD")
    except FileNotFoundError as exc:
        raise LaunchConfigError("git is not on PATH: Slurm jobs get the code as a `git archive`; install git") from exc
    except subprocess.CalledProcessError as exc:
        raise LaunchConfigError(
            f"{path} is not a git checkout with a commit: Slurm jobs get the code as a `git archive` of it. "
            "Clone the repository with git (or commit once), or use cluster=local, which runs in place."
        ) from exc
    changed = changed_files(root)
    return GitState(root=root, sha=sha, dirty=bool(changed), changed=changed)


def changed_files(root: str | Path) -> tuple[str, ...]:
    """The tracked files of the checkout at ``root`` with uncommitted changes (``git status --porcelain
    --untracked-files=no``; a rename as ``old -> new``), relative to ``root``.

    Raises:
        subprocess.CalledProcessError: ``root`` is not a git checkout. FileNotFoundError: no git on PATH.
    """
    return tuple(line[3:] for line in _git(Path(root), "status", "--porcelain", "--untracked-files=no").splitlines()
                 if line)


def name_changed(changed: Sequence[str], most: int = 5) -> str:
    """Up to ``most`` of the ``changed`` files, then ``and N more``: what a dirty-tree refusal names."""
    shown = ", ".join(changed[:most])
    return shown + (f" and {len(changed) - most} more" if len(changed) > most else "")


def check_clean(state: GitState, allow_dirty: bool) -> None:
    """Refuse a dirty tree unless ``allow_dirty``.

    Raises:
        LaunchConfigError: uncommitted changes to tracked files, naming up to 5 of them and both fixes.
    """
    if state.dirty and not allow_dirty:
        raise LaunchConfigError(
            f"the git tree {state.root} has uncommitted changes ({name_changed(state.changed)}); jobs would not "
            "run what you see. "
            "Commit them, or pass allow_dirty=true to ship the working tree as it is (recorded in the manifest)."
        )


def ship_ref(state: GitState) -> str:
    """The commit jobs get: HEAD's sha, or for a dirty tree a ``git stash create`` commit of the working tree."""
    if not state.dirty:
        return state.sha
    return _git(state.root, "stash", "create") or state.sha


def code_packager(
    state: GitState,
    *,
    ref: str | None = None,
    allow_dirty: bool = False,
    extra_files: Sequence[tuple[str | Path, str | Path]] = (),
) -> Any:
    """A GitArchivePackager (:class:`launchers.archive.SharedGitArchivePackager`) shipping ``state.root``.

    ``ref``: the commit to ship (default :func:`ship_ref`; pass it once per batch so every job ships the same
    commit). ``extra_files`` are ``(file, base folder)`` pairs added to the archive at their path relative to the
    base (e.g. ``variants/<v>/variant.json``). Imports NeMo-Run.

    Raises:
        LaunchConfigError: a dirty tree without ``allow_dirty``.
    """
    from launchers.archive import SharedGitArchivePackager

    check_clean(state, allow_dirty)
    return SharedGitArchivePackager(
        basepath=str(state.root),
        ref=ref or ship_ref(state),
        include_submodules=False,
        check_uncommitted_changes=not allow_dirty,
        include_pattern=[str(Path(f).absolute()) for f, _ in extra_files] or "",
        include_pattern_relative_path=[str(Path(b).absolute()) for _, b in extra_files] or "",
    )
