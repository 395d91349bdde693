"""The SSH tunnel path end to end: a sweep submitted through NeMo-Run's ``SSHTunnel`` with a key file (a laptop
reaching a cluster's login node) to the local Slurm cluster, through a real OpenSSH server on 127.0.0.1
(scripts/sshd_local/start.sh). The submitting process is given failing ``sbatch/squeue/sacct/scancel/sinfo`` on its
PATH, so every scheduler command must go through the tunnel; the job folder lives under ``cluster.tunnel.job_dir``
(the "cluster" side) and its logs and effective config must be fetched back over SSH.

Environment (defaults match scripts/sshd_local/start.sh): ``MOE_SWEEP_SSH_PORT`` (2222), ``MOE_SWEEP_SSH_KEY``
(``$SSHD_LOCAL_DIR/client_ed25519``), ``MOE_SWEEP_SSH_USER`` (the current user).
"""

from __future__ import annotations

import getpass
import json
import os
import secrets
import subprocess
from pathlib import Path

import pytest

from experiments.sweep import main
from tests.e2e.cli import run_sweep, tail
from tests.e2e.leftovers import Leftovers, warm_libraries
from tests.launchers.conftest import IN_CI, REPO

pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("slurm_cluster")]
# megatron where a job validates its run: the payload imports Megatron-Core inside the Slurm job

SSH_DIR = Path(os.environ.get("SSHD_LOCAL_DIR", "/tmp/moe-sweep-sshd"))
PORT = int(os.environ.get("MOE_SWEEP_SSH_PORT", os.environ.get("SSHD_LOCAL_PORT", "2222")))
KEY = Path(os.environ.get("MOE_SWEEP_SSH_KEY", str(SSH_DIR / "client_ed25519")))
USER = os.environ.get("MOE_SWEEP_SSH_USER", getpass.getuser())
VARIANT = "a2a.ovl0.dw0"
SCHEDULER_COMMANDS = ("sbatch", "squeue", "sacct", "scancel", "sinfo")


def _ssh_up() -> bool:
    """A key login works the way NeMo-Run's rsync makes it (system ssh, strict host keys, no prompt)."""
    if not KEY.is_file():
        return False
    res = subprocess.run(["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-i", str(KEY), "-p", str(PORT),
                          f"{USER}@127.0.0.1", "true"], capture_output=True, timeout=30, check=False)
    return res.returncode == 0


@pytest.fixture(scope="module")
def ssh_server() -> None:
    """The local sshd, started by scripts/sshd_local/start.sh when it is not up (a failure in CI, else a skip)."""
    if not _ssh_up() and os.geteuid() == 0:
        subprocess.run(["bash", str(REPO / "scripts" / "sshd_local" / "start.sh")], check=False, timeout=300)
    if not _ssh_up():
        why = f"no key login to {USER}@127.0.0.1:{PORT} with {KEY}: bash scripts/sshd_local/start.sh (as root)"
        if IN_CI:
            pytest.fail(why)
        pytest.skip(why)


