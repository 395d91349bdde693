"""The sweep's own settings reach the stages they belong to: ``analysis.*`` changes the report, and
``cluster.time_limit`` means what Slurm means in job.sh, in the GPU-hour estimate and in the local enforcement."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contracts.manifest import Manifest
from contracts.sweepdir import SweepDir
from experiments.conductor.tracking import _time_limit_s
from experiments.plan import make_plan, write_plan
from experiments.sweep import main
from tests.analysis.synth import effective_config, make_sweep, training_log

A2A0 = {"dispatcher": "alltoall", "overlap": False, "delay_wgrad": False}
A2A1 = {"dispatcher": "alltoall", "overlap": True, "delay_wgrad": False}


def _sweep(root: Path) -> Path:
    """A finished local sweep: the baseline and an overlap arm whose lm loss is 1.5% higher throughout."""
    sw = make_sweep(root, [
        {"name": "a2a.ovl0.dw0", "dispatcher": "alltoall", "overlap": False, "delay_wgrad": False, "role": "baseline",
         "attempts": [{"lines": training_log(30), "effective": effective_config("a2a.ovl0.dw0", A2A0)}]},
        {"name": "a2a.ovl1.dw0", "dispatcher": "alltoall", "overlap": True, "delay_wgrad": False,
         "attempts": [{"lines": training_log(30, loss=lambda i: (10.0 - 0.1 * i) * 1.015),
                       "effective": effective_config("a2a.ovl1.dw0", A2A1)}]}])
    m = json.loads((sw / "manifest.json").read_text())
    m["config"] = {"cluster": {"name": "local", "executor": "local", "gpus_per_node": "auto"},
                   "analysis": {"warmup_iters": None, "loss_tolerance": 0.02, "bootstrap": 2000}}
    (sw / "manifest.json").write_text(json.dumps(m))
    return sw


def _summary(sw: Path) -> dict:
    return json.loads((sw / "report" / "summary.json").read_text())


def test_analysis_options_on_the_command_line_change_the_report(tmp_path: Path) -> None:
    sw = _sweep(tmp_path)
    main(["action=collect", f"output_dir={sw}"])
    default = _summary(sw)
    assert default["runs"][0]["iterations"]["steady"] == 27  # max(3, 10% of 30)
    assert default["comparisons"][0]["loss_parity"]["ok"] is True  # 1.5% is within the default 2%
    main(["action=collect", f"output_dir={sw}", "analysis.warmup_iters=5", "analysis.loss_tolerance=0.01"])
    tuned = _summary(sw)
    assert tuned["runs"][0]["iterations"]["steady"] == 25
    assert tuned["comparisons"][0]["loss_parity"]["ok"] is False  # 1.5% is beyond 1%


@pytest.mark.parametrize("bad,match", [("analysis.loss_tolerance=abc", "analysis.loss_tolerance"),
                                       ("analysis.bootstrap=5", "bootstrap"),
                                       ("analysis.warmup_iters=-1", "warmup")])
def test_bad_analysis_options_fail_at_plan_time(tmp_path: Path, capsys, bad: str, match: str) -> None:
    assert main(["action=plan", f"output_dir={tmp_path / 's'}", bad]) == 2
    assert match in capsys.readouterr().err and not (tmp_path / "s").exists()


@pytest.mark.parametrize("limit,seconds,sbatch", [("30", 1800, "00:30:00"), ("1-12", 129600, "1-12:00:00"),
                                                  ("45:30", 2730, "00:45:30")])
def test_time_limit_means_what_slurm_means_everywhere(tmp_path: Path, limit: str, seconds: int, sbatch: str) -> None:
    out = tmp_path / "s"
    plan = make_plan(["action=plan", "cluster=local_slurm", f"cluster.time_limit={limit}", f"output_dir={out}",
                      "sweep=full", "dispatcher=alltoall", "overlap=off", "delay_wgrad=off", "allow_dirty=true"])
    job = plan.job(plan.variants[0].name)
    assert plan.gpu_hours == pytest.approx(len(plan.runs) * job.cluster.nodes * job.gpus_per_node * seconds / 3600)
    sd = SweepDir(write_plan(plan, []))
    assert f"--time={sbatch}" in sd.job_sh(plan.variants[0].name).read_text()
    assert _time_limit_s(Manifest.load(sd)) == seconds  # what the conductor enforces on cluster=local


def test_a_malformed_time_limit_exits_2_at_plan_time_and_names_the_forms(tmp_path: Path, capsys) -> None:
    assert main(["action=plan", "cluster.time_limit=99:99:99", f"output_dir={tmp_path / 's'}"]) == 2
    err = capsys.readouterr().err
    assert "cluster.time_limit='99:99:99'" in err and "D-HH:MM:SS" in err and not (tmp_path / "s").exists()
