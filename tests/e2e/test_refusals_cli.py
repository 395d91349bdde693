"""Inputs that used to act silently on the wrong thing, refused through the real CLI (exit 2, the bad value and the
fix named, nothing written): a ``sweep_id`` and an ``output_dir`` that name different sweeps, a SQLite history URL
with two slashes, a value the job could not use, a copied profile that keeps another profile's name; and a comma
in an environment value, kept whole instead of becoming a sweep axis. Each command runs
the real CLI in a process of its own (tests/e2e/cli.py)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.cli import REPO, read_only_view, run_sweep, tail


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _plan(out: Path) -> str:
    res = run_sweep(["action=plan", f"output_dir={out}"])
    assert res.returncode == 0, tail(res)
    return json.loads((out / "manifest.json").read_text())["sweep_id"]


@pytest.mark.slow
def test_a_sweep_id_and_the_output_dir_of_another_sweep_are_refused_for_every_action(tmp_path):
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    a_id, b_id = _plan(a_dir), _plan(b_dir)
    assert a_id != b_id
    before = _digest(b_dir)
    for action in ("status", "collect", "cancel", "run"):
        res = run_sweep([f"action={action}", f"sweep_id={a_id}", f"output_dir={b_dir}"])
        assert res.returncode == 2, (action, tail(res))
        assert a_id in res.stderr and str(b_dir) in res.stderr and b_id in res.stderr, (action, tail(res))
        assert "name different sweeps" in res.stderr, (action, tail(res))
    assert _digest(b_dir) == before
    res = run_sweep(["action=status", f"sweep_id={b_id}", f"output_dir={b_dir}"])  # the same sweep twice is fine
    assert res.returncode == 0, tail(res)


def test_a_sqlite_history_url_with_two_slashes_is_refused_at_plan_time(tmp_path):
    out = tmp_path / "s"
    res = run_sweep(["action=plan", f"output_dir={out}", "history.enabled=true",
                     "history.url=sqlite://results/history.db"])
    assert res.returncode == 2, tail(res)
    assert "sqlite://results/history.db" in res.stderr and "sqlite:///results/history.db" in res.stderr, tail(res)
    assert not out.exists()


def _variant_names(out: Path) -> list[str]:
    return [v["name"] for v in json.loads((out / "manifest.json").read_text())["variants"]]


@pytest.mark.slow
def test_a_comma_in_an_environment_value_is_kept_whole_never_an_axis(tmp_path):
    plain, comma = tmp_path / "plain", tmp_path / "comma"
    assert run_sweep(["action=plan", f"output_dir={plain}"]).returncode == 0
    res = run_sweep(["action=plan", f"output_dir={comma}", "+cluster.env_vars.NCCL_IB_HCA=mlx5_0,mlx5_1"])
    assert res.returncode == 0, tail(res)
    assert _variant_names(comma) == _variant_names(plain)  # no new axis: the same variants
    docs = [json.loads(p.read_text()) for p in sorted(comma.glob("variants/*/variant.json"))]
    assert docs and all(d["env"]["NCCL_IB_HCA"] == "mlx5_0,mlx5_1" for d in docs)


@pytest.mark.slow
@pytest.mark.parametrize(("override", "named"), [
    ("cluster.env_vars.CUDA_DEVICE_MAX_CONNECTIONS=abc", "CUDA_DEVICE_MAX_CONNECTIONS='abc'"),
    ("cluster.env_vars.CUDA_DEVICE_MAX_CONNECTIONS=0", "from 1 to 32"),
    ("cluster.nodes=2", "cluster.nodes=2 with cluster.executor=local"),
])
def test_values_the_job_could_not_use_are_refused_at_plan(tmp_path, override, named):
    out = tmp_path / "s"
    res = run_sweep(["action=plan", f"output_dir={out}", override])
    assert res.returncode == 2, tail(res)
    assert named in res.stderr, tail(res)
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.parametrize(("override", "named"), [
    # a section of keys replaced by one value, null included: every later stage reads it key by key
    ("payload=null", "payload=null: payload is a section of keys (train_iters"),
    ("payload=7", "payload=7: payload is a section of keys"),
    ("analysis=7", "analysis=7: analysis is a section of keys (warmup_iters"),
    ("history=abc", "history='abc': history is a section of keys"),
    ("fabric=null", "fabric=null: fabric is a section of keys"),
    ("cluster.env_vars=7", "cluster.env_vars=7 must be a mapping"),
    ("cluster.tunnel=ssh", "cluster.tunnel='ssh' must be a mapping"),
    ("sweep.stages=null", "sweep.stages=None must be a non-empty list of stages"),
    ("sweep.stages.0.overlap=7", "sweep.stages[alltoall_overlap].overlap=7 must be a list"),
    ("precision.settings=7", "precision.settings=7 must be a mapping"),
    # a field of the cluster profile read by an earlier check than the profile's own typing
    ("cluster.nodes=two", "cluster.nodes='two' has the wrong type: expected int"),
    # a top-level key deleted with Hydra's ~ that has no default
    ("~repeats", "the top-level key(s) repeats cannot be deleted ('~repeats')"),
    ("~poll_s", "the top-level key(s) poll_s cannot be deleted"),
])
def test_a_value_of_the_wrong_shape_is_refused_without_a_traceback(tmp_path, override, named):
    out = tmp_path / "s"
    res = run_sweep(["action=plan", "cluster=local_slurm", f"output_dir={out}", override])
    assert res.returncode == 2 and "Traceback" not in res.stderr, tail(res)
    assert named in res.stderr, tail(res)
    assert res.stderr.rstrip().endswith("exit code 2: usage or config error; nothing was written or submitted"), \
        tail(res)
    assert not out.exists()


def _copy_code(dest: Path) -> Path:
    """The project's code and conf/ copied to ``dest`` (no .git), for a command that must see its own files."""
    for part in ("experiments", "contracts", "launchers", "analysis", "conf"):
        shutil.copytree(REPO / part, dest / part, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


@pytest.mark.slow
def test_a_copy_of_the_code_inside_another_repository_records_no_git_sha(tmp_path):
    outer = tmp_path / "outer"  # some other repository (a home folder under git) that holds a copy of the code
    outer.mkdir()
    git = ["git", "-C", str(outer), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "other"], check=True)
    other = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    code = _copy_code(outer / "tools" / "moe")
    out = tmp_path / "s"
    res = subprocess.run([sys.executable, "-m", "experiments.sweep", "action=plan", f"output_dir={out}"], cwd=code,
                         capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(code)})
    assert res.returncode == 0, tail(res)
    manifest = (out / "manifest.json").read_text()
    assert json.loads(manifest)["git_sha"] is None and other not in manifest


