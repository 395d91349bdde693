"""``python -m experiments.fabric_probe OUT_DIR --bytes-per-peer B [--iters K]``: the fabric probe job's command.

Started by torchrun on every node of the allocation (launchers/batch.py); measures an all-to-all per node pair
(:mod:`experiments.payload.fabric`) and writes ``OUT_DIR/fabric_probe.json`` on rank 0. Exit codes: 0 written,
2 bad arguments (argparse), 21 the probe failed (a group could not be formed, an all-to-all failed: the message is
in the log).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

PROBE_FAILED = 21


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code (module doc)."""
    p = argparse.ArgumentParser(prog="python -m experiments.fabric_probe",
                                description="All-to-all bandwidth and latency per node pair of this allocation.")
    p.add_argument("out_dir")
    p.add_argument("--bytes-per-peer", type=int, required=True, dest="bytes_per_peer",
                   help="bytes each rank sends to each member of a pair's group (the EP dispatch message)")
    p.add_argument("--iters", type=int, default=10, help="timed all-to-alls per pair and size (default 10)")
    args = p.parse_args(argv)
    if args.bytes_per_peer < 1 or args.iters < 1:
        p.error(f"--bytes-per-peer={args.bytes_per_peer} and --iters={args.iters} must be at least 1")
    from experiments.payload import fabric

    try:
        pairs, facts = fabric.measure(args.bytes_per_peer, args.iters)
    except Exception as e:
        traceback.print_exc()
        print(f"[fabric_probe] error {PROBE_FAILED}: {type(e).__name__}: {e}", flush=True)
        return PROBE_FAILED
    import os

    if os.environ.get("RANK", "0") == "0":
        path = fabric.write(Path(args.out_dir), pairs, facts)
        for pr in pairs:
            print(f"[fabric_probe] {pr.nodes[0]}-{pr.nodes[1]}: {pr.bandwidth_gbps:.3f} GB/s, "
                  f"{pr.latency_us:.0f} us ({pr.ranks} ranks)", flush=True)
        print(f"[fabric_probe] wrote {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
