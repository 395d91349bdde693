"""The planner refuses what must fail later, with the reason (exit 2, nothing written), and records no secret:
weak secret values, a warm-up as long as the run, mode=train with no GPU, an impossible sweep id, a line break in
an #SBATCH value; a knob such as TOKENIZER_PATH is not a secret; the history URL's password is never stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contracts.errors import ConfigError
from contracts.manifest import Manifest
from experiments.conductor.collect import collect, secret_values
from experiments.plan import make_plan, write_plan

LONG = "hf_plantedSecret42"


def plan(tmp_path: Path, *ov: str):
    return make_plan(["action=plan", f"output_dir={tmp_path / 's'}", *ov])


@pytest.mark.parametrize("override,needle", [
    ("+cluster.env_vars.HF_TOKEN=32", "HF_TOKEN have a value shorter than 8"),
    ("+cluster.env_vars.WANDB_API_KEY=12345678901", "WANDB_API_KEY have a value shorter than 8 characters or made of "
                                                    "digits only"),
    ("sweep_id=20261302-120000Z-a1b2c3", "sweep_id='20261302-120000Z-a1b2c3' is not a real UTC time"),
    ("sweep_id=20261130-250000Z-a1b2c3", "is not a real UTC time"),
    ("payload.train_iters=4", "leaves 1 steady iteration"),
    ("analysis.warmup_iters=30", "analysis.warmup_iters=30 leaves 0 steady iteration.*payload.train_iters=30"),
    ("mode=train", "mode=train on cluster=local needs a GPU"),
])
def test_plan_refuses_with_the_reason(tmp_path: Path, override: str, needle: str) -> None:
    extra = ("mode=train",) if "warmup" in override or "train_iters" in override else ()
    if extra:
        import experiments.plan as plan_mod

        mp = pytest.MonkeyPatch()
        mp.setattr(plan_mod, "check_train_gpus", lambda *a: None)  # the warm-up check is for training runs
    try:
        with pytest.raises(ConfigError, match=needle):
            plan(tmp_path, override, *extra)
    finally:
        if extra:
            mp.undo()
    assert not (tmp_path / "s").exists()


def test_a_weak_secret_from_the_environment_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_CRED", "128")
    with pytest.raises(ConfigError, match="MY_CRED"):
        plan(tmp_path, "cluster.secret_env=[MY_CRED]")
    monkeypatch.setenv("MY_CRED", LONG)
    assert plan(tmp_path, "cluster.secret_env=[MY_CRED]")


@pytest.mark.parametrize("field", ["partition", "account", "qos", "constraint", "reservation"])
def test_a_line_break_in_an_sbatch_value_is_refused(tmp_path: Path, field: str) -> None:
    with pytest.raises(ConfigError, match=f"cluster.{field}=.*line break.*#SBATCH"):
        plan(tmp_path, "cluster=local_slurm", f"cluster.{field}='batch\n#SBATCH --uid=0'")


def test_knobs_are_not_secrets_and_stay_readable(tmp_path: Path) -> None:
    p = plan(tmp_path, "+cluster.env_vars.NUM_OF_TOKENS_PER_CHUNK_COMBINE_API=128",
             "+cluster.env_vars.TOKENIZER_PATH=/data/tok")
    root = write_plan(p, [])
    m = Manifest.load(root)
    assert str(m.cluster_config["env_vars"]["NUM_OF_TOKENS_PER_CHUNK_COMBINE_API"]) == "128"
    variant = next(v.name for v in m.variants if v.status != "pruned")
    env = json.loads((root / "variants" / variant / "variant.json").read_text())["env"]
    assert env["TOKENIZER_PATH"] == "/data/tok"
    # a HybridEP variable is recorded on hybridep arms only (NVIDIA's recipes, Bridge 0.6.2 HYBRID_EP_ENV_NAMES)
    assert "NUM_OF_TOKENS_PER_CHUNK_COMBINE_API" not in env or variant.startswith("hybridep")
    assert "***" not in (root / "variants" / variant / "job.sh").read_text()


def test_the_history_password_is_never_stored(tmp_path: Path) -> None:
    url = "postgresql://sweeper:pl4ntedPassw0rd@db.example:5432/history"
    args = [f"history.url={url}"]
    root = write_plan(plan(tmp_path, *args), args)
    text = (root / "manifest.json").read_text()
    assert "pl4ntedPassw0rd" not in text
    m = Manifest.load(root)
    assert m.config["history"]["url"] == "postgresql://sweeper:***@db.example:5432/history"
    assert m.overrides == ["history.url=postgresql://sweeper:***@db.example:5432/history"]


def test_a_secret_given_as_an_env_var_override_is_masked_in_collected_logs(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    p = plan(tmp_path, f"+cluster.env_vars.HF_TOKEN={LONG}")
    root = write_plan(p, [])
    m = Manifest.load(root)
    assert m.cluster_config["env_vars"]["HF_TOKEN"] == "***"
    assert LONG in secret_values(m, p.cfg["cluster"])  # the run that planned it
    monkeypatch.setenv("HF_TOKEN", LONG)
    assert LONG in secret_values(m)  # a resume: the value comes from this shell

    class Jobs:
        def log_files(self, ref):
            log = tmp_path / "job" / "combined.log"
            log.parent.mkdir(exist_ok=True)
            log.write_text(f"HF_TOKEN={LONG}\niteration 10/ 30 | elapsed time per iteration (ms): 128.0\n")
            return [log]

        def payload_out(self, ref):
            return tmp_path / "job" / "out"

    from contracts.records import RunRef
    from contracts.sweepdir import SweepDir

    sd, ref = SweepDir(root), RunRef(m.variants[0].name, 0, 1)
    collect(sd, Jobs(), ref, secret_values(m))
    copied = next(sd.logs(ref).iterdir()).read_text()
    assert LONG not in copied and "HF_TOKEN=***" in copied and "(ms): 128.0" in copied
