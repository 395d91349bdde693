"""What every benchmark shares: the trees compared, whole processes timed in each, and the ratios printed.

    --against REV|DIR   the baseline: a git revision of this repository, checked out into a temporary git worktree
                        (removed at the end), or a folder that holds a tree of this project, used as it is

Each side runs from its own tree: a process starts in the tree's root (its working directory) with the tree first
on ``PYTHONPATH``, so ``python -m experiments.sweep`` or ``python -m analysis.report`` imports that tree's code and
never the editable install's (which points at one checkout). Bytecode is written as Python does by default
(``PYTHONDONTWRITEBYTECODE`` is dropped) and each benchmark runs every tree once untimed first, so a timed run is a
user's second run, not one that compiles every module. Runs of the trees alternate, so that a drift of the
machine's speed hits both alike. A figure is the whole process as a user starts it: wall time from start to exit
(interpreter start and imports included), and the CPU time (user + system) and peak RSS of it and of every process
it started, also those it left behind without waiting for them (forked helpers): the command runs under a small
wrapper (``python benchmarks/harness.py``) that is their subreaper (Linux ``PR_SET_CHILD_SUBREAPER``) and waits up
to ``ORPHAN_GRACE_S`` for them after the command exits. Ratios are this tree's time over the baseline's, both measured in the same run (below 1: this tree
is faster). The machine's CPUs and load average are printed with them: on shared cores, compare the figures of one
run only.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TREE_ENV = "MOE_BENCH_TREE"  # the tree a benchmark script that runs itself in a tree imports (see use_tree)
ORPHAN_GRACE_S = 5.0  # how long the wrapper waits for the processes a command left running
PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
WRAPPER = str(Path(__file__).resolve())


@dataclass(frozen=True)
class Tree:
    """One side of a comparison: ``label`` ("this tree" or the ``--against`` value) and its root folder."""

    label: str
    root: Path


@dataclass(frozen=True)
class Run:
    """One whole process: wall seconds to its exit; CPU seconds and peak RSS (MB) of it and of every process it
    started; its exit code and output; ``left``: processes it started that still ran ``ORPHAN_GRACE_S`` after it
    exited (their CPU time after that is not counted)."""

    wall_s: float
    cpu_s: float
    rss_mb: float
    rc: int
    out: str
    err: str
    left: int = 0


def add_against(parser: argparse.ArgumentParser) -> None:
    """The ``--against REV|DIR`` option (see the module docstring)."""
    parser.add_argument("--against", metavar="REV|DIR", help="also run the baseline: a git revision (checked out "
                        "into a temporary worktree) or a folder holding a tree; runs alternate, ratios are printed")


def machine() -> str:
    """The CPUs this process may use and the load average, for the head and the end of every benchmark's output."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{cpus} CPUs, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"


def checkout(rev: str, folder: Path) -> Path:
    """Check revision ``rev`` of this repository out into a new git worktree at ``folder`` (detached); returns it.

    Raises:
        SystemExit: git refused ``rev`` (its message, and what to give instead).
    """
    res = subprocess.run(["git", "worktree", "add", "--detach", "--quiet", str(folder), rev], cwd=REPO,
                         capture_output=True, text=True)
    if res.returncode:
        raise SystemExit(f"--against {rev}: not a folder, and git refused it as a revision of {REPO}: "
                         f"{res.stderr.strip()}. Give a commit (git log --oneline) or a folder that holds a tree")
    return folder


@contextlib.contextmanager
def trees(against: str | None) -> Iterator[list[Tree]]:
    """[this tree] and, with ``against``, the baseline: that folder as it is, or that revision checked out into a
    temporary worktree that is removed on exit."""
    ours = Tree("this tree", REPO)
    if not against:
        yield [ours]
        return
    if Path(against).is_dir():
        yield [ours, Tree(against, Path(against).resolve())]
        return
    with tempfile.TemporaryDirectory(prefix="bench-baseline-") as tmp:
        root = checkout(against, Path(tmp) / "tree")
        try:
            yield [ours, Tree(against, root)]
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(root)], cwd=REPO, capture_output=True)


def env_for(tree: Path, **extra: str) -> dict[str, str]:
    """The environment of a process of ``tree``: the tree first on ``PYTHONPATH`` (ahead of what the caller's holds),
    ``TREE_ENV`` set to it, bytecode written as by default, then ``extra``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [os.environ.get("PYTHONPATH")])])
    env[TREE_ENV] = str(tree)
    return {**env, **extra}


def use_tree() -> Path:
    """Put the tree this benchmark script was started for (``TREE_ENV``, else this checkout) first on
    ``sys.path``, for a script that imports the project's code itself; returns it."""
    tree = Path(os.environ.get(TREE_ENV) or REPO)
    sys.path.insert(0, str(tree))
    return tree