@pytest.mark.slow
def test_a_copied_profile_that_keeps_the_example_name_is_refused(tmp_path):
    # a copy of its own (the code and conf/), so that the new profile is seen by this command only
    clone = _copy_code(tmp_path / "clone")
    shutil.copy(REPO / "conf" / "cluster" / "example_site.yaml", clone / "conf" / "cluster" / "my_site.yaml")
    res = subprocess.run([sys.executable, "-m", "experiments.sweep", "action=plan", "cluster=my_site",
                          f"output_dir={tmp_path / 's'}"], cwd=clone, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(clone)})
    assert res.returncode == 2, tail(res)
    assert "conf/cluster/my_site.yaml says name: example_site" in res.stderr and "name: my_site" in res.stderr
    assert not (tmp_path / "s").exists()


@pytest.fixture
def read_only_sweep(tmp_path: Path):
    """A planned sweep seen through a read-only bind mount (root only: mount(2) needs CAP_SYS_ADMIN; root ignores
    file modes, so a read-only file system is what makes the folder unwritable for it)."""
    src = tmp_path / "rw"
    sweep_id = _plan(src)
    with read_only_view(src, tmp_path / "ro") as mnt:
        yield mnt, sweep_id


@pytest.mark.slow
@pytest.mark.parametrize("action", ["run", "collect", "cancel"])
def test_a_read_only_sweep_folder_is_a_clear_error_for_every_writing_action(read_only_sweep, action):
    folder, sweep_id = read_only_sweep
    before = _digest(folder)
    res = run_sweep([f"action={action}", f"sweep_id={sweep_id}", f"output_dir={folder}"])
    assert res.returncode == 2, tail(res)
    assert f"the sweep folder {folder} is not writable" in res.stderr and "Traceback" not in res.stderr, tail(res)
    assert _digest(folder) == before
    assert run_sweep(["action=status", f"sweep_id={sweep_id}", f"output_dir={folder}"]).returncode == 0


