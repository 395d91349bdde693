"""experiments.compose composes conf/ with Hydra's core plugins only: a third-party ``hydra_plugins`` module in the
environment (multi-storage-client installs one with Megatron-Bridge; 0.8 s of imports on the H200) is not imported
by a plan, while plain Hydra in the same environment imports it; after the plan the package imports normally and
Hydra's registry holds its core plugins; a registry made before is used as it is. Fresh interpreters: Hydra's
plugin registry is a per-process singleton."""

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
AFTER = """
import os, sys
from experiments.plan import make_plan
make_plan(["action=plan", "output_dir={out}"])
assert not os.path.exists({mark!r}), "imported during the plan"
from hydra.core.plugins import Plugins
from hydra.plugins.config_source import ConfigSource
sources = {{c.__name__ for c in Plugins.instance().discover(ConfigSource)}}
assert {{"FileConfigSource", "ImportlibResourcesConfigSource", "StructuredConfigSource"}} <= sources, sources
import hydra_plugins.third_party  # the real package, importable again
"""
BEFORE = """
from hydra.core.plugins import Plugins
registry = Plugins.instance()  # a caller's registry, with the environment's plugins
from experiments.plan import make_plan
make_plan(["action=plan", "output_dir={out}"])
assert Plugins.instance() is registry
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


def test_after_the_plan_the_package_imports_and_the_registry_has_the_core_plugins(tmp_path):
    assert _run(tmp_path, AFTER.format(out=tmp_path / "plan", mark=str(tmp_path / "imported"))) is True


def test_a_registry_made_before_is_used_as_it_is(tmp_path):
    assert _run(tmp_path, BEFORE.format(out=tmp_path / "plan")) is True  # made with the plugin, kept
