"""Import NeMo-Run without the two stacks it imports unconditionally and this tool never uses (issue 16).

NeMo-Run 0.11.1's ``import nemo_run`` imports:

- torch, only to register a YAML representer of ``torch.dtype`` (``nemo_run/core/serialization/yaml.py``, inside a
  ``try`` for ``ModuleNotFoundError``); the launchers never hand it a dtype. Blocked with ``sys.modules["torch"] =
  None``, the import fails as if torch were absent, which NeMo-Run handles (1.5 s instead of 4.5 s here);
- the Lepton executor's SDK, ``leptonai`` (``nemo_run/core/execution/lepton.py`` and ``run/ray/lepton.py``
  import ``leptonai.api.v2.client`` and ``leptonai.api.v1.types.*`` at module level), which imports the leptonai
  photon server stack: fastapi, pydantic, starlette, huggingface_hub, 620 modules. It was half of the import:
  2.0-2.3 s against 1.0-1.1 s here, 1.5 s of the 3.1 s on the lent H200. This tool launches through the
  ``LocalExecutor`` and the ``SlurmExecutor`` only (conf/cluster ``executor: local | slurm``), so during the import
  ``leptonai`` and its submodules are empty stand-in modules whose every name is :class:`LeptonUnavailable`;
  ``nemo_run.LeptonExecutor`` exists but cannot be built in this process.

``networkx``, which NeMo-Run imports at module level but uses only inside ``Experiment.run`` (the job graph), is
loaded lazily (:data:`LAZY`, :class:`importlib.util.LazyLoader`): a real module whose code runs on its first
attribute access, so nothing changes for a caller, and an ``action=plan`` never loads it (0.1-0.2 s of the
1.0-1.1 s import here; issue 17). ``requests`` and ``graphviz`` were tried too: other modules of the import use
them at once, so they are not listed.

Both stand-ins leave ``sys.modules`` afterwards, so a later ``import torch`` or ``import leptonai`` gets the real
package. When the import fails with the stand-ins in place (a NeMo-Run release that uses leptonai at import time),
every partly imported ``nemo_run``/``leptonai`` module is dropped and NeMo-Run is imported plainly.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from types import ModuleType

STAND_IN = "leptonai"  # the package stood in for during the import of NeMo-Run
LAZY = ("networkx",)  # loaded on first use when first imported by NeMo-Run's import


class LeptonUnavailable:
    """Every name NeMo-Run imports from ``leptonai`` while the sweep imports NeMo-Run.

    Raises:
        RuntimeError: when built: the Lepton executor is not available in the sweep's process.
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise RuntimeError("NeMo-Run's Lepton executor is not available in the sweep (it launches through the "
                           "local and Slurm executors; launchers/nemorun_import.py)")

    def __class_getitem__(cls, item: object) -> type:
        return cls


class _StandInModule(types.ModuleType):
    def __getattr__(self, name: str) -> type:
        if name.startswith("__"):
            raise AttributeError(name)
        return LeptonUnavailable


class _StandInFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path: object, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if fullname == STAND_IN or fullname.startswith(STAND_IN + "."):
            return importlib.util.spec_from_loader(fullname, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return _StandInModule(spec.name)

    def exec_module(self, module: ModuleType) -> None:
        module.__path__ = []  # type: ignore[attr-defined]  # a package, so that submodule imports resolve here


class _LazyFinder(importlib.abc.MetaPathFinder):
    """The real module spec of a :data:`LAZY` package, with its loader wrapped in ``LazyLoader``."""

    def find_spec(self, fullname: str, path: object, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in LAZY:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)  # type: ignore[arg-type]
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        spec.loader = importlib.util.LazyLoader(spec.loader)
        return spec


def _drop(prefixes: tuple[str, ...]) -> None:
    for name in [n for n in sys.modules if n.split(".", 1)[0] in prefixes]:
        del sys.modules[name]


def import_nemo_run() -> ModuleType:
    """``import nemo_run``, without torch and with ``leptonai`` stood in for when neither is imported yet."""
    if "nemo_run" in sys.modules:
        return sys.modules["nemo_run"]
    block_torch = "torch" not in sys.modules
    stand_in = STAND_IN not in sys.modules
    finder = _StandInFinder()
    lazy = _LazyFinder()
    if block_torch:
        sys.modules["torch"] = None  # type: ignore[assignment]
    if stand_in:
        sys.meta_path.insert(0, finder)
    sys.meta_path.insert(0, lazy)
    try:
        import nemo_run
    except Exception:  # noqa: BLE001 - a release that needs the real packages at import time: import it plainly
        if stand_in:
            sys.meta_path.remove(finder)
            _drop(("nemo_run", STAND_IN))
            stand_in = False
        if block_torch and sys.modules.get("torch", 0) is None:
            del sys.modules["torch"]
            block_torch = False
        import nemo_run
    finally:
        sys.meta_path.remove(lazy)
        if stand_in:
            sys.meta_path.remove(finder)
            _drop((STAND_IN,))  # nemo_run's modules keep their references; a later import gets the real package
        if block_torch and sys.modules.get("torch", 0) is None:
            del sys.modules["torch"]
    return nemo_run
