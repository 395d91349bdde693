"""The plan renders one template per shape and writes what a dry run per variant writes: job.sh as NeMo-Run's dry run
renders it, also when the template comes from the disk cache without importing NeMo-Run; a manifest marked complete
in place equals a full locked update; and the plan imports no SciPy, SQLAlchemy or matplotlib (nor, with the
template cached, NeMo-Run or torch)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from contracts.atomic import dumps
from contracts.manifest import PLAN_COMPLETE, PLAN_STATE, Manifest
from contracts.sweepdir import SweepDir
from experiments.plan import make_plan, render_job

REPO = Path(__file__).resolve().parents[2]
OVERRIDES = ["action=plan", "sweep=full", "cluster=h100_slurm", "model=qwen3_30b_a3b", "max_gpu_hours=1e9",
             "model.global_batch_size=64,128"]
HEAVY = ("nemo_run", "scipy", "sqlalchemy", "matplotlib", "torch")


def _plan(out: Path, cache: Path | None = None) -> list[str]:
    code = ("import sys, json; from experiments.sweep import main; rc = main(sys.argv[1:]); "
            f"print(json.dumps([rc, [m for m in {HEAVY!r} if m in sys.modules]]))")
    env = {**os.environ, "PYTHONPATH": str(REPO), **({"MOE_SWEEP_CACHE": str(cache)} if cache else {})}
    res = subprocess.run([sys.executable, "-c", code, *OVERRIDES, f"output_dir={out}"], cwd=REPO, check=True,
                         capture_output=True, text=True, env=env)
    rc, imported = json.loads(res.stdout.strip().splitlines()[-1])
    assert rc == 0, res.stderr
    return imported


@pytest.mark.slow
def test_a_cached_plan_writes_the_dry_run_scripts_without_nemo_run(tmp_path: Path) -> None:
    first, second, cache = tmp_path / "one" / "s", tmp_path / "two" / "results" / "s", tmp_path / "cache"
    # the first plan renders its one template by a NeMo-Run dry run (NeMo-Run 0.11.1 imported without torch:
    # launchers/nemorun_torch.py), the second finds it
    assert set(_plan(first, cache)) == {"nemo_run"}
    assert len(list((cache / "job-templates").glob("*.sh"))) == 1
    assert _plan(second, cache) == []  # on disk
    assert len(list((cache / "job-templates").glob("*.sh"))) == 1
    scripts = sorted((second / "variants").glob("*/job.sh"))
    assert len(scripts) > 10
    for path in scripts:
        before = (first / path.relative_to(second)).read_text()
        assert path.read_text() == before.replace(str(first), str(second))
    plan = make_plan([*OVERRIDES, f"output_dir={second}"])
    for v in [v for v in plan.variants if v.status != "pruned"][::7]:  # the full dry run, variant by variant
        assert render_job(plan, v, second / "variants" / v.name / "variant.json") == (
            second / "variants" / v.name / "job.sh").read_text()


@pytest.mark.slow
def test_the_completed_manifest_is_what_a_full_update_writes(tmp_path: Path) -> None:
    out = tmp_path / "s"
    _plan(out)
    sd = SweepDir(out)
    text = sd.manifest.read_text()
    m = Manifest.load(sd)
    assert m.extra[PLAN_STATE] == PLAN_COMPLETE
    assert dumps(m.to_json()) == text


def test_mark_complete_falls_back_to_a_full_update_when_the_file_changed(tmp_path: Path) -> None:
    sd = SweepDir(tmp_path / "s")
    m = Manifest(sweep_id="20261201-000000Z-abcdef", name="full", extra={PLAN_STATE: "writing"})
    written = m.create(sd)
    Manifest.update(sd, lambda x: x.extra.__setitem__("note", "another writer"))
    Manifest.mark_plan_complete(sd, written)
    again = Manifest.load(sd)
    assert again.extra[PLAN_STATE] == PLAN_COMPLETE and again.extra["note"] == "another writer"
