"""scripts/gpu/deps.py: the device bundle and the device import check come from pyproject.toml (issue 16)."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "gpu"))
import deps  # noqa: E402


def _names(pins):
    return {p.split("==")[0] for p in pins}


def test_bundle_covers_every_runtime_dependency():
    runtime = {deps.parse_requirement(r)[0] for r in tomllib.loads((ROOT / "pyproject.toml").read_text())
               ["project"]["dependencies"]}
    carried = _names(deps.carry())
    assert runtime <= carried | deps.ON_IMAGE, runtime - carried - deps.ON_IMAGE
    assert {"google-re2", "sqlalchemy", "psycopg", "psycopg-binary", "hydra-core", "nemo-run"} <= carried
    assert not carried & deps.ON_IMAGE
    assert all(re.fullmatch(r"[a-z0-9-]+==[\w.]+", p) for p in deps.carry())


def test_image_packages_are_on_the_device_image_list():
    """ON_IMAGE may only name packages the device's image lists (KINDS.md list, copied in the docstring's date)."""
    image = {"rich", "numpy", "scipy", "matplotlib", "filelock", "pyarrow", "pyyaml", "torch"}
    assert deps.ON_IMAGE <= image


def test_gpu_extra_matches_the_container_profile():
    prof = yaml.safe_load((ROOT / "conf" / "container" / "mbridge_0_6_h200.yaml").read_text())
    pins = dict(p.split("==") for p in deps.gpu())
    assert pins["megatron-core"] == prof["megatron_core"]
    assert pins["megatron-bridge"] == prof["megatron_bridge"]
    assert pins["transformer-engine"] == prof["transformer_engine"]
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["gpu"]
    assert any(r.startswith("transformer-engine[pytorch") for r in extra)  # the torch extension too


def test_imports_list_has_every_runtime_dependency():
    mods = deps.imports()
    assert {"re2", "pyarrow", "psycopg", "hydra", "nemo_run", "sqlalchemy", "megatron.bridge",
            "transformer_engine"} <= set(mods)


def test_prepare_workstation_and_device_stage_read_deps():
    prep = (ROOT / "scripts" / "gpu" / "prepare_workstation.sh").read_text()
    assert "scripts/gpu/deps.py" in prep
    assert all(f"$DEPS {cmd}" in prep for cmd in ("carry", "gpu", "version transformer-engine"))
    assert "megatron-core==" not in prep and "hydra-core==" not in prep  # no second copy of the pins
    stage = (ROOT / "scripts" / "gpu" / "device_stage.sh").read_text()
    assert "deps.py\" imports" in stage


def test_cli_prints_versions():
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu" / "deps.py"), "version", "megatron-core"],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out == "0.19.2"
    bad = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu" / "deps.py"), "nope"], capture_output=True)
    assert bad.returncode == 2


def test_sequence_prints_every_part_then_the_runs(tmp_path):
    import shutil

    repo = tmp_path / "r"
    (repo / "scripts" / "gpu").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "gpu" / "sequence.sh", repo / "scripts" / "gpu")
    for k in (1, 2, 3):
        (repo / ".gpu" / f"c{k}").mkdir(parents=True)
    out = subprocess.run(["bash", str(repo / "scripts" / "gpu" / "sequence.sh")], capture_output=True, text=True,
                         check=True).stdout
    calls = [line for line in out.splitlines() if line.startswith("run(")]
    assert [c.split('"')[1] for c in calls[:3]] == [".gpu/c1", ".gpu/c2", ".gpu/c3"]
    assert "info matmul recv" in calls[0] and "assemble install build_ext imports orch smoke" in calls[2]
    assert "h200_overhead.sh default" in calls[3] and out.rstrip().endswith("give_back()")
