"""The real payload through the real local Slurm: a planned variant, validate mode, 2 ranks on 2 fake GPUs.

The planner writes the variant.json (cluster=local_slurm); the launcher ships a clean clone of this repository's
HEAD (git archive) plus that file, and the payload validates the config against the megatron-core in the venv.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from launchers.batch import BatchRequest
from launchers.spec import RunSpec
from launchers.submit import submit_slurm
from launchers.track import log_files, wait
from tests.launchers.conftest import REPO

pytestmark = [pytest.mark.slurm, pytest.mark.megatron, pytest.mark.usefixtures("slurm_cluster")]


@pytest.mark.slow
def test_planned_variant_validates_on_slurm(tmp_path: Path) -> None:
    from experiments.plan import make_plan, write_plan

    plan = make_plan(["action=plan", "cluster=local_slurm", f"output_dir={tmp_path / 'sweep'}"])
    sweep = write_plan(plan, [], render=False)
    v = next(v for v in plan.variants if v.status == "planned")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--local", str(REPO), str(clone)], check=True)
    spec = RunSpec(variant=v.name, variant_json=sweep / "variants" / v.name / "variant.json", attempt=1,
                   mode="validate", hold_s=1)
    [sub] = submit_slurm(BatchRequest(cluster=plan.job(v.name).cluster, items=[spec], label="s1"),
                         state_dir=sweep / "nemo_run", repo=clone)
    final = wait([sub.job_id], timeout_s=300, poll_s=1)[sub.job_id]
    assert (final.status, final.exit_code) == ("succeeded", 0), final
    rank_log = next(p for p in log_files(sub.job_dir, sub.job_id) if p.name.startswith("log-")).read_text()
    assert rank_log.count(f"validate {v.name}: pass") == 2  # one task per (fake) GPU
    eff = json.loads((sub.job_dir / "out" / "effective_config.json").read_text())
    assert eff["variant"] == v.name and eff["attempt"] == 1 and eff["checks"]["verdict"] == "pass"
    assert str(sub.job_dir.resolve()).startswith(str((sweep / "nemo_run").resolve()))
