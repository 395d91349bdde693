"""The fabric gate (CONTRACTS §1 ``fabric_probe``): before the arms of a Slurm sweep over more than one node, one
job runs the fabric probe (``python -m experiments.fabric_probe``, :mod:`experiments.payload.fabric`) over
``fabric.nodes`` nodes and measures an all-to-all per node pair; a node slower than the rest by ``fabric.slow_factor``
is named, and then either kept out of every job of the sweep (``fabric.action=exclude``: ``sbatch --exclude``) or
the sweep stops before its arms (``fabric.action=fail``, exit 5).

Judging a node (:func:`slow_nodes`): a node's figure is its best pair, the highest bandwidth and the lowest latency
of the pairs it is in. A healthy node has at least one pair with another healthy node, so its best pair is fast; a
slow node (a throttled CPU, a bad NIC) slows every pair it is in. A node is slow when its best bandwidth is below the
best node's divided by the factor, or its best latency above the best node's times the factor. With two nodes the
one pair cannot say which node is slow, so the probe spans at least three (default: the run's nodes + 1).

What the probe measured, and the verdict, are recorded in the manifest (``fabric``: ``nodes``, ``pairs`` with
``bandwidth_gbps`` (GB/s) and ``latency_us`` (µs) per pair, ``slow`` with the reason per node, ``excluded``), and the
probe's own file and log stay in ``<sweep>/fabric/``. A resume finds the record and probes no more; its jobs keep
the exclusion (:func:`excluded_nodes`). A resume of a sweep that ``fabric.action=fail`` stopped probes again
(its nodes may have been drained or recovered since): the stopping verdict alone would otherwise let the resume run
the arms on the slow nodes. The earlier records stay in the new one (``earlier``, oldest first).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any

from contracts.errors import ConfigError
from contracts.manifest import Manifest
from experiments.conductor.prearm import run_prearm
from launchers.spec import JobCommand

FOLDER = "fabric"
RECORD = "fabric"  # the manifest's key
ACTIONS = ("exclude", "fail")
DEFAULTS = {"nodes": None, "slow_factor": 2.0, "action": "exclude", "bytes_per_peer": 1 << 20, "iters": 10}
PROBE_FILE = "fabric_probe.json"  # experiments/payload/fabric.py PROBE_FILE (the payload is not imported here)


class FabricGateFailed(Exception):
    """The probe named slow nodes with ``fabric.action=fail``, or could not run: the sweep stops (exit 5)."""


@dataclass(frozen=True)
class FabricSettings:
    """``fabric_probe`` and the ``fabric.`` keys, validated. ``probe``: run it; ``nodes``: the probe's nodes;
    ``slow_factor`` (> 1); ``action`` (:data:`ACTIONS`); ``bytes_per_peer``, ``iters``: the probe's arguments."""

    probe: bool
    nodes: int
    slow_factor: float
    action: str
    bytes_per_peer: int
    iters: int

    @classmethod
    def from_config(cls, config: dict[str, Any], cluster: dict[str, Any]) -> FabricSettings:
        """From the recorded config (``fabric_probe``: null = on for a Slurm sweep over more than one node).

        Raises:
            ConfigError: a bad value, named with the valid ones.
        """
        f = {**DEFAULTS, **(config.get("fabric") or {})}
        unknown = sorted(set(f) - set(DEFAULTS))
        if unknown:
            raise ConfigError(f"unknown fabric key(s) {', '.join(unknown)}; valid: {', '.join(DEFAULTS)}")
        run_nodes = int(cluster.get("nodes") or 1)
        want = config.get("fabric_probe")
        if want not in (None, True, False):
            raise ConfigError(f"fabric_probe={want!r} must be null (on for Slurm sweeps over more than one node), "
                              "true or false")
        slurm = cluster.get("executor") == "slurm"
        probe = (slurm and run_nodes > 1) if want is None else bool(want)
        if probe and not slurm:
            raise ConfigError("fabric_probe=true needs a Slurm cluster (the probe measures the nodes of an "
                              "allocation); this sweep runs on the local executor")
        nodes = f["nodes"] if f["nodes"] is not None else max(3, run_nodes + 1)
        if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 3:
            raise ConfigError(f"fabric.nodes={nodes!r} must be an integer >= 3 (with two nodes the one pair cannot "
                              "say which node is slow) or null (the run's nodes + 1)")
        factor = f["slow_factor"]
        if isinstance(factor, bool) or not isinstance(factor, int | float) or factor <= 1:
            raise ConfigError(f"fabric.slow_factor={factor!r} must be a number > 1 (2: half the best node's "
                              "bandwidth, or twice its latency)")
        if f["action"] not in ACTIONS:
            raise ConfigError(f"fabric.action={f['action']!r}; valid: {', '.join(ACTIONS)}")
        for k in ("bytes_per_peer", "iters"):
            if isinstance(f[k], bool) or not isinstance(f[k], int) or f[k] < 1:
                raise ConfigError(f"fabric.{k}={f[k]!r} must be an integer >= 1")
        return cls(probe=probe, nodes=nodes, slow_factor=float(factor), action=str(f["action"]),
                   bytes_per_peer=int(f["bytes_per_peer"]), iters=int(f["iters"]))


