"""Runs over two nodes of the local Slurm (emulated nodes n1..n4 of this host, scripts/slurm_local): the isolation
sweep with ``cluster.nodes=2`` through NeMo-Run's torchrun launcher, and a node that dies mid-run.

The dying node: its slurmd is stopped through its PID file and the job's processes on it are killed (what a
powered-off host leaves), then the node is marked DOWN with ``scontrol`` (what slurmctld does by itself after
``SlurmdTimeout``, 300 s here). Slurm ends the job with ``NODE_FAIL`` and srun logs ``Node failure on <node>``. The
node is restarted and resumed in a ``finally``, so the other tests keep four nodes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.cli import run_sweep, tail

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.usefixtures("slurm_cluster")]
BASE = ["cluster=local_slurm", "cluster.nodes=2", "allow_dirty=true", "poll_s=1"]
SLD = Path(os.environ.get("SLURM_LOCAL_DIR", "/tmp/moe-sweep-slurm"))


def _variants(d: Path) -> dict:
    return {v["name"]: v for v in json.loads((d / "manifest.json").read_text())["variants"]}


def _job(job_id: str) -> tuple[str, str]:
    out = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T %N"], capture_output=True, text=True).stdout.split()
    return (out[0], out[1]) if len(out) == 2 else ("", "")


def _nodes(nodelist: str) -> list[str]:
    return subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True,
                          check=True).stdout.split()


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(kv.split("=", 1) for kv in raw.decode(errors="replace").split("\0") if "=" in kv)


def _kill_node(node: str, job_id: str) -> None:
    """Stop ``node``'s slurmd and kill the job's processes there (and the slurmstepd above them)."""
    pid = int((SLD / "run" / f"slurmd_{node}.pid").read_text())
    os.kill(pid, signal.SIGKILL)
    victims = set()
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            env = _environ(int(p.name))
            if env.get("SLURMD_NODENAME") == node and env.get("SLURM_JOB_ID") == job_id:
                victims.add(int(p.name))
                ppid = Path(f"/proc/{p.name}/stat").read_text().rsplit(")", 1)[1].split()[1]
                if Path(f"/proc/{ppid}/comm").read_text().strip() == "slurmstepd":
                    victims.add(int(ppid))
    for v in victims:
        try:
            os.kill(v, signal.SIGKILL)
        except ProcessLookupError:
            pass
    subprocess.run(["scontrol", "update", f"nodename={node}", "state=down", "reason=slurmd stopped by a test"],
                   check=True)


def _restore(node: str) -> None:
    if subprocess.run(["pgrep", "-F", str(SLD / "run" / f"slurmd_{node}.pid")], capture_output=True).returncode:
        subprocess.run(["slurmd", "-N", node], check=True)
    end = time.time() + 60
    while time.time() < end:
        st = subprocess.run(["sinfo", "-h", "-n", node, "-o", "%t"], capture_output=True, text=True).stdout.strip()
        if st in ("idle", "mix", "alloc"):
            return
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"], capture_output=True)
        time.sleep(1)
    raise AssertionError(f"node {node} did not come back (state {st!r})")


@pytest.mark.megatron
def test_two_node_isolation_sweep_validates_with_the_real_world(tmp_path):
    out = tmp_path / "s"
    res = run_sweep([*BASE, f"output_dir={out}", "sweep=isolation"])
    assert res.returncode == 0, tail(res)
    v = _variants(out)
    kept = [n for n, x in v.items() if x["status"] != "pruned"]
    assert set(kept) == {"a2a.ovl0.dw0", "a2a.ovl1.dw0", "a2a.ovl1.dw1"}
    for n in kept:
        (a,) = v[n]["attempts"]
        adir = (out / a["log_dir"]).parent
        script = (adir / "job.sh").read_text()
        assert "#SBATCH --nodes=2" in script and "#SBATCH --ntasks-per-node=1" in script
        assert "torchrun --rdzv-backend c10d --rdzv-endpoint $head_node_ip:${rdzv_port}" in script
        hw = json.loads((adir / "effective_config.json").read_text())["hardware"]
        nodes = _nodes(hw["nodelist"])
        assert len(nodes) == 2 and hw["world_size"] == 4 and hw["nodes"] == 2
        assert hw["ranks_per_node"] == {nodes[0]: 2, nodes[1]: 2}
        # torchrun's c10d rendezvous numbers the nodes in the order their agents joined, not by --node-rank
        ranks = hw["node_of_rank"]
        assert sorted(ranks) == sorted(nodes * 2) and ranks[0] == ranks[1] and ranks[2] == ranks[3]


def test_a_node_that_dies_mid_run_is_node_failure_and_resume_reruns_only_it(tmp_path):
    out = tmp_path / "s"
    args = [*BASE, f"output_dir={out}", "sweep=full", "dispatcher=alltoall", "overlap=on,off", "delay_wgrad=off",
            "detach=true", "collect_job=false"]
    res = run_sweep([*args, "payload.hold_s=45", "payload.hold_at=start"])
    assert res.returncode == 0, tail(res)
    v = _variants(out)
    jobs = {n: x["attempts"][0]["job_id"] for n, x in v.items() if x["attempts"]}
    assert set(jobs) == {"a2a.ovl0.dw0", "a2a.ovl1.dw0"}
    victim_run = "a2a.ovl1.dw0"
    end = time.time() + 180
    while (state := _job(jobs[victim_run]))[0] != "RUNNING":
        assert time.time() < end, f"job {jobs[victim_run]} did not start"
        time.sleep(1)
    node = _nodes(state[1])[1]
    time.sleep(5)  # the ranks are up and holding
    sid = json.loads((out / "manifest.json").read_text())["sweep_id"]
    try:
        _kill_node(node, jobs[victim_run])
        res = run_sweep([*BASE, "action=collect", f"sweep_id={sid}", f"output_dir={out}"])
        assert res.returncode == 3, tail(res)
        runs = {(r["variant"], r["attempt"]): r
                for r in json.loads((out / "report" / "summary.json").read_text())["runs"]}
        failed = runs[(victim_run, 1)]
        assert failed["status"] == "failed" and failed["reason"] == "node_failure", failed
        assert any(f"Node failure on {node}" in line for line in failed["evidence"]), failed["evidence"]
        assert runs[("a2a.ovl0.dw0", 1)]["status"] == "validated"
    finally:
        _restore(node)
    res = run_sweep([*BASE, "action=run", f"sweep_id={sid}", f"output_dir={out}"])
    assert res.returncode == 0, tail(res)
    v = _variants(out)
    assert [a["attempt"] for a in v["a2a.ovl0.dw0"]["attempts"]] == [1]  # not rerun
    assert [a["attempt"] for a in v[victim_run]["attempts"]] == [1, 2]
    assert v[victim_run]["attempts"][1]["status"] == "succeeded"
