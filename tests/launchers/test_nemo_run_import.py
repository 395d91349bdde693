"""The launchers import NeMo-Run as it is (``launchers.home.nemo_run``: a function-local ``import nemo_run``), so
NeMo-Run works in full afterwards: its YAML serialisation of a torch dtype and every executor it exports. A fresh
interpreter, as the CLI has, because the YAML representer is registered when NeMo-Run is first imported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

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
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    res = subprocess.run([sys.executable, "-c", CODE], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stderr[-3000:]
