"""The launchers import NeMo-Run through ``launchers.home.nemo_run`` (a function-local import; without torch for the
releases that import it only for a YAML representer, launchers/nemorun_torch.py), and
NeMo-Run works in full afterwards: its YAML serialisation of a torch dtype and every executor it exports. A fresh
interpreter, as the CLI has, because the YAML representer is registered when NeMo-Run is first imported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

def _fresh(code: str) -> str:
    """Run ``code`` in a fresh interpreter with this tree first on the path; returns its stdout, stripped."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout.strip()


CODE = """
import sys
assert "nemo_run" not in sys.modules
from launchers.home import nemo_run
run = nemo_run()
import torch
from nemo_run.core.serialization.yaml import YamlSerializer
text = YamlSerializer().serialize(run.Config(dict, dtype=torch.bfloat16))
assert "_target_: torch.bfloat16" in text, text
executors = [n for n in dir(run) if n.endswith("Executor") and n != "Executor"]
assert {"LocalExecutor", "SlurmExecutor", "LeptonExecutor", "DockerExecutor"} <= set(executors), executors
for name in executors:
    assert isinstance(getattr(run, name), type), name
from nemo_run.core.execution.lepton import LeptonExecutor
LeptonExecutor(container_image="x", nemo_run_dir="/x", mounts=[])
import launchers.archive  # the packager subclass imports NeMo-Run's module plainly too
print("ok")
"""


@pytest.mark.megatron  # torch
def test_nemo_run_works_in_full_after_the_launchers_import_it() -> None:
    assert _fresh(CODE).endswith("ok")


TORCH_KEPT_OUT = """
import sys
from launchers.home import nemo_run
nemo_run()
import launchers.archive
print("torch" in sys.modules)
"""


@pytest.mark.megatron  # torch installed
def test_the_pinned_nemo_run_is_imported_without_torch() -> None:
    """NeMo-Run 0.11.1 imports torch only for its dtype representer; the conductor never needs torch."""
    assert _fresh(TORCH_KEPT_OUT) == "False"


OTHER_VERSION = """
import sys
import launchers.nemorun_torch as nt
nt.TORCH_AT_IMPORT = frozenset({"0.0.0"})
nt.import_nemo_run()
print("torch" in sys.modules, any(type(f).__name__ == "_AfterImport" for f in sys.meta_path))
"""


@pytest.mark.megatron  # torch installed
def test_other_nemo_run_versions_are_imported_plainly() -> None:
    assert _fresh(OTHER_VERSION) == "True False"


def test_after_import_runs_the_hook_once_after_the_module_code() -> None:
    """The hook sees the module fully executed, runs once, and the finder leaves sys.meta_path."""
    code = """
import sys
from launchers.nemorun_torch import after_import
seen = []
after_import("colorsys", lambda m: seen.append(hasattr(m, "rgb_to_hsv")))
assert "colorsys" not in sys.modules
import colorsys
import importlib; importlib.reload(colorsys)
after_import("colorsys", lambda m: seen.append("now"))
print(seen, any(type(f).__name__ == "_AfterImport" for f in sys.meta_path))
"""
    assert _fresh(code) == "[True, 'now'] False"
