"""The fabric probe's measurement, on every rank of a job over several nodes: an all-to-all per node pair.

``python -m experiments.fabric_probe OUT_DIR --bytes-per-peer B [--iters K]``, started by torchrun on every node of
the allocation (one rank per GPU). For each pair of nodes (a, b), in a fixed order, the ranks of a and b form a
group and run ``all_to_all_single`` with ``B`` bytes to every member of the group (the EP dispatch message of the
model: micro batch x sequence length x hidden x 2 bytes / EP, ``experiments/conductor/fabric.py``); the other
ranks wait at a barrier, so one pair is measured at a time. NCCL on GPUs (bf16 tensors), gloo on the CPU.

Each pair runs in both orientations (either node's ranks first in the group, so that either side accepts the
connections). Every rank of the pair times each all-to-all on its own clock, and the pair's figures are the slowest
rank's: a stalled rank (a throttled CPU) finds its peers ready whenever it runs, so its own clock sees fast
all-to-alls; its peers' clocks see the wait. Per pair: ``bandwidth_gbps``, bytes each rank sends to the other
members divided by the median time of one all-to-all, the slower orientation's and the slowest rank's (GB/s, 1e9
bytes); ``latency_us``, the same median for an all-to-all of 8 bytes per peer (µs). Rank 0
writes ``OUT_DIR/fabric_probe.json`` (CONTRACTS §3).

Gloo binds each rank to the address of its node: ``GLOO_SOCKET_IFNAME`` when set (torch's own variable), else the
address the Slurm node name (``SLURMD_NODENAME``) resolves to, else the host name's (torch's default). Where
emulated nodes share one host, the node names resolve to distinct loopback addresses (scripts/slurm_local), so the
traffic of each pair runs between its nodes' own addresses, as between hosts.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import time
from dataclasses import dataclass
from datetime import timedelta
from itertools import combinations
from pathlib import Path
from typing import Any

PROBE_FILE = "fabric_probe.json"
LATENCY_BYTES = 8  # per peer, for the latency figure
WARMUP = 2  # all-to-alls not timed, per pair and size


@dataclass(frozen=True)
class PairResult:
    """One node pair's figures: ``nodes`` (a, b), ``ranks`` in the group, ``bandwidth_gbps`` (GB/s per rank),
    ``latency_us`` (µs, 8 bytes per peer), ``times_ms`` (each timed all-to-all of the dispatch size)."""

    nodes: tuple[str, str]
    ranks: int
    bandwidth_gbps: float
    latency_us: float
    times_ms: tuple[float, ...]


def node_address(node: str) -> str | None:
    """The address gloo binds to on ``node``: what the node name resolves to, or None (torch's default then)."""
    try:
        return socket.gethostbyname(node)
    except OSError:
        return None


def _gloo_group(store: Any, prefix: str, rank: int, size: int, timeout_s: float) -> Any:
    """A gloo process group over ``size`` ranks, bound to this node's address (module doc)."""
    import torch.distributed as dist

    opts = dist.ProcessGroupGloo._Options()
    opts._timeout = timedelta(seconds=timeout_s)
    iface = os.environ.get("GLOO_SOCKET_IFNAME")
    addr = None if iface else node_address(os.environ.get("SLURMD_NODENAME", ""))
    if iface:
        opts._devices = [dist.ProcessGroupGloo.create_device(interface=iface.split(",")[0])]
    elif addr:
        opts._devices = [dist.ProcessGroupGloo.create_device(hostname=addr)]
    else:
        opts._devices = [dist.ProcessGroupGloo.create_default_device()]
    return dist.ProcessGroupGloo(dist.PrefixStore(prefix, store), rank, size, opts)


def _time_alltoall(pg: Any, nbytes: int, size: int, iters: int, device: Any, nccl: bool) -> list[float]:
    """Seconds of each of ``iters`` all-to-alls with ``nbytes`` to every one of ``size`` members (``pg``: a
    ``ProcessGroup`` for NCCL, a gloo backend object otherwise)."""
    import torch
    import torch.distributed as dist

    if nccl:
        n = max(1, nbytes // 2)
        inp = torch.ones(n * size, dtype=torch.bfloat16, device=device)
    else:
        n = max(1, nbytes)
        inp = torch.ones(n * size, dtype=torch.uint8)
    out = torch.empty_like(inp)
    times = []
    for i in range(WARMUP + iters):
        if nccl:
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        if nccl:
            dist.all_to_all_single(out, inp, group=pg)
        else:
            pg.alltoall_base(out, inp, [], [], dist.AllToAllOptions()).wait()
        if nccl:
            torch.cuda.synchronize(device)
        if i >= WARMUP:
            times.append(time.perf_counter() - t0)
    return times


def measure(bytes_per_peer: int, iters: int, timeout_s: float = 300.0) -> tuple[list[PairResult], dict[str, Any]]:
    """Run the probe on this rank (every rank of the job calls it); returns the pairs (complete on rank 0) and the
    job's facts (``nodes`` in first-rank order, ``backend``, ``world_size``, ``bytes_per_peer``, ``iters``).

    Raises:
        RuntimeError: a group could not be formed or an all-to-all failed (torch's message).
    """
    import torch
    import torch.distributed as dist

    nccl = torch.cuda.is_available()
    backend = "nccl" if nccl else "gloo"
    device = None
    if nccl:
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    dist.init_process_group(backend="gloo", init_method="env://", timeout=timedelta(seconds=timeout_s))
    rank, world = dist.get_rank(), dist.get_world_size()
    me = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    node_of: list[Any] = [None] * world
    dist.all_gather_object(node_of, me)
    nodes = list(dict.fromkeys(str(n) for n in node_of))
    if rank == 0:  # every rank has joined: the timed part starts (its start, for the job's log)
        print(f"[fabric_probe] measuring {len(nodes)} nodes, {world} ranks, {backend}", flush=True)
    store = dist.distributed_c10d._get_default_store()
    results: list[PairResult] = []
    for a, b in combinations(nodes, 2):
        view = None
        if me in (a, b):
            runs = []
            # both orientations: the group's first node accepts the connections of the other (gloo's tcp pairs),
            # so each side's address carries the pair's traffic once (emulated nodes share the host's source
            # address for the connections they open)
            for first, second in ((a, b), (b, a)):
                members = [r for r in range(world) if node_of[r] == first] + \
                          [r for r in range(world) if node_of[r] == second]
                grank, size = members.index(rank), len(members)
                if nccl:
                    pg = dist.new_group(sorted(members), backend="nccl", use_local_synchronization=True)
                else:
                    pg = _gloo_group(store, f"fabric_probe/{first}/{second}/", grank, size, timeout_s)
                runs.append((_time_alltoall(pg, bytes_per_peer, size, iters, device, nccl),
                             _time_alltoall(pg, LATENCY_BYTES, size, iters, device, nccl), size))
            view = {"bw_t": max(statistics.median(r[0]) for r in runs),
                    "lat_t": max(statistics.median(r[1]) for r in runs), "size": runs[0][2],
                    "times_ms": [round(x * 1e3, 3) for r in runs for x in r[0]]}
        gathered: list[Any] = [None] * world
        dist.all_gather_object(gathered, view)
        views = [v for v in gathered if v is not None]
        if views:  # every rank of the pair timed the same all-to-alls: the slowest one's view is the pair's
            slowest = max(views, key=lambda v: v["bw_t"])
            size = slowest["size"]
            results.append(PairResult(nodes=(a, b), ranks=size,
                                      bandwidth_gbps=round(bytes_per_peer * (size - 1) / slowest["bw_t"] / 1e9, 6),
                                      latency_us=round(max(v["lat_t"] for v in views) * 1e6, 1),
                                      times_ms=tuple(slowest["times_ms"])))
    facts = {"nodes": nodes, "backend": backend, "world_size": world, "bytes_per_peer": bytes_per_peer,
             "iters": iters, "node_address": {n: node_address(n) for n in nodes},
             "nodelist": os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST")}
    dist.barrier()
    dist.destroy_process_group()
    return results, facts


def write(out_dir: Path, pairs: list[PairResult], facts: dict[str, Any]) -> Path:
    """Write ``OUT_DIR/fabric_probe.json`` (rank 0): the facts and one entry per pair."""
    out_dir.mkdir(parents=True, exist_ok=True)
    doc = {"schema_version": 1, **facts,
           "pairs": [{"nodes": list(p.nodes), "ranks": p.ranks, "bandwidth_gbps": p.bandwidth_gbps,
                      "latency_us": p.latency_us, "times_ms": list(p.times_ms)} for p in pairs]}
    path = out_dir / PROBE_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    os.replace(tmp, path)
    return path