@pytest.mark.megatron
@pytest.mark.slow
def test_latest_is_the_newest_submitted_sweep_of_the_commands_series(tmp_path):
    root = tmp_path / "results"
    custom = root / "isolation" / "zz-my-older-sweep"  # a custom folder whose name sorts last, created first
    assert run_sweep([f"output_dir={custom}", "poll_s=0.5"]).returncode == 0
    res = run_sweep([f"results_root={root}", "poll_s=0.5"])
    assert res.returncode == 0, tail(res)
    (newest,) = [p.parent for p in root.glob("isolation/2*/manifest.json")]
    assert run_sweep(["action=plan", f"results_root={root}"]).returncode == 0  # a later plan: nothing submitted
    res = run_sweep(["action=status", "sweep_id=latest", "sweep=isolation", f"results_root={root}"])
    assert res.returncode == 0, tail(res)
    assert f"sweep_id=latest is sweep {newest.name} ({newest}" in res.stderr, tail(res)
    assert "the newest sweep with a job submitted of preset isolation" in res.stderr, tail(res)
    res = run_sweep(["action=status", "sweep_id=latest", "sweep=isolation", "model=qwen3_30b_a3b",
                     f"results_root={root}"])
    assert res.returncode == 2 and "model qwen3_30b_a3b" in res.stderr, tail(res)


@pytest.mark.slurm
@pytest.mark.slow
@pytest.mark.usefixtures("slurm_cluster")
def test_a_slurm_sweep_without_accounting_says_so_and_submits_nothing(tmp_path):
    # the real local Slurm for sbatch and squeue, and a sacct that answers as one without slurmdbd does
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sacct").write_text("#!/bin/sh\necho 'sacct: error: Slurm accounting storage is disabled' >&2\nexit 1\n")
    (bin_dir / "sacct").chmod(0o755)
    out = tmp_path / "s"
    res = run_sweep(["cluster=local_slurm", "allow_dirty=true", "poll_s=1", f"output_dir={out}"], timeout=120,
                    PATH=f"{bin_dir}:{os.environ['PATH']}")
    assert res.returncode == 5, tail(res)
    assert "sacct does not answer (sacct: error: Slurm accounting storage is disabled)" in res.stderr, tail(res)
    attempts = [a for v in json.loads((out / "manifest.json").read_text())["variants"] for a in v["attempts"]]
    assert attempts and not any(a.get("job_id") for a in attempts)


def test_an_unknown_sweep_id_lists_the_newest_sweeps_first_and_how_to_start_one(tmp_path):
    ids = [f"20261206-0{h:02d}000Z-abcdef" for h in range(12)]
    for i in ids:
        (tmp_path / "nightly" / i).mkdir(parents=True)
        (tmp_path / "nightly" / i / "manifest.json").write_text("{}")
    res = run_sweep(["action=cancel", "sweep_id=20990101-000000Z-abcdef", f"results_root={tmp_path}"])
    assert res.returncode == 2, tail(res)
    newest = ", ".join(reversed(ids[2:]))
    assert f"Known sweeps, newest first: {newest} (the newest 10 of 12)" in res.stderr, tail(res)
    assert "action=plan sweep_id=20990101-000000Z-abcdef, then action=run" in res.stderr, tail(res)


