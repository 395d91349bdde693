"""The fabric gate on the local multi-node Slurm (emulated nodes n1..n4 of this host, their own loopback addresses):
a sweep with ``cluster.nodes=2`` probes three nodes before its arms. With one node's probe workers throttled by a
SIGSTOP/SIGCONT duty cycle (stopped 95% of the time once the probe measures: a real slow node, never a faked figure)
that node is named and every arm's job excludes it; without the throttle the probe passes and nothing is excluded.

The factor is 5 here, not the default 2: on this 2-core machine, shared by the other tests, an unthrottled pair's
latency varied up to 3.1x between pairs; the throttle slows its node's pairs far more than 5x."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from contracts.procfs import environ, pids
from tests.e2e.cli import spawn_sweep

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.megatron, pytest.mark.usefixtures("slurm_cluster")]
BASE = ["cluster=local_slurm", "cluster.nodes=2", "allow_dirty=true", "poll_s=1", "sweep=full",
        "dispatcher=alltoall", "overlap=on", "delay_wgrad=off", "fabric.slow_factor=5", "fabric.iters=10"]
STOPPED_S, RUNNING_S = 0.19, 0.01


def _probe_job(out: Path, timeout_s: float = 600) -> tuple[str, list[str]]:
    """The probe's Slurm job id and nodes once its log says it measures."""
    end = time.time() + timeout_s
    while time.time() < end:
        for log in out.glob("nemo_run/experiments/*/*/fabric_probe/log-moe.fabric_probe_*.out"):
            if "[fabric_probe] measuring" in log.read_text(errors="replace"):
                job = log.name.split("_")[-2]
                nodelist = subprocess.run(["squeue", "-h", "-j", job, "-o", "%N"], capture_output=True,
                                          text=True).stdout.strip()
                nodes = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True,
                                       text=True).stdout.split()
                return job, nodes
        time.sleep(0.2)
    queue = subprocess.run(["squeue", "-o", "%i %j %T %R"], capture_output=True, text=True).stdout
    raise AssertionError(f"the fabric probe of {out} did not start measuring within {timeout_s} s; queue:\n{queue}")


def _workers(job: str, node: str) -> list[int]:
    """The probe's worker processes (torchrun sets LOCAL_RANK) of ``job`` on ``node``."""
    out = []
    for pid in pids():
        env = environ(pid) or {}
        if env.get("SLURM_JOB_ID") == job and env.get("SLURMD_NODENAME") == node and "LOCAL_RANK" in env:
            out.append(pid)
    return out


def _throttle(job: str, node: str, done: threading.Event) -> None:
    """Stop the workers of ``job`` on ``node`` STOPPED_S of every STOPPED_S + RUNNING_S seconds until ``done``."""
    victims: list[int] = []
    try:
        while not done.is_set():
            victims = _workers(job, node) or victims
            if not victims and subprocess.run(["squeue", "-h", "-j", job], capture_output=True,
                                              text=True).stdout.strip() == "":
                return
            for sig, pause in ((signal.SIGSTOP, STOPPED_S), (signal.SIGCONT, RUNNING_S)):
                for pid in victims:
                    try:
                        os.kill(pid, sig)
                    except ProcessLookupError:
                        pass
                time.sleep(pause)
    finally:
        for pid in victims:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass


def _arm_nodes(out: Path) -> dict[str, list[str]]:
    m = json.loads((out / "manifest.json").read_text())
    got = {}
    for v in m["variants"]:
        for a in v["attempts"]:
            nodelist = subprocess.run(["sacct", "-X", "-n", "-P", "-j", str(a["job_id"]), "-o", "NodeList"],
                                      capture_output=True, text=True).stdout.strip()
            got[v["name"]] = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True,
                                            text=True).stdout.split()
    return got


def test_a_throttled_node_is_named_and_every_arm_excludes_it(tmp_path):
    out = tmp_path / "s"
    p = spawn_sweep([*BASE, f"output_dir={out}"])
    done = threading.Event()
    try:
        job, nodes = _probe_job(out)
        assert len(nodes) == 3, nodes
        victim = nodes[-1]  # not the first node: it hosts the job's rendezvous store
        t = threading.Thread(target=_throttle, args=(job, victim, done), daemon=True)
        t.start()
        rc = p.wait(timeout=900)
    finally:
        done.set()
        if p.poll() is None:
            p.kill()
    _, err = p.communicate()
    assert rc == 0, err[-3000:]
    assert f"fabric probe: node {victim} is slower than the rest by more than 5x" in err, err[-3000:]
    assert f"excludes {victim} (sbatch --exclude)" in err, err[-3000:]
    fabric = json.loads((out / "manifest.json").read_text())["fabric"]
    assert list(fabric["slow"]) == [victim] and fabric["excluded"] == [victim], fabric
    assert len(fabric["pairs"]) == 3 and all(pr["bandwidth_gbps"] > 0 and pr["latency_us"] > 0
                                             for pr in fabric["pairs"]), fabric
    arms = _arm_nodes(out)
    assert arms and all(len(n) == 2 and victim not in n for n in arms.values()), (victim, arms)
    scripts = list(out.glob("variants/*/attempt-1/job.sh"))
    assert len(scripts) == 2 and all(f"--exclude={victim}" in f.read_text() for f in scripts), scripts

def test_without_a_throttle_the_probe_passes_and_nothing_is_excluded(tmp_path):
    out = tmp_path / "s"
    p = spawn_sweep([*BASE, f"output_dir={out}"])
    rc = p.wait(timeout=900)
    _, err = p.communicate()
    assert rc == 0, err[-3000:]
    assert "fabric probe: passed (3 nodes, none slower than the rest by 5x)" in err, err[-3000:]
    fabric = json.loads((out / "manifest.json").read_text())["fabric"]
    assert fabric["slow"] == {} and fabric["excluded"] == [] and len(fabric["pairs"]) == 3, fabric
