"""The import structure (issue: the renovation): contracts at the bottom, launchers and analysis above it knowing
only the contracts, experiments (planner and conductor) on top; the payload imports only contracts and itself; no
import circles, function-level imports included."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("contracts", "launchers", "analysis", "experiments")
FLOOR = {"contracts": 0, "launchers": 1, "analysis": 1, "experiments": 2}


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for p in (REPO / pkg).rglob("*.py"):
            parts = list(p.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = p
    return out


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """Project modules imported anywhere in ``path`` (module level and inside functions)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # ``from pkg import submodule`` depends on the submodule, ``from pkg import name`` on pkg
            names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                     for a in node.names]
        for n in names:
            while n and n not in modules:
                n = n.rpartition(".")[0]
            if n:
                found.add(n)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {m: _imports(p, modules) - {m} for m, p in modules.items()}


def _floor(module: str) -> int:
    return FLOOR[module.split(".")[0]]


def test_no_import_goes_up_a_floor_or_sideways() -> None:
    bad = []
    for mod, deps in _graph().items():
        top = mod.split(".")[0]
        for d in deps:
            dtop = d.split(".")[0]
            if _floor(d) > _floor(mod) or (dtop != top and _floor(d) == _floor(mod)):
                bad.append(f"{mod} -> {d}")
    assert not bad, "imports against the floors: " + "; ".join(sorted(bad))


def test_the_payload_imports_only_contracts_and_itself() -> None:
    bad = [f"{m} -> {d}" for m, deps in _graph().items() if m.startswith(("experiments.payload", "experiments.train"))
           for d in deps if not d.startswith(("contracts", "experiments.payload", "experiments.train"))
           and d != "experiments"]
    assert not bad, "; ".join(sorted(bad))


def test_contracts_use_the_standard_library_only() -> None:
    import sys

    allowed = set(sys.stdlib_module_names) | {"contracts", "__future__"}
    bad = []
    for p in (REPO / "contracts").rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Import):
                bad += [f"{p.name}: {a.name}" for a in node.names if a.name.split(".")[0] not in allowed]
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] not in allowed:
                bad.append(f"{p.name}: {node.module}")
    assert not bad, bad


def test_no_import_circles() -> None:
    graph = _graph()
    # a package's __init__ is not a dependency of its modules: Python loads it first, but it imports nothing here
    cycles: list[list[str]] = []
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                cycles.append(stack[stack.index(dep):] + [dep])
            elif dep not in state:
                visit(dep, stack)
        stack.pop()
        state[node] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n, [])
    assert not cycles, "import circles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_the_checker_sees_an_upward_import(tmp_path: Path) -> None:
    """The rule can fail: an analysis module importing the conductor is reported."""
    modules = {"analysis.x": tmp_path / "x.py", "experiments.conductor": tmp_path / "c.py"}
    modules["analysis.x"].write_text("def f():\n    from experiments.conductor import drive\n")
    assert _imports(modules["analysis.x"], modules) == {"experiments.conductor"}
