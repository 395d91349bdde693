"""Issue 13 items 1, 2, 6, 10: the sweep folder is claimed exclusively before anything is written, every value is
checked at plan time (exit 2, nothing written), and ``sweep_id=latest`` names an existing sweep of one preset."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from contracts.errors import ManifestError
from contracts.manifest import Manifest
from experiments.sweep import main

REPO = Path(__file__).resolve().parents[2]
PLAN = ["action=plan", "sweep=full", "dispatcher=alltoall", "overlap=on,off", "delay_wgrad=off"]


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _seq(d: Path) -> set[int]:
    return {json.loads(p.read_text())["settings"]["seq_length"] for p in d.glob("variants/*/variant.json")}


def test_refused_sweep_writes_nothing_into_the_existing_one(tmp_path, capsys):
    out = tmp_path / "s"
    assert main([*PLAN, f"output_dir={out}"]) == 0
    held = json.loads((out / "manifest.json").read_text())["sweep_id"]
    before = _digest(out)
    capsys.readouterr()
    assert main([*PLAN, f"output_dir={out}", "model.seq_length=256"]) == 2
    err = capsys.readouterr().err
    assert f"held by sweep {held}" in err and f"sweep_id={held} output_dir={out}" in err
    assert _digest(out) == before  # no variant.json, no job.sh, no manifest change
    assert _seq(out) == {1024}


def test_a_resume_never_rewrites_variant_json(tmp_path):
    out = tmp_path / "s"
    assert main([*PLAN, f"output_dir={out}"]) == 0
    sid = json.loads((out / "manifest.json").read_text())["sweep_id"]
    before = _digest(out / "variants")
    # an action with a changed model value is refused (the plan cannot change); it never plans again
    assert main(["action=cancel", f"sweep_id={sid}", f"output_dir={out}", "model.seq_length=256"]) == 2
    assert _digest(out / "variants") == before


def _race(out: Path, seq: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "experiments.sweep", *PLAN, f"output_dir={out}",
                             f"model.seq_length={seq}"], env=env, cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_two_sweeps_racing_for_one_folder_one_wins_and_agrees_with_its_files(tmp_path):
    out = tmp_path / "s"
    procs = {seq: _race(out, seq) for seq in (512, 2048)}
    res = {seq: (p.wait(timeout=300), p.communicate()) for seq, p in procs.items()}
    codes = sorted(rc for rc, _ in res.values())
    assert codes == [0, 2], res
    winner = next(seq for seq, (rc, _) in res.items() if rc == 0)
    loser_err = next(io[1] for rc, io in res.values() if rc == 2)
    m = Manifest.load(out)
    assert f"held by sweep {m.sweep_id}" in loser_err
    assert m.config["model"]["seq_length"] == winner
    assert _seq(out) == {winner}  # every variant.json says what the manifest says
    assert m.extra["plan_state"] == "complete"


def test_a_plan_that_died_after_the_claim_is_refused_cleanly(tmp_path, capsys):
    out = tmp_path / "s"
    assert main([*PLAN, f"output_dir={out}"]) == 0
    m = Manifest.load(out)
    Manifest.update(m and __import__("contracts.sweepdir").sweepdir.SweepDir(out),
                    lambda x: x.extra.__setitem__("plan_state", "writing"))
    before = _digest(out)
    for action in ("run", "collect", "cancel"):
        capsys.readouterr()
        assert main([f"action={action}", f"sweep_id={m.sweep_id}", f"output_dir={out}"]) == 2
        err = capsys.readouterr().err
        assert "never completely planned" in err and f"Remove {out}" in err
    assert _digest(out) == before
    with pytest.raises(ManifestError):
        Manifest.load(out).require_complete(out)


@pytest.mark.parametrize("bad, needle", [
    ("+cluster.env_vars.BAD-NAME=1", "'BAD-NAME' is not an environment variable name"),
    ("history.window=-3", "history.window=-3"),
    ("history.threshold=abc", "history.threshold='abc'"),
    ("history.url=bogus://x", "history.url='bogus://x'"),
    ("history.enabled=maybe", "history.enabled"),
    ("poll_s=0", "poll_s=0"),
    ("hang_min_s=-1", "hang_min_s=-1"),
    ("payload.hold_at=middle", "payload.hold_at='middle'"),
    ("payload.train_iters=0", "payload.train_iters=0"),
    ("profile=maybe", "profile='maybe'"),
])
def test_every_value_is_checked_at_plan_time(tmp_path, capsys, bad, needle):
    out = tmp_path / "s"
    assert main([*PLAN, f"output_dir={out}", bad]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err
    assert not out.exists()


def test_read_only_output_dir_exits_2_without_traceback(tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(ro)]).returncode != 0:
        os.chmod(ro, 0o555)  # not root: permissions make it read-only
        if os.access(ro, os.W_OK):
            pytest.fail("cannot make a read-only folder here")
    try:
        assert main([*PLAN, f"output_dir={ro}/s"]) == 2
        err = capsys.readouterr().err
        assert "not writable" in err and "Traceback" not in err
    finally:
        subprocess.run(["umount", str(ro)], capture_output=True)


def test_latest_is_never_a_folder_name_and_dry_run_does_not_override_collect(tmp_path, capsys):
    root = tmp_path / "results"
    assert main([*PLAN, f"results_root={root}", "sweep_id=latest"]) == 2
    assert main(["dry_run=true", "action=collect", "sweep_id=latest", f"results_root={root}"]) == 2
    err = capsys.readouterr().err
    assert "dry_run=true is an alias for action=plan" in err
    assert not root.exists()


def test_latest_resolves_within_one_preset_and_collect_takes_a_submitted_sweep(tmp_path, capsys):
    from experiments.conductor.actions import find_sweep
    from experiments.plan import SweepSettings

    root = tmp_path / "results"
    ids = {}
    for preset, sid in (("nightly", "20261201-010000Z-aaaaaa"), ("nightly", "20261201-020000Z-bbbbbb"),
                        ("isolation", "20261201-030000Z-cccccc")):
        assert main(["action=plan", f"sweep={preset}", f"sweep_id={sid}", f"results_root={root}"]) == 0
        ids[sid] = root / preset / sid
    from contracts.sweepdir import SweepDir

    def submit(m):  # the first nightly had a job submitted; the second was only planned
        a = m.variants[0].new_attempt(0)
        a.set(status="submitted", job_id="42")
    Manifest.update(SweepDir(ids["20261201-010000Z-aaaaaa"]), submit)

    def settings(**kw):
        base = dict(action="status", dry_run=False, sweep_id="latest", output_dir=None, results_root=str(root),
                    preflight="static", mode=None, repeats=1, pack=False, detach=False, allow_dirty=False,
                    max_gpu_hours=10, hang_action="cancel", hang_min_s=600, poll_s=1)
        return SweepSettings(**{**base, **kw})
    assert find_sweep(settings(), "nightly") == ids["20261201-020000Z-bbbbbb"]
    assert find_sweep(settings(action="collect"), "nightly", submitted=True) == ids["20261201-010000Z-aaaaaa"]
    assert find_sweep(settings(), "isolation") == ids["20261201-030000Z-cccccc"]
    # through the command line: status of the latest submitted nightly, not the newer isolation sweep nor the
    # later nightly that was only planned
    capsys.readouterr()
    assert main(["action=status", "sweep_id=latest", "sweep=nightly", f"results_root={root}"]) == 0
    assert "20261201-010000Z-aaaaaa" in capsys.readouterr().out


def test_misspelt_key_suggests_the_key_and_never_plus(capsys):
    for arg in ("modle=qwen3_30b_a3b", "+modle=qwen3_30b_a3b"):
        assert main(["action=plan", arg]) == 2
        err = capsys.readouterr().err
        assert "'model'" in err and "+modle" not in err


def test_dirty_tree_is_refused_at_plan_time_for_a_slurm_run(tmp_path, capsys, monkeypatch):
    import experiments.plan as plan_mod

    monkeypatch.setattr(plan_mod, "git_state", lambda: ("0" * 40, ("conf/cluster/local_slurm.yaml",)))
    out = tmp_path / "s"
    assert main(["cluster=local_slurm", f"output_dir={out}"]) == 2
    assert "uncommitted changes" in capsys.readouterr().err and not out.exists()
    assert main(["action=plan", "cluster=local_slurm", f"output_dir={out}"]) == 0  # a plan warns
    assert any("will be refused" in w for w in Manifest.load(out).warnings)