def run(tree: Path, args: Sequence[str], *, env: dict[str, str] | None = None, cwd: Path | None = None,
        check: bool = True) -> Run:
    """Run ``python *args`` (this interpreter) as a whole process of ``tree`` (working directory ``cwd`` or the
    tree's root, :func:`env_for` plus ``env``) and time it.

    Raises:
        SystemExit: ``check`` and the process exited non-zero (the command and the end of its stderr).
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile(suffix=".json") as figures_file:
        wrapper = subprocess.run([sys.executable, WRAPPER, figures_file.name, sys.executable, *args],
                                 cwd=cwd or tree, env=env_for(tree, **(env or {})), stdin=subprocess.DEVNULL, stdout=out,
                                 stderr=err, check=False)
        out.seek(0)
        err.seek(0)
        if wrapper.returncode:
            raise SystemExit(f"the timing wrapper of python {' '.join(args)} failed: {err.read().decode()[-3000:]}")
        got = json.loads(Path(figures_file.name).read_text())
        result = Run(got["wall_s"], got["cpu_s"], got["rss_mb"], got["rc"], out.read().decode(errors="replace"),
                     err.read().decode(errors="replace"), got["left"])
    if check and result.rc:
        raise SystemExit(f"python {' '.join(args)} in {tree} exited {result.rc}:\n{result.err[-3000:]}")
    return result


def alternate(sides: Sequence[Tree], args_of: Callable[[Tree], Sequence[str]], repeats: int, *, warmup: int = 1,
              env_of: Callable[[Tree], dict[str, str]] | None = None, check: bool = True,
              after: Callable[[Tree, Run], None] | None = None) -> dict[str, list[Run]]:
    """``warmup`` untimed runs of each tree, then ``repeats`` timed runs of each, alternating; per tree label, its
    timed runs. ``args_of(tree)``: the command's arguments; ``env_of(tree)``: more environment; ``after(tree, run)``:
    called after every run (clean-up such as cancelling jobs; untimed)."""
    runs: dict[str, list[Run]] = {side.label: [] for side in sides}
    for k in range(warmup + repeats):
        for side in sides:
            got = run(side.root, args_of(side), env=env_of(side) if env_of else None, check=check)
            if after is not None:
                after(side, got)
            if k >= warmup:
                runs[side.label].append(got)
    return runs


def median(runs: Sequence[Run], what: str = "wall_s") -> float:
    """The median of one figure of ``runs`` (``wall_s``, ``cpu_s`` or ``rss_mb``)."""
    return statistics.median(getattr(r, what) for r in runs)


def figures(runs: Sequence[Run]) -> str:
    """``"1.23 s wall (median of 3, 1.20-1.31), 0.98 s CPU, 110 MB peak RSS"``."""
    walls = [r.wall_s for r in runs]
    return (f"{median(runs):.2f} s wall (median of {len(runs)}, {min(walls):.2f}-{max(walls):.2f}), "
            f"{median(runs, 'cpu_s'):.2f} s CPU, {max(r.rss_mb for r in runs):.0f} MB peak RSS")


def ratio(ours: Sequence[Run], base: Sequence[Run]) -> str:
    """This tree's median wall and CPU time over the baseline's: ``"time this/baseline: wall 1.05x, CPU 0.98x"``."""
    return (f"time this/baseline: wall {median(ours) / median(base):.2f}x, "
            f"CPU {median(ours, 'cpu_s') / median(base, 'cpu_s'):.2f}x")


def table(title: str, sides: Sequence[Tree], runs: dict[str, list[Run]]) -> list[str]:
    """The lines for one command: each tree's :func:`figures`, then the :func:`ratio` of this tree to the
    baseline."""
    lines = [title]
    lines += [f"  {side.label}: {figures(runs[side.label])}" for side in sides]
    if len(sides) > 1:
        lines.append(f"  {ratio(runs[sides[0].label], runs[sides[1].label])} (same run)")
    return lines


IN_TREE = "--in-tree"  # the option of a benchmark script's run inside one tree (see in_trees)


def without(argv: Sequence[str], option: str) -> list[str]:
    """``argv`` without ``option VALUE`` / ``option=VALUE`` (``--against``: what a tree's own process is given)."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if not skip and arg != option and not arg.startswith(f"{option}="):
            out.append(arg)
        skip = arg == option
    return out


def in_trees(script: str, argv_of: Callable[[Tree], list[str]], against: str | None, repeats: int = 1) -> int:
    """For a benchmark script that drives the project's code itself (a simulator): run ``python script
    *argv_of(tree) --in-tree`` as a whole process of each tree (alternating, ``repeats`` times, no warm-up), which
    imports that tree's code (:func:`use_tree`); print each tree's last output, then the figures and the ratio.
    Returns 0."""
    script = str(Path(script).resolve())  # (each process starts in its tree's root)
    with trees(against) as sides:
        runs = alternate(sides, lambda side: [script, *argv_of(side), IN_TREE], repeats, warmup=0)
        for side in sides:
            print(f"== {side.label}:\n{runs[side.label][-1].out}", end="")
        command = " ".join(["python", f"benchmarks/{Path(script).name}", *argv_of(sides[0])])
        print("\n".join(table(f"{command}:", sides, runs)))
    print(machine())
    return 0


def _wrap(figures_path: str, argv: list[str]) -> None:
    """Run ``argv`` as this process's child, as the subreaper of every process it starts; write its figures
    (:class:`Run`'s, without the output) as JSON to ``figures_path``."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the processes it leaves behind are not counted
        pass
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv)
    _, status, _ = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    left, deadline = 0, time.monotonic() + ORPHAN_GRACE_S
    while True:  # the processes it left behind, now this one's children
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0 and time.monotonic() > deadline:
            left = _children()
            break
        if pid == 0:
            time.sleep(0.01)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    Path(figures_path).write_text(json.dumps({"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime,
                                              "rss_mb": usage.ru_maxrss / 1024, "rc": proc.returncode, "left": left}))


def _children() -> int:
    """How many children this process has (1 where Linux does not list them: at least one)."""
    try:
        return len(Path(f"/proc/self/task/{os.getpid()}/children").read_text().split())
    except OSError:
        return 1


if __name__ == "__main__":  # the wrapper of one timed command: python harness.py FIGURES.json COMMAND...
    _wrap(sys.argv[1], sys.argv[2:])