@pytest.fixture
def laptop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ssh_server: None) -> Path:
    """This process plays the laptop: Slurm's commands here fail loudly, so only the tunnel can reach Slurm.
    Returns the folder that plays the cluster's job folder (``cluster.tunnel.job_dir``)."""
    trap = tmp_path / "no_slurm_here"
    trap.mkdir()
    for name in SCHEDULER_COMMANDS:
        exe = trap / name
        exe.write_text(f"#!/bin/sh\necho '{name} ran on the submitting machine, not through the SSH tunnel' >&2\n"
                       "exit 97\n")
        exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{trap}:{os.environ['PATH']}")
    for name in ("WANDB_API_KEY", "HF_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "remote_jobs"


def _args(out: Path, remote: Path, key: Path = KEY, *extra: str) -> list[str]:
    return ["cluster=local_slurm", "allow_dirty=true", "poll_s=1", f"output_dir={out}", "sweep=full",
            "dispatcher=alltoall", "overlap=off", "delay_wgrad=off",
            "cluster.tunnel.kind=ssh", "cluster.tunnel.host=127.0.0.1", f"cluster.tunnel.port={PORT}",
            f"cluster.tunnel.user={USER}", f"cluster.tunnel.identity={key}", f"cluster.tunnel.job_dir={remote}",
            # the cluster side's interpreter: the login shell's `python` need not have Megatron (a user points
            # the jobs at their environment the same way)
            f"+cluster.env_vars.PATH={REPO / '.venv' / 'bin'}:/usr/bin:/bin", *extra]


def _attempt(out: Path) -> dict:
    m = json.loads((out / "manifest.json").read_text())
    (v,) = [v for v in m["variants"] if v["name"] == VARIANT]
    (a,) = v["attempts"]
    return a


@pytest.mark.megatron
@pytest.mark.slow
def test_sweep_through_ssh_tunnel_validates_and_fetches_logs_back(tmp_path, laptop):
    out = tmp_path / "s"
    res = run_sweep(_args(out, laptop))
    assert res.returncode == 0, tail(res)
    a = _attempt(out)
    assert a["status"] == "succeeded" and a["exit_code"] == 0 and a["job_id"].isdigit()
    host_dir = Path(a["host_dir"])
    assert host_dir.is_relative_to(laptop) and host_dir.is_dir()  # the job ran in the "cluster" job folder
    adir = out / "variants" / VARIANT / "attempt-1"
    logs = {p.name: p for p in (adir / "logs").iterdir()}
    rank_log = f"log-moe.{VARIANT}.r0.a1_{a['job_id']}_0.out"
    assert rank_log in logs and f"sbatch_moe.{VARIANT}.r0.a1_{a['job_id']}.out" in logs
    # fetched copies of what the job wrote on the cluster side, byte for byte
    assert logs[rank_log].read_bytes() == (host_dir / rank_log).read_bytes()
    assert logs[rank_log].stat().st_size > 0
    eff = json.loads((adir / "effective_config.json").read_text())
    assert eff == json.loads((host_dir / "out" / "effective_config.json").read_text())
    assert eff["checks"]["verdict"] == "pass"
    runs = json.loads((out / "report" / "summary.json").read_text())["runs"]
    assert [(r["variant"], r["status"]) for r in runs] == [(VARIANT, "validated")]
    assert "#SBATCH --partition=debug" in (adir / "job.sh").read_text()


@pytest.mark.megatron
@pytest.mark.slow
def test_no_ssh_connection_or_thread_is_left_after_the_sweep(tmp_path, laptop):
    """Once main() returns, no paramiko transport of an SSH connection (the conductor's squeue/sacct tunnel, each
    submission's own) and no other thread the sweep started still runs, and sshd holds no session of it."""
    warm_libraries()
    left = Leftovers()
    assert main(_args(tmp_path / "s", laptop)) == 0
    assert _attempt(tmp_path / "s")["status"] == "succeeded"
    assert left.python() == []
    assert left.os() == {}
    assert not [s for s in _sockets() if s[1] == PORT], "a TCP connection to the SSH server is still open"


def _sockets() -> list[tuple[str, int]]:
    """(remote address, remote port) of this process's established TCP connections (``/proc/net/tcp`` rows whose
    inode is one of this process's socket descriptors)."""
    inodes = set()
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            cols = row.split()
            if cols[3] == "01" and cols[9] in inodes:  # 01: ESTABLISHED
                host, port = cols[2].split(":")
                out.append((host, int(port, 16)))
    return out


def test_missing_key_file_is_named_and_nothing_is_submitted(tmp_path, laptop):
    out, key = tmp_path / "s", tmp_path / "keys" / "id_missing"
    res = run_sweep(_args(out, laptop, key))
    assert res.returncode in (2, 5), tail(res)
    assert str(key) in res.stderr
    m = json.loads((out / "manifest.json").read_text()) if (out / "manifest.json").exists() else {"variants": []}
    assert not [a for v in m["variants"] for a in v.get("attempts", []) if a.get("job_id")]
    assert not laptop.exists()


@pytest.mark.megatron
@pytest.mark.slow
def test_secret_over_ssh_needs_the_opt_in(tmp_path, laptop, monkeypatch):
    """A secret of the submitting environment that the job should get (named in ``cluster.secret_env``; other
    variables of the laptop are not sent at all) cannot travel over SSH without being written into the job script
    on the cluster: refused, unless ``cluster.allow_ssh_secrets=true`` (CONTRACTS §10)."""
    # made at run time, so that the value is not in this file (which the job's code archive ships)
    value = "planted-ssh-" + secrets.token_hex(6)
    monkeypatch.setenv("WANDB_API_KEY", value)
    refused = tmp_path / "refused"
    res = run_sweep(_args(refused, laptop, KEY, "cluster.secret_env=[WANDB_API_KEY]"))
    assert res.returncode in (2, 5), tail(res)
    err = res.stderr
    assert "WANDB_API_KEY" in err and "allow_ssh_secrets" in err
    assert not _attempt(refused).get("job_id")
    assert not laptop.exists()  # refused before anything was copied to the cluster

    allowed = tmp_path / "allowed"
    res = run_sweep(_args(allowed, laptop, KEY, "cluster.secret_env=[WANDB_API_KEY]", "cluster.allow_ssh_secrets=true"))
    assert res.returncode == 0, tail(res)
    a = _attempt(allowed)
    assert a["status"] == "succeeded"
    # the opt-in writes it into the job script on the cluster (that is what the user agreed to) ...
    scripts = list(laptop.rglob("*_sbatch.sh"))
    assert scripts and any(value in p.read_text() for p in scripts)
    # ... but never into the sweep's own records
    for p in [allowed / "manifest.json", *(allowed / "variants").rglob("*"), *(allowed / "report").rglob("*")]:
        if p.is_file():
            assert value.encode() not in p.read_bytes(), p
    assert "WANDB_API_KEY" in (allowed / "variants" / VARIANT / "attempt-1" / "job.sh").read_text()


@pytest.mark.slow
def test_cancel_over_ssh_stops_the_queued_job(tmp_path, laptop):
    """action=cancel of a detached sweep from another shell: scancel goes through the tunnel (the local scheduler
    commands are traps) and the job ends CANCELLED on the cluster."""
    out = tmp_path / "s"
    res = run_sweep(_args(out, laptop, KEY, "detach=true", "payload.hold_s=300", "payload.hold_at=start"))
    assert res.returncode == 0, tail(res)
    job = _attempt(out)["job_id"]
    sid = json.loads((out / "manifest.json").read_text())["sweep_id"]
    res = run_sweep(_args(out, laptop, KEY, "action=cancel", f"sweep_id={sid}"))
    assert res.returncode == 0, tail(res)
    assert f"stopped {VARIANT}.r0.a1 (job {job}" in res.stdout and "cancelled 1 unfinished run(s)" in res.stdout, \
        tail(res)
    assert _attempt(out)["status"] == "cancelled"
    env = {**os.environ, "PATH": os.environ["PATH"].split(":", 1)[1]}  # the real sacct, not the trap
    state = subprocess.run(["sacct", "-X", "-n", "-P", "-j", job, "-o", "State"], capture_output=True, text=True,
                           env=env).stdout.strip()
    assert state.startswith("CANCELLED"), state
