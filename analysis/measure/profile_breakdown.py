"""Where the step time goes: a per-step breakdown of a torch.profiler Chrome trace (``profile=true``).

Input: the trace the payload captures (:mod:`experiments.payload.profile`; Megatron-Bridge exports it as
``profile/torch_profile/rank-0.json.gz``, the Chrome trace format of ``torch.profiler.profile.export_chrome_trace``:
``traceEvents`` with ``cat`` ``kernel`` / ``gpu_memcpy`` / ``gpu_memset`` on the GPU, ``cuda_runtime`` /
``cuda_driver`` launches on CPU threads, sharing ``args.correlation``; ``cpu_op`` / ``user_annotation`` ranges
such as ``ProfilerStep#N``).

Each GPU kernel gets one category, by its name and the CPU ranges around its launch:

- ``expert_gemm``: a GEMM launched inside the payload's ``moe_experts`` label (expert forward) or an autograd node
  of TE's grouped linear (``GroupedLinearBackward``, expert backward);
- ``attention``: flash / cuDNN fused attention kernels (``flash``, ``fmha``, ``sdpa``, ``attn``; checked first, as
  cuDNN's are named ``cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_...``, seen on the H200);
- ``dense_gemm``: any other GEMM (cuBLAS ``gemm``/``nvjet``/``cutlass``/``xmma`` kernel names);
- ``alltoall``: NCCL send/recv and all-to-all kernels (Megatron's token dispatcher all-to-all uses NCCL SendRecv);
- ``nccl_other``: other NCCL kernels (all-reduce, all-gather, reduce-scatter);
- ``other_compute``: every other kernel, memcpy and memset.

The step is partitioned along the GPU timeline: each instant goes to the first category active then, in the order
above for compute (so overlapping streams are not counted twice), then to exposed communication, then to idle.
Communication hidden by compute is the communication time during which a compute kernel also ran.
All times are per profiled step, in ms (the window from the first to the last GPU activity of the profiled
steps, divided by the number of ``ProfilerStep#`` ranges).
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

COMPUTE = ("expert_gemm", "dense_gemm", "attention", "other_compute")
COMM = ("alltoall", "nccl_other")
# summary.json runs[].step_breakdown_ms keys, in stacking order
PARTS = ("expert_gemm", "dense_gemm", "attention", "other_compute", "comm_exposed", "idle")
EXPERT_LABELS = ("moe_experts", "GroupedLinear", "GroupedMLP", "grouped_gemm")
_GEMM = re.compile(r"gemm|nvjet|cutlass|xmma|cublas|wgmma|s\d+816", re.I)
_ATTN = re.compile(r"flash|fmha|sdpa|attn|attention", re.I)
_NCCL = re.compile(r"nccl", re.I)
_A2A = re.compile(r"sendrecv|alltoall|all_to_all", re.I)
_STEP = re.compile(r"^ProfilerStep#(\d+)$")
SUMMARY_FILE = "step_breakdown.json"
TRACE_GLOBS = ("torch_profile/rank-0.json.gz", "torch_profile/*.json.gz", "torch_profile/*.json", "*.pt.trace.json*")


class TraceError(ValueError):
    """The file is not a torch.profiler Chrome trace with GPU kernels (the message names the file and why)."""


def load_trace(path: Path) -> list[dict[str, Any]]:
    """The ``traceEvents`` of a Chrome trace (``.json`` or ``.json.gz``).

    Raises:
        TraceError: unreadable, not JSON, or without a ``traceEvents`` list.
    """
    path = Path(path)
    try:
        raw = gzip.open(path, "rb").read() if path.name.endswith(".gz") else path.read_bytes()
        doc = json.loads(raw)
    except (OSError, ValueError, EOFError) as exc:
        raise TraceError(f"{path}: cannot read the trace ({type(exc).__name__}: {exc})") from exc
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise TraceError(f"{path}: no traceEvents list (not a Chrome trace)")
    return [e for e in events if isinstance(e, dict)]


def _union(intervals: np.ndarray) -> np.ndarray:
    """Merged, sorted [start, end) intervals of an (n, 2) array."""
    if len(intervals) == 0:
        return np.zeros((0, 2))
    iv = intervals[np.argsort(intervals[:, 0])]
    out = [list(iv[0])]
    for s, e in iv[1:]:
        if s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return np.asarray(out, dtype=float)


def _length(iv: np.ndarray) -> float:
    return float((iv[:, 1] - iv[:, 0]).sum()) if len(iv) else 0.0


def _subtract(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Merged intervals ``a`` minus merged intervals ``b`` (both sorted, disjoint)."""
    out, j = [], 0
    for s, e in a:
        cur = s
        while j < len(b) and b[j][1] <= cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] < e:
            if b[k][0] > cur:
                out.append((cur, b[k][0]))
            cur = max(cur, b[k][1])
            k += 1
        if cur < e:
            out.append((cur, e))
    return np.asarray(out, dtype=float).reshape(-1, 2)


