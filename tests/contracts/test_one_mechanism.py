"""One mechanism per job, held for the whole product (experiments, launchers, analysis, contracts): the host's
processes are read from ``/proc`` only by :mod:`contracts.procfs` and files are locked only by
:mod:`contracts.locks`. A second reader or lock helper would bring a second unit or a second notion of "the same
process" (the pid alone against pid + start time), which is how they drifted apart before."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("experiments", "launchers", "analysis", "contracts")


def _code_strings(tree: ast.AST) -> list[tuple[int, str]]:
    """The string constants that are code, not docstrings: ``(line, text)``; an f-string counts by its text parts."""
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    docs |= {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.JoinedStr):
            out.append((n.lineno, "".join(v.value for v in n.values if isinstance(v, ast.Constant))))
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs:
            out.append((n.lineno, n.value))
    return out


def offenders(files: list[Path]) -> list[str]:
    """``file:line what`` for each read of ``/proc`` outside contracts/procfs.py and each ``fcntl`` import
    outside contracts/locks.py."""
    bad = []
    for f in files:
        rel = f.relative_to(f.parents[1]).as_posix()
        tree = ast.parse(f.read_text(), str(f))
        if rel != "contracts/procfs.py":
            bad += [f"{rel}:{line} reads {s!r}" for line, s in _code_strings(tree) if s.startswith("/proc")]
        if rel != "contracts/locks.py":
            for n in ast.walk(tree):
                names = ([a.name for a in n.names] if isinstance(n, ast.Import)
                         else [n.module or ""] if isinstance(n, ast.ImportFrom) else [])
                bad += [f"{rel}:{n.lineno} imports fcntl" for m in names if m.split(".")[0] == "fcntl"]
    return bad


def test_only_procfs_reads_proc_and_only_locks_locks() -> None:
    files = [f for pkg in PRODUCT for f in sorted((ROOT / pkg).rglob("*.py"))]
    assert files and offenders(files) == []


@pytest.mark.parametrize("source, found", [
    ('from pathlib import Path\nPath(f"/proc/{pid}/cmdline").read_bytes()\n', "reads '/proc//cmdline'"),
    ('import fcntl\n', "imports fcntl"),
    ('"""Reads /proc/self/stat, documented only."""\nx = 1\n', None),
])
def test_the_check_sees_a_second_reader_and_a_second_lock(tmp_path: Path, source: str, found: str | None) -> None:
    f = tmp_path / "launchers" / "mod.py"
    f.parent.mkdir()
    f.write_text(source)
    got = offenders([f])
    assert (found is None and got == []) or (found is not None and len(got) == 1 and found in got[0]), got
