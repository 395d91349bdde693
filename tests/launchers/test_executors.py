"""Executor factories from the cluster profiles: every Slurm field, tunnels, containers, local GPUs, bad input."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from contracts.cluster import ClusterConfig
from contracts.errors import ConfigError
from contracts.slurm import format_time_limit
from launchers.envvars import job_env
from launchers.errors import LaunchConfigError
from launchers.home import nemo_run
from launchers.local import local_executor, local_gpus
from launchers.slurm import make_tunnel, pyxis_image, signal_spec, slurm_executor
from tests.launchers.conftest import profile


@pytest.fixture(scope="module")
def run():
    return nemo_run()


def _executor(run, prof: ClusterConfig, tmp_path: Path, **kw):
    return slurm_executor(run, prof, home=tmp_path / "home", env=job_env(prof.env_vars, []), **kw)


def test_all_profile_fields_reach_the_executor(run, tmp_path: Path) -> None:
    prof = profile("h100_slurm", qos="high", reservation="resv1", constraint="h100&ib", exclude="node[01-02]")
    ex = _executor(run, prof, tmp_path)
    assert (ex.account, ex.partition, ex.qos, ex.constraint, ex.exclude) == \
        ("my_account", "batch", "high", "h100&ib", "node[01-02]")
    assert (ex.nodes, ex.gpus_per_node, ex.ntasks_per_node) == (2, 8, 8)  # one task per GPU
    assert ex.exclusive is True and ex.time == "00:45:00" and ex.signal == "TERM@60"
    assert ex.additional_parameters == {"reservation": "resv1"}
    assert ex.container_image == "nvcr.io#nvidia/nemo:26.04" and ex.container_mounts == ["/lustre:/lustre"]
    assert ex.container_env[0] == "CUDA_DEVICE_MAX_CONNECTIONS" and "NCCL_NVLS_ENABLE" in ex.container_env
    assert ex.tunnel.job_dir == os.path.join(str(tmp_path / "home"), "experiments")  # FACTS §5 LocalTunnel rule


def test_bare_metal_profile_has_no_container(run, tmp_path: Path) -> None:
    ex = _executor(run, profile("local_slurm"), tmp_path)
    assert ex.container_image is None and ex.container_mounts == [] and ex.container_env is None
    assert ex.exclusive is None and ex.gpus_per_node == 2 and ex.ntasks_per_node == 2


def test_overrides_for_a_one_node_preflight(run, tmp_path: Path) -> None:
    ex = _executor(run, profile("h100_slurm"), tmp_path, nodes=1, gpus=1, time_limit_s=300)
    assert (ex.nodes, ex.gpus_per_node, ex.ntasks_per_node, ex.time, ex.signal) == (1, 1, 1, "00:05:00", None)


@pytest.mark.parametrize("field,value,match", [
    ("account", None, "cluster.account is required"),
    ("gpus_per_node", "auto", "'auto' is only for cluster=local"),
    ("executor", "local", "needs executor: slurm"),
])
def test_bad_profile_fields_name_the_field(run, tmp_path: Path, field: str, value, match: str) -> None:
    with pytest.raises(LaunchConfigError, match=match):
        _executor(run, profile("local_slurm", **{field: value}), tmp_path)


@pytest.mark.parametrize("change,match", [
    ({"time_limit": "45 minutes"}, "not a Slurm time limit"),
    ({"acount": "me"}, "unknown key cluster.acount. Did you mean 'account'.*Valid keys of cluster: account, "),
    ({"nodes": "2"}, r"cluster.nodes='2' has the wrong type: expected int"),
    ({"tunnel": {"hots": "x"}}, "unknown key cluster.tunnel.hots.*Valid keys of cluster.tunnel: host, identity"),
    ({"tunnel": "ssh"}, "cluster.tunnel='ssh' must be a mapping with the keys kind, host, port"),
])
def test_a_profile_from_a_mapping_names_bad_fields_and_the_valid_ones(change: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        profile("local_slurm", **change)


def test_a_profile_from_a_mapping_is_the_typed_profile() -> None:
    prof = profile("gb200_slurm")
    assert isinstance(prof, ClusterConfig) and prof.remote and prof.tunnel.host == "login.example.com"
    assert isinstance(prof.container_mounts, tuple) and all(isinstance(v, str) for v in prof.env_vars.values())
    assert ClusterConfig.from_mapping(prof.to_json()) == prof  # the manifest's mapping rebuilds the same profile
    with pytest.raises(ConfigError, match="cluster must be a mapping of the fields of conf/cluster"):
        ClusterConfig.from_mapping(["name", "x"])  # type: ignore[arg-type]


def test_ssh_tunnel_needs_an_existing_key_file(run, tmp_path: Path) -> None:
    prof = profile("gb200_slurm", tunnel={"identity": str(tmp_path / "missing_key")})
    with pytest.raises(LaunchConfigError, match=f"SSH key file {tmp_path / 'missing_key'} .*does not exist"):
        make_tunnel(run, prof, tmp_path)
    (tmp_path / "missing_key").write_text("k")
    tunnel = make_tunnel(run, prof, tmp_path)
    assert type(tunnel).__name__ == "SSHTunnel"
    assert (tunnel.host, tunnel.user, tunnel.identity) == ("login.example.com", "me", str(tmp_path / "missing_key"))


def test_ssh_without_container_refuses_a_nemo_run_job_dir(run, tmp_path: Path) -> None:
    (tmp_path / "k").write_text("k")
    prof = profile("gb200_slurm", container_image=None,
                   tunnel={"identity": str(tmp_path / "k"), "job_dir": "/lustre/me/nemo_run"})
    with pytest.raises(LaunchConfigError, match="contains '/nemo_run'"):
        make_tunnel(run, prof, tmp_path)


@pytest.mark.parametrize("ref,expected", [
    ("nvcr.io/nvidia/nemo:26.04", "nvcr.io#nvidia/nemo:26.04"),
    ("user@nvcr.io/nvidia/nemo:26.04", "user@nvcr.io#nvidia/nemo:26.04"),
    ("registry:5000/team/img", "registry:5000#team/img"),
    ("nvcr.io#nvidia/nemo:26.04", "nvcr.io#nvidia/nemo:26.04"),
    ("ubuntu:22.04", "ubuntu:22.04"),
    ("library/ubuntu", "library/ubuntu"),
    ("/lustre/images/nemo.sqsh", "/lustre/images/nemo.sqsh"),
])
def test_pyxis_image_references(ref: str, expected: str) -> None:
    assert pyxis_image(ref) == expected


def test_time_limits_and_signal() -> None:
    assert profile("local_slurm", time_limit="01:00").time_limit_s == 60
    assert profile("local_slurm", time_limit="1-02:03:04").time_limit_s == 93784
    assert format_time_limit(93784) == "1-02:03:04" and format_time_limit(60) == "00:01:00"
    assert signal_spec(600) == "TERM@60" and signal_spec(599) is None
    with pytest.raises(ConfigError, match="longer than zero"):
        profile("local_slurm", time_limit="00:00:00")


def test_local_executor_torchrun_over_gpus_or_one_process(run) -> None:
    env = job_env({"A": "a b"}, [])
    ex = local_executor(run, env=env, gpus=2)
    assert ex.ntasks_per_node == 2 and type(ex.launcher).__name__ == "Torchrun"
    assert ex.env_vars["A"] == "a b"  # no shell in between: not quoted
    cpu = local_executor(run, env=env, gpus=0)
    assert cpu.ntasks_per_node == 1 and cpu.launcher is None


def test_local_gpu_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("launchers.local.detect_gpus", lambda: 0)
    assert local_gpus(profile("local")) == 0
    with pytest.raises(LaunchConfigError, match="gpus_per_node=4 but this machine has 0"):
        local_gpus(profile("local", gpus_per_node=4))
    assert local_gpus(profile("local"), gpus=3) == 3
