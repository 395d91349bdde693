"""Golden files of the rendered sbatch scripts (NeMo-Run's own text) for two cluster profiles.

Refresh after an intended change (then review the diff like code):
    UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/launchers/test_render_golden.py -q
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from launchers.render import render_job_script
from launchers.spec import RunSpec
from tests.launchers.conftest import profile

GOLDEN = Path(__file__).parent / "golden"
# A fixed sweep folder: it only appears in the text, nothing is written there.
STATE_DIR = "/results/isolation/20261129-160000Z-a1b2c3/nemo_run"


def _render(name: str, sweep: Path) -> str:
    spec = RunSpec(variant="a2a.ovl1.dw0", variant_json=sweep / "variants" / "a2a.ovl1.dw0" / "variant.json",
                   attempt=1, mode="validate")
    return render_job_script(profile(name), spec, state_dir=STATE_DIR, title="sweep", label="s1", python="python")


@pytest.mark.parametrize("name", ["h100_slurm", "local_slurm"])
def test_rendered_sbatch_matches_golden(name: str, sweep: Path, no_host_secrets: None) -> None:
    text = _render(name, sweep)
    golden = GOLDEN / f"{name}.sbatch.sh"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        golden.write_text(text)
    assert golden.exists(), f"missing {golden}: run with UPDATE_GOLDEN=1 once"
    assert text == golden.read_text(), f"rendered script differs from {golden} (UPDATE_GOLDEN=1 to accept)"
    subprocess.run(["bash", "-n"], input=text, text=True, check=True)


def test_container_profile_uses_pyxis_and_container_paths(sweep: Path, no_host_secrets: None) -> None:
    text = _render("h100_slurm", sweep)
    assert "--container-image nvcr.io#nvidia/nemo:26.04" in text  # registry#image, as pyxis reads it
    assert "--container-mounts /lustre:/lustre," in text
    assert "/nemo_run/code/variants/a2a.ovl1.dw0/variant.json /nemo_run/out --attempt 1 --mode validate" in text
    assert "#SBATCH --exclusive" in text and "#SBATCH --signal=TERM@60" in text


def test_bare_metal_profile_has_no_container_flags_and_real_paths(sweep: Path, no_host_secrets: None) -> None:
    text = _render("local_slurm", sweep)
    assert "--container" not in text
    job = "/results/isolation/20261129-160000Z-a1b2c3/.nemorun_home/experiments/sweep/sweep_s1/a2a.ovl1.dw0.r0.a1"
    assert f"--chdir {job}/code" in text
    assert f"{job}/code/variants/a2a.ovl1.dw0/variant.json {job}/out" in text
    # NeMo-Run rewrites '/nemo_run' in container-less scripts: the sweep's nemo_run/ is reached via the alias
    assert "/nemo_run" not in text
    assert "#SBATCH --gpus-per-node=2" in text and "#SBATCH --ntasks-per-node=2" in text