@pytest.mark.slow
def test_latest_without_model_and_cluster_never_skips_another_series_uncollected_night(tmp_path):
    root = tmp_path / "results"
    sweep = ["sweep=full", "dispatcher=alltoall", "overlap=off,on", "delay_wgrad=off", f"results_root={root}",
             "poll_s=0.5"]
    for model in ("tiny_moe", "qwen3_moe_1b"):  # two series of one preset, each night submitted, neither collected
        res = run_sweep([*sweep, f"model={model}"])
        assert res.returncode == 0, tail(res)
    folders = sorted(p.parent for p in root.glob("full/*/manifest.json"))
    for folder in folders:  # as a detached night stands before its collect: no report yet
        shutil.rmtree(folder / "report")
    res = run_sweep(["action=collect", "sweep_id=latest", "sweep=full", f"results_root={root}"])
    assert res.returncode == 2, tail(res)
    assert (f"the newest sweep of another series of preset full is not collected yet: model=tiny_moe cluster=local "
            f"(sweep {folders[0].name})") in res.stderr, tail(res)
    assert not any((f / "report").exists() for f in folders)
    res = run_sweep(["action=status", "sweep_id=latest", "sweep=full", f"results_root={root}"])
    assert res.returncode == 0 and "note: sweep_id=latest is sweep" in res.stderr, tail(res)
    res = run_sweep(["action=collect", "sweep_id=latest", "sweep=full", "model=tiny_moe", "cluster=local",
                     f"results_root={root}"])
    assert res.returncode == 0 and (folders[0] / "report" / "summary.json").exists(), tail(res)


@pytest.mark.slow
def test_an_action_on_an_existing_sweep_refuses_the_plan_keys_it_cannot_change(tmp_path):
    """A resume, collect, cancel or status acts on the manifest's plan: a plan key on its command line (repeats,
    the model, an axis, a payload/model/cluster field, the precision) that differs from the plan is refused with
    exit 2, naming the override, what the sweep was planned with and the fix, before anything is touched. The
    sweep's own preset, model and cluster (what selects ``sweep_id=latest``) and the command's own keys pass."""
    root = tmp_path / "results"
    res = run_sweep(["action=run", "cluster=local", f"results_root={root}", "payload.seed=7"])
    assert res.returncode == 0, tail(res)
    (folder,) = (root / "isolation").iterdir()
    sid, before = folder.name, _digest(folder)
    where = [f"sweep_id={sid}", f"results_root={root}"]
    refused = {
        "run": (["repeats=5", "cluster=local"], ["repeats=5 (planned: repeats=1)"]),
        "collect": (["model=qwen3_30b_a3b"], ["model=qwen3_30b_a3b (planned: model=tiny_moe)"]),
        "cancel": (["dispatcher=deepep", "payload.seed=9"], ["dispatcher=deepep", "payload.seed=9 (planned: "
                                                             "payload.seed=7)"]),
        "status": (["cluster=local_slurm", "model.seq_length=999", "precision=fp8_cs"],
                   ["cluster=local_slurm (planned: cluster=local)", "model.seq_length=999",
                    "precision=fp8_cs (planned: precision=bf16)"]),
    }
    for action, (extra, named) in refused.items():
        res = run_sweep([f"action={action}", *where, *extra])
        assert res.returncode == 2, (action, tail(res))
        assert all(n in res.stderr for n in named), (action, tail(res))
        assert "cannot change what the sweep was planned with" in res.stderr, (action, tail(res))
        assert "Plan a new sweep to change them" in res.stderr and "payload.seed=7" in res.stderr, tail(res)
        assert _digest(folder) == before, action
    # the sweep's own series, the plan's own values and the command's keys are fine
    for args in (["action=status", *where, "cluster=local", "model=tiny_moe", "sweep=isolation", "payload.seed=7"],
                 ["action=status", "sweep_id=latest", f"results_root={root}", "sweep=isolation", "model=tiny_moe",
                  "cluster=local"],
                 ["action=run", *where, "poll_s=1", "hang_min_s=900", "analysis.bootstrap=500", "cluster=local"]):
        res = run_sweep(args)
        assert res.returncode == 0, (args, tail(res))
        assert "cannot change" not in res.stderr, tail(res)


