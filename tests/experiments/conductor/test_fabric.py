"""The fabric gate's settings and its verdict on a probe's pairs (experiments/conductor/fabric.py). The gate on real
nodes with a real throttle: tests/e2e/test_fabric_gate_slurm.py."""

from __future__ import annotations

import pytest

from contracts.errors import ConfigError
from experiments.conductor.fabric import FabricSettings, slow_nodes

SLURM2 = {"executor": "slurm", "nodes": 2}


def _pair(a, b, gbps, us):
    return {"nodes": [a, b], "bandwidth_gbps": gbps, "latency_us": us}


def test_on_by_default_for_slurm_over_several_nodes_only():
    assert FabricSettings.from_config({}, SLURM2).probe
    assert FabricSettings.from_config({}, SLURM2).nodes == 3  # the run's nodes + 1, at least 3
    assert not FabricSettings.from_config({}, {"executor": "slurm", "nodes": 1}).probe
    assert not FabricSettings.from_config({}, {"executor": "local", "nodes": 1}).probe
    assert FabricSettings.from_config({"fabric": {"nodes": 8}}, {"executor": "slurm", "nodes": 4}).nodes == 8


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