def slow_nodes(pairs: list[dict[str, Any]], factor: float) -> dict[str, str]:
    """Node -> why it is slow (module docstring), from the probe's ``pairs`` (``nodes`` [a, b],
    ``bandwidth_gbps`` GB/s, ``latency_us`` µs). Empty when fewer than three nodes were measured."""
    best_bw: dict[str, float] = {}
    best_lat: dict[str, float] = {}
    for p in pairs:
        for n in p["nodes"]:
            best_bw[n] = max(best_bw.get(n, 0.0), float(p["bandwidth_gbps"]))
            best_lat[n] = min(best_lat.get(n, float("inf")), float(p["latency_us"]))
    if len(best_bw) < 3:
        return {}
    top_bw, top_lat = max(best_bw.values()), min(best_lat.values())
    out = {}
    for n in sorted(best_bw):
        why = []
        if best_bw[n] < top_bw / factor:
            why.append(f"best pair {best_bw[n]:.3f} GB/s vs {top_bw:.3f} GB/s on the best node")
        if best_lat[n] > top_lat * factor:
            why.append(f"best pair {best_lat[n]:.0f} us vs {top_lat:.0f} us on the best node")
        if why:
            out[n] = f"slower than the rest by more than {factor:g}x: " + "; ".join(why)
    return out


def stopped_the_sweep(record: dict[str, Any]) -> bool:
    """True when the recorded verdict stopped the sweep (slow nodes with ``fabric.action=fail``): a resume probes
    again rather than run the arms on them."""
    return record.get("action") == "fail" and bool(record.get("slow"))


def excluded_nodes(m: Manifest) -> list[str]:
    """The nodes the sweep's fabric gate excluded (none when it has not run or excluded nothing)."""
    return list((m.extra.get(RECORD) or {}).get("excluded") or [])


def fabric_gate(sw: Any, resume: bool = False) -> None:
    """Run the gate for the sweep ``sw`` (a tracking.Sweep) once: nothing when ``fabric_probe`` is off; when the
    manifest already records the probe (a resume), only its exclusion is applied again, unless that verdict stopped
    the sweep (:func:`stopped_the_sweep`): then the probe runs again, following the probe job an earlier conductor
    left queued or running, if any (:func:`experiments.conductor.prearm.run_prearm`). Prints what it measured and
    decided.

    Raises:
        FabricGateFailed: the probe job did not write its figures, or slow nodes with ``fabric.action=fail``.
        ConfigError: bad ``fabric`` settings.
    """
    m = sw.m
    before = m.extra.get(RECORD)
    if before and not stopped_the_sweep(before):  # probed before this resume: its jobs keep off what it excluded
        if excluded_nodes(m):
            sw.backend.exclude_nodes(excluded_nodes(m))
        return
    fs = FabricSettings.from_config(m.config, m.cluster_config)
    if not fs.probe:
        return
    out = (sw.sd.root / FOLDER).resolve()
    if before and (out / PROBE_FILE).exists():  # the stopping probe's figures stay, named by its job
        (out / PROBE_FILE).replace(out / f"fabric_probe.{before.get('job_id')}.json")
    argv = (sys.executable, "-m", "experiments.fabric_probe", str(out), "--bytes-per-peer", str(fs.bytes_per_peer),
            "--iters", str(fs.iters))
    h, st = run_prearm(sw, "fabric", JobCommand(name="fabric_probe", argv=argv, nodes=fs.nodes),
                       f"fabric probe over {fs.nodes} nodes", out / "logs", resume=resume,
                       poll_s=min(1.0, float(sw.settings.poll_s)))
    try:
        doc = json.loads((out / PROBE_FILE).read_text())
        pairs = [{"nodes": list(p["nodes"]), "bandwidth_gbps": p["bandwidth_gbps"], "latency_us": p["latency_us"]}
                 for p in doc["pairs"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise FabricGateFailed(f"the fabric probe (job {h.job_id}, {st.status}) wrote no figures ({e}); its log is "
                               f"in {out / 'logs'}. Run without the gate: fabric_probe=false") from None
    slow = slow_nodes(pairs, fs.slow_factor)
    record = {"job_id": h.job_id, "nodes": list(doc.get("nodes") or []), "pairs": pairs,
              "slow_factor": fs.slow_factor, "action": fs.action, "slow": slow,
              "excluded": sorted(slow) if fs.action == "exclude" else []}
    if before:  # the verdict that stopped the sweep before this resume, kept
        record["earlier"] = [*(before.get("earlier") or []), {k: v for k, v in before.items() if k != "earlier"}]
    sw.writer.change(lambda mm: mm.extra.__setitem__(RECORD, record))
    for p in pairs:
        print(f"fabric probe: {p['nodes'][0]}-{p['nodes'][1]}: {p['bandwidth_gbps']:.3f} GB/s, "
              f"{p['latency_us']:.0f} us", file=sys.stderr)
    if not slow:
        print(f"fabric probe: passed ({len(record['nodes'])} nodes, none slower than the rest by "
              f"{fs.slow_factor:g}x)", file=sys.stderr)
        return
    for n, why in slow.items():
        print(f"fabric probe: node {n} is {why}", file=sys.stderr)
    if fs.action == "fail":
        raise FabricGateFailed(f"slow node(s) {', '.join(slow)} (fabric.action=fail): no arm was run. Drain them, "
                               f"or keep them out with fabric.action=exclude or cluster.exclude={','.join(slow)}; "
                               f"a resume (action=run sweep_id={m.sweep_id}) probes again")
    sw.backend.exclude_nodes(sorted(slow))
    print(f"fabric probe: every job of this sweep excludes {', '.join(sorted(slow))} (sbatch --exclude)",
          file=sys.stderr)

