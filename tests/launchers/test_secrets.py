"""CONTRACTS §10: secret values never reach a file this tool writes; over SSH the tool refuses unless opted in."""

from __future__ import annotations

from pathlib import Path

import pytest

from launchers.batch import BatchRequest
from launchers.envvars import MASK, is_secret, job_env, mask_text
from launchers.errors import LaunchConfigError
from launchers.render import render_job_script
from launchers.spec import RunSpec
from launchers.submit import submit_slurm
from tests.launchers.conftest import profile

PLANTED = "planted-Secret-value-42"


@pytest.mark.parametrize("name,secret", [("WANDB_API_KEY", True), ("HF_TOKEN", True), ("db_password", True),
                                         ("MY_SECRET", True), ("MY_SECRET_X", False),
                                         ("CUDA_DEVICE_MAX_CONNECTIONS", False),
                                         ("NUM_OF_TOKENS_PER_CHUNK_COMBINE_API", False), ("TOKENIZER_PATH", False),
                                         ("NGC_API_KEY", True), ("PGPASSWORD", True),
                                         ("NCCL_IB_HCA", False), ("CUSTOM", False)])
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret(name) is secret


def test_secret_env_lists_extra_names() -> None:
    assert is_secret("CUSTOM", ["CUSTOM"]) and not is_secret("OTHER", ["CUSTOM"])


def test_job_env_splits_and_masks() -> None:
    env = job_env({"A": "1", "MY_TOKEN": PLANTED}, ["HF_TOKEN", "UNSET"], environ={"HF_TOKEN": "h"})
    assert env.plain == {"A": "1"} and env.secrets == {"MY_TOKEN": PLANTED}
    assert env.passthrough == ("HF_TOKEN",)  # listed and set here; UNSET is not set, so not passed
    assert env.masked() == {"A": "1", "HF_TOKEN": MASK, "MY_TOKEN": MASK}
    assert mask_text(f"x={PLANTED} y='{PLANTED} '", [PLANTED]) == f"x={MASK} y='{MASK} '"


@pytest.mark.parametrize("name", ["local_slurm", "h100_slurm", "local"])
def test_planted_secrets_are_not_in_rendered_scripts(name: str, sweep: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", PLANTED + "-env")
    prof = profile(name, env_vars={**profile(name).env_vars, "WANDB_API_KEY": PLANTED}, secret_env=["HF_TOKEN"])
    spec = RunSpec(variant="a2a.ovl1.dw0", variant_json=sweep / "variants" / "a2a.ovl1.dw0" / "variant.json")
    text = render_job_script(prof, spec, state_dir=sweep / "nemo_run", label="s1", **({"gpus": 0} if name ==
                                                                                        "local" else {}))
    assert PLANTED not in text
    assert "CUDA_DEVICE_MAX_CONNECTIONS" in text  # the plain variables are there
    if name == "h100_slurm":  # pyxis must let the host's (exported) secrets override the image
        assert "WANDB_API_KEY" in text and "HF_TOKEN" in text


def test_ssh_tunnel_refuses_secrets_without_opt_in(sweep: Path, code_repo: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    key = tmp_path / "id_test"
    key.write_text("not a real key")
    prof = profile("gb200_slurm", tunnel={"identity": str(key)},
                   env_vars={**profile("gb200_slurm").env_vars, "WANDB_API_KEY": PLANTED})
    spec = RunSpec(variant="a2a.ovl1.dw0", variant_json=sweep / "variants" / "a2a.ovl1.dw0" / "variant.json")
    with pytest.raises(LaunchConfigError, match="WANDB_API_KEY.*SSH tunnel.*allow_ssh_secrets"):
        submit_slurm(BatchRequest(cluster=prof, items=[spec], label="s1"), state_dir=sweep / "nemo_run",
                     repo=code_repo)
    assert not (sweep / "nemo_run").exists()  # refused before anything was written
