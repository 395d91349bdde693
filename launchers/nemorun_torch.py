"""Import NeMo-Run without importing torch into the conductor, for the NeMo-Run releases that need it.

NeMo-Run 0.11.1's ``import nemo_run`` imports torch at module level for one reason: to register a YAML
representer of ``torch.dtype`` (``nemo_run/core/serialization/yaml.py``, an ``import torch`` inside a ``try`` that
falls back when torch is absent). The conductor never handles a tensor or a dtype: the training job imports torch
itself. On the H200 host torch is 4.1 s of the 8.9 s ``import nemo_run`` (``python -X importtime``), on the path from
the command to the first launch; on a login node whose Python lives on a shared file system it is often more.

For the releases in :data:`TORCH_AT_IMPORT`, :func:`import_nemo_run` hides torch while NeMo-Run is imported
(``sys.modules["torch"] = None``: ``import torch`` raises ``ModuleNotFoundError``, the fallback NeMo-Run already
has), then un-hides it and, when torch is imported later by anyone, re-runs NeMo-Run's own YAML module so that its
own dtype representer is registered (:func:`after_import`). NeMo-Run is then complete: every executor it exports
(the Lepton SDK is imported as usual) and its YAML serialisation of a torch dtype
(tests/launchers/test_nemo_run_import.py). Any other NeMo-Run version is imported plainly.

Unnecessary once NeMo-Run imports torch lazily in ``nemo_run/core/serialization/yaml.py`` (registering the
representer when torch is first imported, or a multi-representer looked up by type name); at that release, leave
:data:`TORCH_AT_IMPORT` as it is and the plain import is used.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from collections.abc import Callable
from importlib import metadata
from types import ModuleType

TORCH_AT_IMPORT = frozenset({"0.11.1"})  # NeMo-Run releases read to import torch at import time (yaml.py)
YAML_MODULE = "nemo_run.core.serialization.yaml"  # the module whose torch branch registers the dtype representer


def import_nemo_run() -> ModuleType:
    """``import nemo_run``, without torch for the releases in :data:`TORCH_AT_IMPORT` (module doc).

    Raises:
        ImportError: NeMo-Run is not installed, or its own import fails.
    """
    if "nemo_run" in sys.modules:
        return sys.modules["nemo_run"]
    if "torch" in sys.modules or _version() not in TORCH_AT_IMPORT:
        import nemo_run

        return nemo_run
    sys.modules["torch"] = None  # type: ignore[assignment]  # ``import torch`` fails as if torch were absent
    try:
        import nemo_run
    finally:
        if "torch" in sys.modules and sys.modules["torch"] is None:
            del sys.modules["torch"]
    after_import("torch", lambda _torch: importlib.reload(sys.modules[YAML_MODULE]))
    return nemo_run


def _version() -> str | None:
    try:
        return metadata.version("nemo_run")
    except metadata.PackageNotFoundError:
        return None


def after_import(name: str, hook: Callable[[ModuleType], object]) -> None:
    """Call ``hook(module)`` once the top-level module ``name`` has been imported: at once when it already is,
    else right after its first import has run (by whichever code imports it)."""
    if name in sys.modules and sys.modules[name] is not None:
        hook(sys.modules[name])
        return
    sys.meta_path.insert(0, _AfterImport(name, hook))


class _AfterImport(importlib.abc.MetaPathFinder):
    """A finder that lets the other finders find ``name``, then runs ``hook`` after the module's code (once)."""

    def __init__(self, name: str, hook: Callable[[ModuleType], object]) -> None:
        self.name, self.hook = name, hook

    def find_spec(self, fullname, path, target=None):  # noqa: ANN001 (importlib's signature)
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader, hook = spec.loader, self.hook
        run = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run(module)
            del loader.exec_module  # the loader's own method again
            hook(module)

        loader.exec_module = exec_module  # this spec's loader object only
        return spec
