"""The fabric gate's settings and its verdict on a probe's pairs (experiments/conductor/fabric.py). The gate on real
nodes with a real throttle: tests/e2e/test_fabric_gate_slurm.py."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from contracts.errors import ConfigError
from contracts.jobs import JobHandle, JobState
from contracts.statuses import ManifestStatus
from experiments.conductor.fabric import FabricGateFailed, FabricSettings, fabric_gate, slow_nodes

SLURM2 = {"executor": "slurm", "nodes": 2}


def _pair(a, b, gbps, us):
    return {"nodes": [a, b], "bandwidth_gbps": gbps, "latency_us": us}


def test_on_by_default_for_slurm_over_several_nodes_only():
    assert FabricSettings.from_config({}, SLURM2).probe
    assert FabricSettings.from_config({}, SLURM2).nodes == 3  # the run's nodes + 1, at least 3
    assert not FabricSettings.from_config({}, {"executor": "slurm", "nodes": 1}).probe
    assert not FabricSettings.from_config({}, {"executor": "local", "nodes": 1}).probe
    assert FabricSettings.from_config({"fabric": {"nodes": 8}}, {"executor": "slurm", "nodes": 4}).nodes == 8


@pytest.mark.parametrize("overrides, on", [
    (["cluster=local_slurm", "cluster.nodes=2"], True),
    (["cluster=h100_slurm"], True),  # a shipped site profile: 2 nodes a run
    (["cluster=local_slurm"], False),  # one node
    (["cluster=h100_slurm", "cluster.nodes=1"], False),
    (["cluster=local"], False),
])
def test_the_shipped_conf_turns_the_gate_on_for_slurm_over_several_nodes_only(overrides, on):
    """What a user gets from conf/config.yaml (``fabric_probe: null``) and the cluster profiles, composed by Hydra
    as the CLI composes them."""
    from experiments.compose import compose_overrides

    (config,) = compose_overrides(overrides).configs.values()
    fs = FabricSettings.from_config(config, config["cluster"])
    assert fs.probe is on
    assert (fs.action, fs.slow_factor, fs.nodes) == ("exclude", 2.0, max(3, config["cluster"]["nodes"] + 1))


@pytest.mark.parametrize("config, cluster, match", [
    ({"fabric_probe": True}, {"executor": "local"}, "needs a Slurm cluster"),
    ({"fabric_probe": "yes"}, SLURM2, r"fabric_probe='yes' must be null"),
    ({"fabric": {"nodes": 2}}, SLURM2, r"fabric.nodes=2 must be an integer >= 3"),
    ({"fabric": {"slow_factor": 1}}, SLURM2, r"fabric.slow_factor=1 must be a number > 1"),
    ({"fabric": {"action": "drain"}}, SLURM2, r"fabric.action='drain'; valid: exclude, fail"),
    ({"fabric": {"iters": 0}}, SLURM2, r"fabric.iters=0 must be an integer >= 1"),
    ({"fabric": {"node": 3}}, SLURM2, r"unknown fabric key\(s\) node; valid: nodes, slow_factor"),
])
def test_bad_settings_are_refused_naming_the_value(config, cluster, match):
    with pytest.raises(ConfigError, match=match):
        FabricSettings.from_config(config, cluster)


def test_the_node_in_only_slow_pairs_is_named():
    # the loaded test machine's figures for three healthy nodes (up to 3.1x apart), then n3 throttled
    healthy = [_pair("n1", "n3", 0.219, 870), _pair("n1", "n2", 0.460, 2697), _pair("n3", "n2", 0.606, 3699)]
    assert slow_nodes(healthy, 5.0) == {}
    throttled = [_pair("n1", "n2", 0.45, 900), _pair("n1", "n3", 0.02, 95000), _pair("n2", "n3", 0.03, 90000)]
    got = slow_nodes(throttled, 5.0)
    assert list(got) == ["n3"] and "0.030 GB/s vs 0.450 GB/s" in got["n3"] and "90000 us vs 900 us" in got["n3"]


def test_two_nodes_cannot_name_a_slow_one():
    assert slow_nodes([_pair("n1", "n2", 0.01, 99999)], 2.0) == {}


HEALTHY = [_pair("n1", "n3", 0.219, 870), _pair("n1", "n2", 0.460, 2697), _pair("n3", "n2", 0.606, 3699)]
THROTTLED = [_pair("n1", "n2", 0.45, 900), _pair("n1", "n3", 0.02, 95000), _pair("n2", "n3", 0.03, 90000)]


class _Backend:
    """The probe job as the gate sees it: submitting it writes ``pairs`` as the probe's file (a stand-in for the
    real probe, which tests/e2e/test_fabric_gate_slurm.py runs on the local Slurm)."""

    def __init__(self, pairs):
        self.pairs, self.submitted, self.excluded = pairs, [], []

    def submit_item(self, task, cmd, label):
        out = Path(cmd.argv[3])
        out.mkdir(parents=True, exist_ok=True)
        (out / "fabric_probe.json").write_text(json.dumps({"nodes": ["n1", "n2", "n3"], "pairs": self.pairs}))
        self.submitted.append(cmd)
        return JobHandle(task, str(100 + len(self.submitted)))

    def poll(self, refs):
        return {r.task: JobState(ManifestStatus.SUCCEEDED) for r in refs}

    def log_files(self, ref):
        return []

    def exclude_nodes(self, nodes):
        self.excluded = list(nodes)


def _sweep(tmp_path, record, pairs, action="fail"):
    m = SimpleNamespace(sweep_id="S", extra={"fabric": record} if record else {}, cluster_config=SLURM2,
                        config={"fabric": {"action": action, "slow_factor": 5.0}})
    return SimpleNamespace(m=m, sd=SimpleNamespace(root=tmp_path), backend=_Backend(pairs),
                           settings=SimpleNamespace(poll_s=0), display=SimpleNamespace(update=lambda views: None),
                           writer=SimpleNamespace(change=lambda f: f(m)))


def test_a_resume_after_a_fail_verdict_probes_again_and_keeps_the_earlier_verdict(tmp_path):
    sw = _sweep(tmp_path, None, THROTTLED)
    with pytest.raises(FabricGateFailed, match=r"slow node\(s\) n3 \(fabric.action=fail\).*resume .*probes again"):
        fabric_gate(sw)
    stopped = sw.m.extra["fabric"]
    assert list(stopped["slow"]) == ["n3"] and stopped["job_id"] == "101"
    # the resume (a new conductor: the recorded verdict, a healthy fabric now) probes again and passes
    resumed = _sweep(tmp_path, stopped, HEALTHY)
    fabric_gate(resumed)
    assert len(resumed.backend.submitted) == 1 and resumed.backend.excluded == []
    rec = resumed.m.extra["fabric"]
    assert rec["slow"] == {} and rec["earlier"] == [stopped]
    assert json.loads((tmp_path / "fabric" / "fabric_probe.101.json").read_text())["pairs"] == THROTTLED


def test_a_resume_after_an_exclude_verdict_keeps_it_without_probing(tmp_path):
    record = {"job_id": "7", "action": "exclude", "slow": {"n3": "slow"}, "excluded": ["n3"]}
    sw = _sweep(tmp_path, record, HEALTHY, action="exclude")
    fabric_gate(sw)
    assert sw.backend.submitted == [] and sw.backend.excluded == ["n3"] and sw.m.extra["fabric"] == record
