"""experiments.compose composes conf/ with Hydra's core plugins only: a third-party ``hydra_plugins`` module in the
environment (multi-storage-client installs one with Megatron-Bridge; 0.8 s of imports on the H200) is not imported
by a plan, while plain Hydra in the same environment imports it (issue 16). Fresh interpreters: Hydra's plugin
registry is a per-process singleton."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PLAN = """
from experiments.plan import make_plan
plan = make_plan(["action=plan", "output_dir={out}"])
print(len(plan.variants))
"""
PLAIN = """
from hydra import compose, initialize_config_dir
with initialize_config_dir(config_dir="{conf}", version_base="1.3"):
    compose(config_name="config")
"""


def _run(tmp_path: Path, code: str) -> bool:
    plug = tmp_path / "site" / "hydra_plugins" / "third_party"
    plug.mkdir(parents=True, exist_ok=True)
    mark = tmp_path / "imported"
    mark.unlink(missing_ok=True)
    (plug / "__init__.py").write_text(f"open({str(mark)!r}, 'w').write('x')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(REPO)])}
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    return mark.exists()


def test_the_plan_does_not_import_third_party_hydra_plugins(tmp_path):
    assert _run(tmp_path, PLAN.format(out=tmp_path / "plan")) is False


def test_plain_hydra_in_the_same_environment_does(tmp_path):
    assert _run(tmp_path, PLAIN.format(conf=REPO / "conf")) is True  # the guard is what keeps it out
