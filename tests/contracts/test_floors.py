"""The import structure: contracts at the bottom, launchers and analysis above it knowing only the contracts,
experiments (planner and conductor) on top; the payload imports only contracts and itself; no import circles,
function-level imports included. Inside analysis/, rooms on floors of their own (:data:`ANALYSIS_FLOORS`): each
sub-package imported through its face, no private name crossing a room; and module by module, no chain of imports
longer than :data:`MAX_ANALYSIS_FLOORS` modules (:func:`module_floors`).

``python tests/contracts/test_floors.py`` prints each analysis module's floor and the longest chain."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("contracts", "launchers", "analysis", "experiments")
FLOOR = {"contracts": 0, "launchers": 1, "analysis": 1, "experiments": 2}
# the rooms of analysis/ (a sub-package is one room, a top-level module another) and their floors: an import goes
# down a floor or stays in its room, never up, never sideways (judge and measure know nothing of each other)
ANALYSIS_FLOORS = {
    "analysis": 0, "analysis.options": 0, "analysis.files": 0, "analysis.console": 0,
    "analysis.logs": 1,
    "analysis.judge": 2, "analysis.measure": 2,
    "analysis.analyze": 3, "analysis.render": 3, "analysis.plots": 3, "analysis.history": 3,
    "analysis.reportset": 4,
    "analysis.api": 5, "analysis.report": 5,
}
# module by module: the most modules one chain of imports inside analysis/ may pass through (see module_floors)
MAX_ANALYSIS_FLOORS = 7


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for p in (REPO / pkg).rglob("*.py"):
            parts = list(p.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = p
    return out


def _face(package: Path) -> dict[str, str]:
    """A room's face, ``{public name: module}``, read from the ``face(__name__, {...})`` call of its __init__."""
    for node in ast.walk(ast.parse((package / "__init__.py").read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "face":
            table = ast.literal_eval(node.args[1])
            return {name: f"{package.name}.{module}" if module else f"{package.name}.{name}"
                    for module, names in table.items() for name in names}
    return {}


def _faces(modules: dict[str, Path]) -> dict[str, dict[str, str]]:
    """Every package with a face: ``{package: {public name: module it lives in}}``."""
    out = {}
    for mod, path in modules.items():
        if path.name == "__init__.py" and (table := _face(path.parent)):
            out[mod] = {name: f"{mod.rpartition('.')[0]}.{where}".lstrip(".") for name, where in table.items()}
    return out


def _import_nodes(path: Path):
    """``(node, names)`` per import of ``path``: the dotted names it reaches, before resolution to modules."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield node, [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node, [f"{node.module}.{a.name}" for a in node.names]


def _imports(path: Path, modules: dict[str, Path], faces: dict[str, dict[str, str]] | None = None) -> set[str]:
    """Project modules imported anywhere in ``path`` (module level and inside functions); a name taken from a
    face counts as an import of the module that holds it."""
    faces = _faces(modules) if faces is None else faces
    found = set()
    for node, dotted in _import_nodes(path):
        names = []
        for d in dotted:
            package, _, name = d.rpartition(".")
            if isinstance(node, ast.ImportFrom) and name in faces.get(package, {}):
                names.append(faces[package][name])
            elif isinstance(node, ast.ImportFrom) and d not in modules:
                names.append(node.module)  # ``from pkg import name`` depends on pkg
            else:
                names.append(d)
        for n in names:
            while n and n not in modules:
                n = n.rpartition(".")[0]
            if n:
                found.add(n)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    faces = _faces(modules)
    return {m: _imports(p, modules, faces) - {m} for m, p in modules.items()}


def _room(module: str) -> str:
    """The room of an analysis module: its sub-package, or the module itself at the top of analysis/; elsewhere
    a module's package."""
    if module.startswith("analysis"):
        return ".".join(module.split(".")[:2])
    return module.rpartition(".")[0] or module


def _analysis_modules(graph: dict[str, set[str]], modules: dict[str, Path]) -> dict[str, set[str]]:
    """The import graph between the modules of analysis/ (``graph`` as :func:`_graph` reads it: module level and
    inside functions, a name taken from a face counted as its module). A package with a face (its ``__init__``)
    counts as the modules its face re-exports: it imports each of them."""
    out = {m: {d for d in deps if d.startswith("analysis")} for m, deps in graph.items() if m.startswith("analysis")}
    for package, table in _faces(modules).items():
        if package in out:
            out[package] |= set(table.values())
    return out


def module_floors(graph: dict[str, set[str]]) -> tuple[dict[str, int], list[str]]:
    """Each module's floor and the longest chain of imports, in an acyclic ``graph`` (``{module: imported}``).

    A module's floor is the number of modules on the longest chain of imports that starts at it: 1 for a module
    that imports none of ``graph``, else one more than the highest floor among those it imports. The highest floor
    is how many floors the graph stands on; the chain returned (top module first) reaches it.

    Raises:
        ValueError: ``graph`` has an import circle (no floors then; :func:`test_no_import_circles` names it).
    """
    floor: dict[str, int] = {}
    busy: set[str] = set()

    def visit(m: str) -> int:
        if m in floor:
            return floor[m]
        if m in busy:
            raise ValueError(f"import circle through {m}")
        busy.add(m)
        floor[m] = 1 + max((visit(d) for d in graph.get(m, ())), default=0)
        busy.discard(m)
        return floor[m]

    for m in sorted(graph):
        visit(m)
    chain = [max(sorted(floor), key=floor.__getitem__)] if floor else []
    while chain and graph.get(chain[-1]):
        chain.append(max(sorted(graph[chain[-1]]), key=floor.__getitem__))
    return floor, chain


def test_analysis_modules_stand_on_at_most_seven_floors() -> None:
    """Module by module, the longest chain of imports inside analysis/ passes through at most 7 modules."""
    modules = _modules()
    floor, chain = module_floors(_analysis_modules(_graph(), modules))
    assert len(chain) == max(floor.values())
    assert len(chain) <= MAX_ANALYSIS_FLOORS, (
        f"analysis/ stands on {len(chain)} floors (at most {MAX_ANALYSIS_FLOORS}): " + " -> ".join(chain))


def test_the_floor_count_sees_a_long_chain_and_a_face(tmp_path: Path) -> None:
    """The count can fail: eight modules in a chain stand on eight floors, a face counts as the modules it
    re-exports, and a circle has no floors."""
    chain = [f"analysis.m{i}" for i in range(8)]
    graph = {m: {below} for m, below in zip(chain, chain[1:], strict=False)} | {chain[-1]: set()}
    floor, longest = module_floors(graph)
    assert longest == chain and floor[chain[0]] == 8 > MAX_ANALYSIS_FLOORS
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "__init__.py").write_text('__getattr__, __all__ = face(__name__, {"parse": ("parse_files",)})\n')
    (tmp_path / "logs" / "parse.py").write_text("from analysis.logs.records import ParsedLog\n")
    (tmp_path / "logs" / "records.py").write_text("class ParsedLog: ...\n")
    (tmp_path / "api.py").write_text("import analysis.logs\n")
    modules = {"analysis": tmp_path / "a.py", "analysis.logs": tmp_path / "logs" / "__init__.py",
               "analysis.logs.parse": tmp_path / "logs" / "parse.py",
               "analysis.logs.records": tmp_path / "logs" / "records.py", "analysis.api": tmp_path / "api.py"}
    (tmp_path / "a.py").write_text("")
    faces = _faces(modules)
    graph = _analysis_modules({m: _imports(p, modules, faces) - {m} for m, p in modules.items()}, modules)
    assert graph["analysis.logs"] == {"analysis.logs.parse"}
    assert module_floors(graph)[1] == ["analysis.api", "analysis.logs", "analysis.logs.parse", "analysis.logs.records"]
    try:
        module_floors({"analysis.a": {"analysis.b"}, "analysis.b": {"analysis.a"}})
    except ValueError as e:
        assert "circle" in str(e)
    else:
        raise AssertionError("a circle was given floors")


def _analysis_rooms() -> dict[str, set[str]]:
    rooms: dict[str, set[str]] = {}
    for mod, deps in _graph().items():
        if mod.startswith("analysis"):
            rooms.setdefault(_room(mod), set()).update(_room(d) for d in deps if d.startswith("analysis"))
    return {r: deps - {r} for r, deps in rooms.items()}


def test_analysis_stands_in_rooms_on_few_floors_imported_only_down() -> None:
    rooms = _analysis_rooms()
    assert set(rooms) == set(ANALYSIS_FLOORS), "rooms without a floor: " + ", ".join(
        sorted(set(rooms) ^ set(ANALYSIS_FLOORS)))
    up = [f"{r} -> {d}" for r, deps in rooms.items() for d in deps if ANALYSIS_FLOORS[d] >= ANALYSIS_FLOORS[r]]
    assert not up, "analysis imports up or sideways: " + "; ".join(sorted(up))
    assert len(set(ANALYSIS_FLOORS.values())) <= MAX_ANALYSIS_FLOORS


def _outside_faces(path: Path, room: str, modules: dict[str, Path],
                   faces: dict[str, dict[str, str]]) -> list[str]:
    """Imports in ``path`` (of ``room``) that reach into another package with a face other than by a public name
    of that face, or that take a private name from another room."""
    bad = []
    for node, dotted in _import_nodes(path):
        for d in dotted:
            package, _, name = d.rpartition(".")
            target = d if d in modules else package
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if not target or _room(target) == room or not target.startswith(tuple(faces)):
                if name.startswith("_") and not name.startswith("__") and target and _room(target) != room:
                    bad.append(f"{path.name}: private {d}")
                continue
            owner = next(f for f in faces if target == f or target.startswith(f + "."))
            if not (isinstance(node, ast.ImportFrom) and node.module == owner and name in faces[owner]):
                bad.append(f"{path.name}: {d} (not on the face of {owner})")
    return bad


def test_the_rooms_are_entered_through_their_faces_and_no_private_name_crosses() -> None:
    modules = _modules()
    faces = _faces(modules)
    assert {"analysis.logs", "analysis.judge", "analysis.measure"} <= set(faces)
    bad = [b for m, p in modules.items() for b in _outside_faces(p, _room(m), modules, faces)]
    assert not bad, "; ".join(sorted(bad))


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


def test_the_checker_sees_a_bypassed_face_and_a_private_name(tmp_path: Path) -> None:
    """The face rule can fail: a judge module importing a logs module directly, or a private name of it."""
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "__init__.py").write_text('__getattr__, __all__ = face(__name__, {"parse": ("parse_files",)})\n')
    (tmp_path / "logs" / "parse.py").write_text("def parse_files(): ...\n_x = 1\n")
    modules = {"analysis": tmp_path / "a.py", "analysis.logs": tmp_path / "logs" / "__init__.py",
               "analysis.logs.parse": tmp_path / "logs" / "parse.py", "analysis.judge.x": tmp_path / "x.py"}
    faces = _faces(modules)
    assert faces == {"analysis.logs": {"parse_files": "analysis.logs.parse"}}
    good, bad = tmp_path / "good.py", modules["analysis.judge.x"]
    good.write_text("from analysis.logs import parse_files\n")
    bad.write_text("from analysis.logs.parse import parse_files\nfrom analysis.logs.parse import _x\n")
    assert _outside_faces(good, "analysis.judge", modules, faces) == []
    assert _imports(good, modules, faces) == {"analysis.logs.parse"}
    found = _outside_faces(bad, "analysis.judge", modules, faces)
    assert len(found) == 2 and any("not on the face" in f for f in found)


if __name__ == "__main__":
    _found, _chain = module_floors(_analysis_modules(_graph(), _modules()))
    for _m in sorted(_found, key=lambda m: (_found[m], m)):
        print(_found[_m], _m)
    print(f"{len(_chain)} floors (at most {MAX_ANALYSIS_FLOORS}): " + " -> ".join(_chain))
