"""Plan-time warnings a user must see: a dirty tree for a Slurm plan (CONTRACTS §1 ``allow_dirty``), a
``cluster.secret_env`` name set nowhere; and ``sweep_id=latest`` names the sweep it resolved to before acting."""

from __future__ import annotations

import json

import experiments.plan as plan_mod
from experiments.sweep import main


def test_a_plan_of_a_dirty_tree_prints_the_warning_it_records(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")  # a wide console: rich folds a long line on a narrow one
    monkeypatch.setattr(plan_mod, "git_state", lambda *a: ("0123abc", True))  # uncommitted changes, as git says
    out = tmp_path / "s"
    assert main(["action=plan", "cluster=local_slurm", f"output_dir={out}"]) == 0
    printed = capsys.readouterr().out
    assert "warning: submitting this plan will be refused: the git tree has uncommitted changes" in printed
    assert any("uncommitted changes" in w for w in json.loads((out / "manifest.json").read_text())["warnings"])


def test_a_secret_env_name_set_nowhere_is_named_at_plan_time(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")  # a wide console: rich folds a long line on a narrow one
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    out = tmp_path / "s"
    assert main(["action=plan", f"output_dir={out}", "cluster.secret_env=[NOT_SET_ANYWHERE]"]) == 0
    printed = capsys.readouterr().out
    assert "warning: cluster.secret_env names NOT_SET_ANYWHERE, not set in this environment" in printed
    assert any("NOT_SET_ANYWHERE" in w for w in json.loads((out / "manifest.json").read_text())["warnings"])
    monkeypatch.setenv("NOT_SET_ANYWHERE", "a-real-looking-credential")
    assert main(["action=plan", f"output_dir={tmp_path / 't'}", "cluster.secret_env=[NOT_SET_ANYWHERE]"]) == 0
    assert "NOT_SET_ANYWHERE" not in capsys.readouterr().out


def test_latest_names_the_sweep_before_acting_on_it(tmp_path, capsys):
    root = tmp_path / "results"
    from contracts.manifest import Manifest
    from contracts.sweepdir import SweepDir

    def submit(m):  # a job was submitted (latest takes only such sweeps, but for a resume)
        m.variants[0].new_attempt(0).set(status="submitted", job_id="42")
    for _ in range(2):
        assert main(["action=plan", "sweep=nightly", f"results_root={root}"]) == 0
    for folder in (root / "nightly").iterdir():
        Manifest.update(SweepDir(folder), submit)
    newest = sorted(p.name for p in (root / "nightly").iterdir())[-1]
    capsys.readouterr()
    assert main(["action=status", "sweep=nightly", "sweep_id=latest", f"results_root={root}"]) == 0
    err = capsys.readouterr().err
    assert f"sweep_id=latest is sweep {newest} ({root / 'nightly' / newest}): the newest sweep with a job " in err
