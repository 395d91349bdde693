"""CASES C11 (NeMo-Run PR 556): env values and srun arguments with commas and spaces stay one shell word."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from contracts.records import safe_name
from launchers.errors import LaunchConfigError
from launchers.render import render_job_script
from launchers.spec import JobCommand, RunSpec, check_task_name
from tests.launchers.conftest import profile

ENV = {"NCCL_IB_HCA": "mlx5_0,mlx5_1", "TAG": "a b"}


def _script(sweep: Path, name: str = "local_slurm", **over) -> str:
    prof = profile(name, env_vars={**profile(name).env_vars, **ENV}, **over)
    spec = RunSpec(variant="a2a.ovl1.dw0", variant_json=sweep / "variants" / "a2a.ovl1.dw0" / "variant.json")
    return render_job_script(prof, spec, state_dir=sweep / "nemo_run", label="s1", python="python",
                             srun_args=["--comment=two words"])


def _line(text: str, start: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.startswith(start)]
    assert lines, f"no line starting with {start!r}"
    return lines[0]


@pytest.mark.parametrize("name", ["local_slurm", "h100_slurm"])
def test_env_values_and_srun_args_stay_one_word(sweep: Path, name: str, no_host_secrets: None) -> None:
    text = _script(sweep, name)
    subprocess.run(["bash", "-n"], input=text, text=True, check=True)
    assert shlex.split(_line(text, "export TAG=")) == ["export", "TAG=a b"]
    assert shlex.split(_line(text, "export NCCL_IB_HCA=")) == ["export", "NCCL_IB_HCA=mlx5_0,mlx5_1"]
    srun = shlex.split(_line(text, "srun --output"))
    assert "--comment=two words" in srun
    assert srun[-4:] == ["--attempt", "1", "--mode", "validate"] or srun[-2:] == ["--attempt", "1"]


def test_exports_evaluate_to_the_values_in_bash(sweep: Path, no_host_secrets: None) -> None:
    exports = "\n".join(ln for ln in _script(sweep).splitlines() if ln.startswith("export "))
    out = subprocess.run(["bash", "-c", exports + '\nprintf "%s|%s" "$TAG" "$NCCL_IB_HCA"'],
                         capture_output=True, text=True, check=True).stdout
    assert out == "a b|mlx5_0,mlx5_1"


def test_command_words_with_spaces_survive(sweep: Path, no_host_secrets: None) -> None:
    cmd = JobCommand(name="smoke", argv=("python", "-c", "print('x y')"), env={"NOTE": "p q"})
    text = render_job_script(profile("local_slurm"), cmd, state_dir=sweep / "nemo_run", label="s1")
    srun = shlex.split(_line(text, "srun --output"))
    assert srun[-4:] == ["env", "python", "-c", "print('x y')"]
    assert shlex.split(_line(text, "export NOTE=")) == ["export", "NOTE=p q"]


@pytest.mark.parametrize("raw", ["a2a ovl1", "a2a,ovl1", "ep=16", "x'y"])
def test_unsafe_variant_names_are_refused_and_safe_names_accepted(raw: str, tmp_path: Path) -> None:
    with pytest.raises(LaunchConfigError, match="not safe"):
        check_task_name(raw)
    assert check_task_name(safe_name(raw)) == safe_name(raw)