def _intersect_length(a: np.ndarray, b: np.ndarray) -> float:
    return _length(a) - _length(_subtract(a, b))


def _label_ranges(events: Iterable[dict[str, Any]]) -> dict[Any, np.ndarray]:
    """Per CPU thread, the merged ranges of expert labels / grouped-linear autograd nodes."""
    per: dict[Any, list[tuple[float, float]]] = {}
    for e in events:
        if e.get("ph") != "X" or e.get("cat") not in ("cpu_op", "user_annotation", "python_function"):
            continue
        name = str(e.get("name", ""))
        if any(lbl in name for lbl in EXPERT_LABELS):
            ts, dur = float(e.get("ts", 0)), float(e.get("dur", 0))
            per.setdefault((e.get("pid"), e.get("tid")), []).append((ts, ts + dur))
    return {k: _union(np.asarray(v, dtype=float)) for k, v in per.items()}


def _inside(ranges: np.ndarray | None, t: float) -> bool:
    if ranges is None or not len(ranges):
        return False
    i = int(np.searchsorted(ranges[:, 0], t, side="right")) - 1
    return i >= 0 and t <= ranges[i, 1]


def categorize(name: str, in_expert: bool) -> str:
    """The category of one GPU activity from its kernel name and whether it was launched in an expert range."""
    if _NCCL.search(name):
        return "alltoall" if _A2A.search(name) else "nccl_other"
    if _ATTN.search(name):  # before GEMM: cuDNN's fused attention kernels are named ..._sdpa_..._wgmma_...
        return "attention"
    if _GEMM.search(name):
        return "expert_gemm" if in_expert else "dense_gemm"
    return "other_compute"


