"""The chained collect job: its sbatch text (a golden file, NeMo-Run's own rendering), its dependency on the run
jobs (NeMo-Run's ``SlurmExecutor.dependencies``), and what it refuses.

Refresh the golden file after an intended change (then review the diff like code):
    UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/launchers/test_collect_job.py -q
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from launchers.batch import BatchRequest
from launchers.collect_job import COLLECT_NAME, collect_command, dependency_handles
from launchers.errors import LaunchConfigError
from launchers.render import render_collect_script
from tests.launchers.conftest import profile

GOLDEN = Path(__file__).parent / "golden"
SWEEP = Path("/results/nightly/20261129-010000Z-a1b2c3")  # only appears in the text
REPO = Path("/home/perf/moe-overlap-sweep")
PYTHON = "/home/perf/moe-overlap-sweep/.venv/bin/python"


def _render(name: str, after: list[str], **changes) -> str:
    cmd = collect_command(SWEEP.name, SWEEP, repo=REPO, python=PYTHON)
    req = BatchRequest(cluster=profile(name, **changes), items=(cmd,), title="nightly", label="collect.1")
    return render_collect_script(req, after=after, state_dir=SWEEP / "nemo_run")


@pytest.mark.parametrize("name", ["local_slurm", "h100_slurm"])
def test_collect_sbatch_matches_golden(name: str, no_host_secrets: None) -> None:
    text = _render(name, ["101", "102", "102", "103"])
    golden = GOLDEN / f"{name}.collect.sbatch.sh"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        golden.write_text(text)
    assert golden.exists(), f"missing {golden}: run with UPDATE_GOLDEN=1 once"
    assert text == golden.read_text(), f"rendered script differs from {golden} (UPDATE_GOLDEN=1 to accept)"
    subprocess.run(["bash", "-n"], input=text, text=True, check=True)


def test_collect_waits_for_every_run_job_and_asks_for_no_gpu(no_host_secrets: None) -> None:
    text = _render("h100_slurm", ["7", "8", "7"])  # h100: 2 nodes x 8 GPUs, exclusive, a pyxis container
    lines = text.splitlines()
    assert "#SBATCH --dependency=afterany:7:8" in lines  # each job once, afterany: a failed run still collects
    assert "#SBATCH --nodes=1" in lines and "#SBATCH --ntasks-per-node=1" in lines
    assert not any("gpus" in line or "exclusive" in line or "container" in line for line in lines), text
    assert "#SBATCH --time=00:30:00" in lines and "#SBATCH --account=my_account" in lines
    run = next(line for line in lines if line.startswith("srun "))
    words = shlex.split(run)
    inner = words[words.index("bash") + 2]
    assert inner.startswith(f"cd {REPO} && exec {PYTHON} -m experiments.sweep action=collect ")
    assert f"sweep_id={SWEEP.name}" in inner and f"output_dir={SWEEP}" in inner and "detach=true" in inner


def test_dependency_handles_are_read_back_as_the_job_ids() -> None:
    from launchers.home import nemo_run

    run = nemo_run()
    handles = dependency_handles(["12", "13", "12", "14_2"])
    ex = run.SlurmExecutor(account="a", dependencies=handles, dependency_type="afterany")
    assert ex.parse_deps() == ["12", "13", "14_2"]  # NeMo-Run's own parser of the handles


@pytest.mark.parametrize("ids", [[], ["12", "abc"], [""]])
def test_bad_job_ids_are_refused_with_the_value(ids: list[str]) -> None:
    with pytest.raises(LaunchConfigError, match="job ids"):
        dependency_handles(ids)


def test_an_ssh_profile_cannot_chain_its_collect(no_host_secrets: None, tmp_path: Path) -> None:
    key = tmp_path / "id"
    key.write_text("k")
    with pytest.raises(LaunchConfigError, match="SSH"):
        _render("local_slurm", ["1"], tunnel={"kind": "ssh", "host": "h", "user": "u", "job_dir": "/scratch/j",
                                              "identity": str(key)})


def test_the_collect_command_is_one_job_named_collect() -> None:
    cmd = collect_command("20261129-010000Z-a1b2c3", Path("/r/s p"), repo=Path("/c o/de"), python="/py")
    assert cmd.name == COLLECT_NAME and cmd.argv[:2] == ("bash", "-c")
    # paths with spaces stay one word each
    assert shlex.split(cmd.argv[2]) == ["cd", "/c o/de", "&&", "exec", "/py", "-m", "experiments.sweep",
                                        "action=collect", "sweep_id=20261129-010000Z-a1b2c3", "output_dir=/r/s p",
                                        "detach=true"]
