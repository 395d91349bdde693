"""The sweep's overhead against direct runs, from ``h200_overhead.sh triples`` output (standard library only).

    python3 scripts/gpu/overhead_table.py RESULTS_DIR  ->  RESULTS_DIR/overhead.json and a table on stdout

Per triple k (run in this order: sweep, payload, bridge; interleaved over k):
- ``payload_ms`` / ``bridge_ms``: mean step time of iterations FIRST..LAST (default 11..20) from Megatron's
  ``elapsed time per iteration (ms)`` lines: the payload logs every iteration (mean of 10 lines), Bridge's direct
  run logs every 10th (the line at LAST is the mean over the 10 before it, Megatron's own averaging);
- ``ratio`` payload_ms / bridge_ms: the payload's cost (target <= 1.01);
- ``sweep_overhead_s``: the wall of the sweep command minus the wall of the direct torchrun of the same payload
  and variant.json (target <= 5 s). Start-up of a torchrun job varies by 10-20 s between runs on the H200 (caches),
  so this difference is noisy; the next two figures time the conductor itself:
- ``sweep_pre_launch_s``: from the sweep command's start to the launch of its job (the NeMo-Run experiment is
  labelled with ``time.time_ns()`` at launch: ``<title>_s1-<ns>``, the attempt's ``job_id``);
- ``sweep_post_s``: from the attempt's ``finished`` time in the manifest (1 s resolution) to the command's exit.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path

LINE = re.compile(r"iteration\s+(\d+)/\s*\d+\s*\|.*?elapsed time per iteration \(ms\):\s*([\d.]+)")


def step_times(text: str) -> dict[int, float]:
    """iteration -> elapsed ms from Megatron's training log lines (the last value of an iteration wins)."""
    return {int(m.group(1)): float(m.group(2)) for m in LINE.finditer(text)}


def mean_window(times: dict[int, float], first: int, last: int, interval: int) -> float | None:
    """Mean step ms over iterations first..last: every line in the window when logged each iteration, else the
    logged averages whose intervals tile the window (Megatron averages over the ``interval`` iterations)."""
    if interval == 1:
        vals = [times[i] for i in range(first, last + 1) if i in times]
        return statistics.fmean(vals) if len(vals) == last - first + 1 else None
    ends = list(range(first + interval - 1, last + 1, interval))
    vals = [times[i] for i in ends if i in times]
    return statistics.fmean(vals) if vals and len(vals) == len(ends) else None


def conductor_phases(sweep_dir: Path, t0: float, t1: float) -> tuple[float | None, float | None]:
    """(pre-launch s, post-job s) of a one-run sweep folder whose command ran from ``t0`` to ``t1`` (epoch s).

    From the conductor's own record (``conductor.json``, experiments/timeline.py: process start to the launcher's
    return, and the run seen final to the record) when the sweep wrote one; else, for folders of older revisions,
    from the experiment label's launch time and the attempt's ``finished`` time (1 s resolution)."""
    from datetime import datetime

    try:
        (session,) = json.loads((sweep_dir / "conductor.json").read_text())["sessions"][-1:]
        return session["pre_launch_s"], session["post_job_s"] + max(0.0, t1 - session["end"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        m = json.loads((sweep_dir / "manifest.json").read_text())
        (a,) = [a for v in m["variants"] for a in v["attempts"]]
        launched = int(str(a["job_id"]).rsplit("-", 1)[-1]) / 1e9
        finished = datetime.fromisoformat(a["finished"].replace("Z", "+00:00")).timestamp()
    except (OSError, ValueError, KeyError, TypeError):
        return None, None
    return launched - t0, t1 - finished


def main(argv: list[str]) -> int:
    root = Path(argv[0])
    first, last = 11, 20
    rows = [line.split("\t") for line in (root / "timing.tsv").read_text().splitlines() if line.strip()]
    spans = {(kind, name): (float(t0), float(t1)) for kind, name, t0, t1, _ in rows}
    walls = {(kind, name): float(t1) - float(t0) for kind, name, t0, t1, _ in rows}
    rcs = {(kind, name): int(rc) for kind, name, _, _, rc in rows}
    triples = sorted({name.rsplit("_", 1)[-1] for kind, name in walls if kind == "sweep" and name.startswith("tri_")})
    out = []
    for k in triples:
        rec = {"k": int(k)}
        for kind, interval in (("payload", 1), ("bridge", 10)):
            log = root / f"tri_{kind}_{k}.log"
            text = log.read_text(errors="replace") if log.exists() else ""
            rec[f"{kind}_ms"] = mean_window(step_times(text), first, last, interval)
            rec[f"{kind}_wall_s"] = walls.get((kind, f"tri_{kind}_{k}"))
            rec[f"{kind}_rc"] = rcs.get((kind, f"tri_{kind}_{k}"))
        sweep_logs = sorted((root / f"tri_sweep_{k}").glob("variants/*/attempt-1/logs/**/*.log"))
        sweep_text = "".join(p.read_text(errors="replace") for p in sweep_logs)
        rec["sweep_ms"] = mean_window(step_times(sweep_text), first, last, 1)
        rec["sweep_wall_s"] = walls.get(("sweep", f"tri_sweep_{k}"))
        rec["sweep_rc"] = rcs.get(("sweep", f"tri_sweep_{k}"))
        if ("sweep", f"tri_sweep_{k}") in spans:
            rec["sweep_pre_launch_s"], rec["sweep_post_s"] = conductor_phases(
                root / f"tri_sweep_{k}", *spans[("sweep", f"tri_sweep_{k}")])
        if rec["payload_ms"] and rec["bridge_ms"]:
            rec["ratio"] = rec["payload_ms"] / rec["bridge_ms"]
        if rec["sweep_wall_s"] is not None and rec["payload_wall_s"] is not None:
            rec["sweep_overhead_s"] = rec["sweep_wall_s"] - rec["payload_wall_s"]
        out.append(rec)
    ratios = [r["ratio"] for r in out if r.get("ratio")]
    over = [r["sweep_overhead_s"] for r in out if r.get("sweep_overhead_s") is not None]
    fixed = [r["sweep_pre_launch_s"] + r["sweep_post_s"] for r in out if r.get("sweep_pre_launch_s") is not None
             and r.get("sweep_post_s") is not None]
    doc = {"window": [first, last], "triples": out,
           "median_ratio": statistics.median(ratios) if ratios else None,
           "median_sweep_overhead_s": statistics.median(over) if over else None,
           "median_conductor_s": statistics.median(fixed) if fixed else None}
    (root / "overhead.json").write_text(json.dumps(doc, indent=1))
    print("k  payload_ms  bridge_ms  ratio   sweep_ms  sweep_wall  payload_wall  bridge_wall  overhead_s")
    for r in out:
        def f(x, d=1):
            return "-" if x is None else f"{x:.{d}f}"
        print(f"{r['k']}  {f(r['payload_ms'])}  {f(r['bridge_ms'])}  {f(r.get('ratio'), 4)}  {f(r['sweep_ms'])}  "
              f"{f(r['sweep_wall_s'])}  {f(r['payload_wall_s'])}  {f(r['bridge_wall_s'])}  {f(r.get('sweep_overhead_s'))}")
    for r in out:
        if r.get("sweep_pre_launch_s") is not None:
            print(f"sweep {r['k']}: {r['sweep_pre_launch_s']:.1f} s before its job was launched, "
                  f"{r['sweep_post_s']:.1f} s after it finished")
    print(f"median ratio {doc['median_ratio']}, median sweep overhead {doc['median_sweep_overhead_s']} s, "
          f"median conductor time outside the job {doc['median_conductor_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