def _checkout(dest: Path) -> Path:
    """A git checkout of the project's code at ``dest`` (one commit), as a user's clone holds it."""
    for part in ("experiments", "contracts", "launchers", "analysis", "conf"):
        shutil.copytree(REPO / part, dest / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copyfile(REPO / "pyproject.toml", dest / "pyproject.toml")
    git = ["git", "-C", str(dest), "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "clone"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    return dest


def test_a_dirty_tree_refusal_names_the_changed_files(tmp_path):
    """A Slurm run from a tree with changed tracked files is refused (exit 2, nothing written) naming up to 5 of
    them and how many more, so that a user sees which file to restore (a regenerated image, an edited profile);
    ``action=plan`` records the same names in its warning. Untracked files never count."""
    clone = _checkout(tmp_path / "clone")
    changed = sorted(str(p.relative_to(clone)) for p in (clone / "conf" / "model").glob("*.yaml"))[:3] + \
        sorted(str(p.relative_to(clone)) for p in (clone / "conf" / "sweep").glob("*.yaml"))[:3]
    for rel in changed:
        with open(clone / rel, "a") as f:
            f.write("# edited\n")
    (clone / "conf" / "notes.txt").write_text("untracked\n")
    env = {**os.environ, "PYTHONPATH": str(clone)}
    out = tmp_path / "s"
    res = subprocess.run([sys.executable, "-m", "experiments.sweep", "cluster=local_slurm", f"output_dir={out}"],
                         cwd=clone, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 2, tail(res)
    assert "uncommitted changes to tracked files" in res.stderr and "allow_dirty=true" in res.stderr, tail(res)
    assert all(rel in res.stderr for rel in changed[:5]) and "and 1 more" in res.stderr, tail(res)
    assert changed[5] not in res.stderr and "notes.txt" not in res.stderr, tail(res)
    assert not out.exists()
    res = subprocess.run([sys.executable, "-m", "experiments.sweep", "action=plan", "cluster=local_slurm",
                          f"output_dir={out}"], cwd=clone, env=env, capture_output=True, text=True, timeout=300,
                         check=False)
    assert res.returncode == 0, tail(res)
    (warning,) = [w for w in json.loads((out / "manifest.json").read_text())["warnings"] if "uncommitted" in w]
    assert all(rel in warning for rel in changed[:5]) and "and 1 more" in warning, warning


def test_a_collect_waits_for_another_collect_of_the_sweep_and_ends_with_its_exit_code(tmp_path):
    """What a hand action=collect beside the chained collect job does to the later one: it waits for the lease's
    collect to end, then ends with the sweep's exit code (not exit 2), so a Slurm monitor sees the night's code."""
    from contracts.sweepdir import SweepDir
    from experiments.conductor.lease import acquire
    from tests.e2e.cli import spawn_sweep

    out = tmp_path / "s"
    assert run_sweep(["sweep=full", "dispatcher=alltoall", "overlap=off,on", "delay_wgrad=off", f"output_dir={out}",
                      "poll_s=0.5"]).returncode == 0
    sweep_id = json.loads((out / "manifest.json").read_text())["sweep_id"]
    with acquire(SweepDir(out), "collect"):  # another collect holds the sweep for a while
        p = spawn_sweep(["action=collect", f"sweep_id={sweep_id}", f"output_dir={out}"])
        time.sleep(8)
        assert p.poll() is None  # it waits, and does not fail with exit 2
    rc = p.wait(timeout=300)
    _, err = p.communicate()
    assert rc == 0, err[-3000:]
    assert "is collecting this sweep; waiting for it to end" in err, err[-3000:]
    assert err.strip().splitlines()[-1].startswith("exit code 0: the sweep was collected by pid"), err[-3000:]
