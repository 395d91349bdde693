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


def test_a_history_another_process_writes_warns_of_what_that_process_will_lack(tmp_path):
    from experiments.checks import check_unattended_history

    def warn(hist, detached=True, chained=True, **env):
        return check_unattended_history({"history": {"enabled": True, **hist}}, detached=detached, chained=chained,
                                        environ={"HOME": str(tmp_path), **env})

    no_pw = {"url": "postgresql+psycopg://perf@db/perf"}
    assert "without a password, and neither PGPASSWORD" in warn(no_pw)[0]
    assert warn(no_pw, PGPASSWORD="x") == [] and warn(no_pw, detached=False) == []
    (tmp_path / ".pgpass").write_text("db:5432:perf:perf:pw\n")
    assert warn(no_pw) == []
    with_pw = {"url": "postgresql+psycopg://perf:pw@db/perf"}
    assert warn(with_pw) == []  # the chained collect job gets it in its environment
    assert "later action=collect needs PGPASSWORD" in warn(with_pw, chained=False)[0]
    hook = {"url": "sqlite:///h.db", "notify": "https://hooks.example/T0/B0/x"}
    assert warn(hook) == [] and warn({**hook, "notify": "env:HOOK"}, chained=False) == []
    assert "history.notify is a webhook URL" in warn(hook, chained=False)[0]


def test_a_profile_over_ssh_without_an_image_warns_what_the_remote_python_needs():
    from types import SimpleNamespace

    from experiments.checks import check_remote_bare_metal

    said = check_remote_bare_metal(SimpleNamespace(remote=True, container_image=None))
    assert said and "payload_error core_missing" in said
    assert check_remote_bare_metal(SimpleNamespace(remote=True, container_image="nvcr.io/nvidia/nemo:26.04")) is None
    assert check_remote_bare_metal(SimpleNamespace(remote=False, container_image=None)) is None
