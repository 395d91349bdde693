"""Analysis stage: parse logs, classify failures, measure, compare variants, write the report (see README.md).

Entry points: ``python -m analysis.report`` and ``analysis.report.analyze_sweep`` / ``write_report``. Nothing is
imported here, so ``import analysis.history`` stays light.

The stage stands in rooms, each a package imported through its face (its ``__init__``): ``analysis.logs`` (reading
a log: the grammar, the scanner, the failure markers and their catalogue), ``analysis.judge`` (what happened: the
findings, the timeline of causes, the launch context, the verdict), ``analysis.measure`` (how fast: statistics,
comparisons, the bound, the fixed cost, the profile breakdown, the typed results); the report (``analyze``, ``api``,
``render``, ``plots``, ``report``) and ``history/`` on top. :func:`face` builds a room's face.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def face(package: str, table: dict[str, tuple[str, ...]]) -> tuple[Callable[[str], Any], list[str]]:
    """A room's face: ``__getattr__`` and ``__all__`` for the package ``package`` whose public names are
    ``table`` (``{module: (name, ...)}``; a module listed under ``""`` is public as a whole).

    A name is imported from its module on first use (PEP 562), so ``from analysis.measure import K_MIN`` loads
    ``analysis.measure.sequential`` alone, not numpy's statistics or the log scanner (the planner imports it).

    Raises (from the returned ``__getattr__``):
        AttributeError: ``name`` is not on the face; the message lists the names that are.
    """
    from importlib import import_module

    where = {name: module for module, names in table.items() if module for name in names}
    modules = set(table.get("", ()))

    def __getattr__(name: str) -> Any:
        if name in where:
            return getattr(import_module(f"{package}.{where[name]}"), name)
        if name in modules:
            return import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no public name {name!r}; its face: {sorted(where.keys() | modules)}")

    return __getattr__, sorted(where.keys() | modules)