def breakdown(events: list[dict[str, Any]], source: str = "") -> dict[str, Any]:
    """The per-step breakdown of one trace's events (see the module docstring); a JSON-ready dict.

    Raises:
        TraceError: the trace holds no GPU kernel.
    """
    labels = _label_ranges(events)
    launches: dict[Any, tuple[Any, float]] = {}
    for e in events:
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in (e.get("args") or {}):
            launches[e["args"]["correlation"]] = ((e.get("pid"), e.get("tid")), float(e.get("ts", 0)))
    steps = sorted({int(m.group(1)) for e in events if e.get("cat") == "user_annotation"
                    for m in [_STEP.match(str(e.get("name", "")))] if m})
    spans: dict[str, list[tuple[float, float]]] = {c: [] for c in COMPUTE + COMM}
    kernels = 0
    for e in events:
        if e.get("ph") != "X" or e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        ts, dur = float(e.get("ts", 0)), float(e.get("dur", 0))
        name = str(e.get("name", ""))
        launch = launches.get((e.get("args") or {}).get("correlation"))
        in_expert = launch is not None and _inside(labels.get(launch[0]), launch[1])
        cat = "other_compute" if e.get("cat") != "kernel" else categorize(name, in_expert)
        spans[cat].append((ts, ts + dur))
        kernels += 1
    if not kernels:
        raise TraceError(f"{source or 'trace'}: no GPU kernel events (was the profiler run with CUDA activity?)")
    merged = {c: _union(np.asarray(v, dtype=float).reshape(-1, 2)) for c, v in spans.items()}
    every = _union(np.concatenate([m for m in merged.values() if len(m)]))
    t0, t1 = float(every[0, 0]), float(every[-1, 1])
    n = max(1, len(steps))
    parts: dict[str, float] = {}
    covered = np.zeros((0, 2))
    for c in COMPUTE:  # priority order: each instant counted once
        own = _subtract(merged[c], covered)
        parts[c] = _length(own)
        covered = _union(np.concatenate([covered, own])) if len(own) else covered
    compute = covered
    comm = _union(np.concatenate([merged[c] for c in COMM if len(merged[c])] or [np.zeros((0, 2))]))
    comm_total = _length(comm)
    hidden = _intersect_length(comm, compute)
    parts["comm_exposed"] = comm_total - hidden
    parts["idle"] = (t1 - t0) - _length(every)
    us_to_ms = 1e-3 / n
    out = {k: round(v * us_to_ms, 3) for k, v in parts.items()}
    step_ms = round((t1 - t0) * us_to_ms, 3)
    return {
        "schema": "step_breakdown/1", "source": source, "tool": "torch.profiler", "steps": n,
        "profiled_steps": steps, "kernels": kernels, "step_ms": step_ms, "parts_ms": out,
        "comm_ms": {"alltoall": round(_length(merged["alltoall"]) * us_to_ms, 3),
                    "nccl_other": round(_length(merged["nccl_other"]) * us_to_ms, 3),
                    "total": round(comm_total * us_to_ms, 3), "hidden": round(hidden * us_to_ms, 3)},
        "hidden_comm_fraction": round(hidden / comm_total, 4) if comm_total > 0 else None,
        "gpu_busy_fraction": round(_length(every) / (t1 - t0), 4) if t1 > t0 else None,
    }


def find_trace(run_dir: Path) -> Path | None:
    """The rank-0 trace under ``run_dir/profile`` (the payload's layout), or None."""
    base = Path(run_dir) / "profile"
    for pattern in TRACE_GLOBS:
        hits = sorted(base.glob(pattern))
        if hits:
            return hits[0]
    return None


def load_or_summarize(run_dir: Path, write: bool = True) -> dict[str, Any] | None:
    """The breakdown of an attempt folder: ``profile/step_breakdown.json`` when present, else computed from the
    raw trace (and written there when ``write``); None when the run was not profiled. A damaged trace gives
    ``{"error": ...}`` instead of raising, so that one bad file never stops the analysis."""
    base = Path(run_dir) / "profile"
    cached = base / SUMMARY_FILE
    if cached.is_file():
        try:
            return json.loads(cached.read_text())
        except ValueError as exc:
            return {"error": f"{cached}: {exc}"}
    trace = find_trace(run_dir)
    if trace is None:
        return None
    try:
        doc = breakdown(load_trace(trace), source=str(trace.relative_to(run_dir)))
    except TraceError as exc:
        return {"error": str(exc)}
    if write:
        from contracts.atomic import write_json

        write_json(cached, doc, strict=True)
    return doc


def main(argv: list[str] | None = None) -> int:
    """``python -m analysis.measure.profile_breakdown TRACE_OR_RUN_DIR...``: print each breakdown as JSON."""
    import sys

    paths = sys.argv[1:] if argv is None else argv
    if not paths:
        print("usage: python -m analysis.measure.profile_breakdown TRACE.json[.gz] | ATTEMPT_DIR ...", file=sys.stderr)
        return 2
    code = 0
    for p in map(Path, paths):
        try:
            doc = load_or_summarize(p) if p.is_dir() else breakdown(load_trace(p), source=str(p))
        except TraceError as exc:
            doc, code = {"error": str(exc)}, 1
        print(json.dumps({"path": str(p), **(doc or {"error": "no profile"})}, indent=1))
    return code


if __name__ == "__main__":
    raise SystemExit(main())
