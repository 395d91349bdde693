"""A GitArchivePackager that runs ``git archive`` once per commit and process, not once per job.

NeMo-Run 0.11.1's ``GitArchivePackager.package`` makes a new archive for every task, through about ten shell
calls (git archive, find | tar per extra file, extract and re-tar to concatenate, gzip): ~0.3 s per job here,
most of a job's submission time. This subclass keeps its fields and meaning (``ref``, ``include_pattern`` relative to
``include_pattern_relative_path``, ``check_uncommitted_changes``) and builds the same ``<name>.tar.gz``: the
commit's tree (cached in memory per repository and commit) plus the task's own extra files.

Importing this module imports NeMo-Run; :mod:`launchers.packaging` imports it only when a packager is needed.
"""

from __future__ import annotations

import functools
import io
import os
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from launchers.errors import LaunchConfigError
from launchers.nemorun_torch import import_nemo_run

import_nemo_run()  # first, so that NeMo-Run is imported without torch where that applies (launchers/nemorun_torch.py)
from nemo_run.core.packaging.git import GitArchivePackager  # noqa: E402

# What a job never reads: the tests (their fixtures are most of the tree) and the documentation. A run needs the
# stages' packages and conf/ (the chained collect job composes it); everything else of the commit ships.
NOT_SHIPPED = ("tests", "docs")


@functools.lru_cache(maxsize=8)
def _tree_tar(root: str, commit: str) -> bytes:
    """``git archive --format=tar <commit>`` of ``root`` without :data:`NOT_SHIPPED` (uncompressed bytes).
    ``commit`` is a full sha."""
    excludes = [f":(exclude){p}" for p in NOT_SHIPPED]
    return subprocess.run(["git", "-C", root, "archive", "--format=tar", commit, "--", ".", *excludes], check=True,
                          capture_output=True).stdout


@dataclass(kw_only=True)
class SharedGitArchivePackager(GitArchivePackager):
    """``GitArchivePackager`` with one ``git archive`` per commit; ``ref`` must be a full commit sha."""

    def package(self, path: Path, job_dir: str, name: str) -> str:
        output = os.path.join(job_dir, f"{name}.tar.gz")
        if os.path.exists(output):
            return output
        root = self.basepath or str(path)
        if self.check_uncommitted_changes:
            dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                                   check=True, capture_output=True, text=True).stdout.strip()
            if dirty:  # the same refusal as GitArchivePackager(check_uncommitted_changes=True)
                raise LaunchConfigError(
                    f"the git tree {root} has uncommitted changes ({dirty.splitlines()[0].strip()} ...); "
                    "commit them, or pass allow_dirty=true")
        patterns = [self.include_pattern] if isinstance(self.include_pattern, str) else self.include_pattern
        bases = ([self.include_pattern_relative_path] if isinstance(self.include_pattern_relative_path, str)
                 else self.include_pattern_relative_path)
        tmp = f"{output}.tmp"
        with tarfile.open(tmp, "w:gz", compresslevel=1) as out:
            with tarfile.open(fileobj=io.BytesIO(_tree_tar(root, self.ref))) as tree:
                for member in tree:
                    out.addfile(member, tree.extractfile(member) if member.isfile() else None)
            for pattern, base in zip(patterns, bases, strict=True):
                if pattern:
                    out.add(pattern, arcname=os.path.relpath(pattern, base or root), recursive=True)
        os.replace(tmp, output)
        return output
