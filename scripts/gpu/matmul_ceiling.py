"""Measure the dense matrix-product ceiling of one GPU (bf16 by default), in TFLOP/s.

The payload's achieved TFLOP/s/GPU means something only against a ceiling measured on the same GPU shortly before;
this script is that measurement (device stage `matmul`, scripts/gpu/device_stage.sh).

Method: random normal inputs (never zeros, which ran 13% faster on an H200), a correctness check against a float32 product of the same inputs, warm-up products first, then each timed
product bracketed by its own pair of CUDA events; the figure is the median. Two input sets are alternated so that
no product reuses the previous one's operands. One m x k by k x n product counts 2*m*n*k floating-point operations.
For reference, KINDS.md records 769-798 TFLOP/s for an 8192^3 bf16 product through PyTorch on this machine kind.

Usage:
    python3 scripts/gpu/matmul_ceiling.py [--sizes 8192] [--iters 20] [--warmup 5] [--out matmul.json]
Prints one table row per size and a last line ``MATMUL_CEILING_TFLOPS=<value> ...``; writes the JSON atomically.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime

import torch

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
# bf16/fp16 operands with fp32 accumulation land between 1e-3 and 1e-2 against a float32 product (METHOD.md)
MAX_REL_ERR = {"bf16": 2e-2, "fp16": 1e-2, "fp32": 1e-4}


def matmul_flops(m: int, n: int, k: int) -> int:
    """Floating-point operations of one (m x k) @ (k x n) product: 2*m*n*k (one multiply and one add each)."""
    if min(m, n, k) <= 0:
        raise ValueError(f"matrix sizes must be positive, got m={m} n={n} k={k}")
    return 2 * m * n * k


def tflops(flops: int, seconds: float) -> float:
    """Rate in TFLOP/s (1e12 floating-point operations per second) of `flops` done in `seconds` (s > 0)."""
    if seconds <= 0:
        raise ValueError(f"seconds must be > 0, got {seconds}")
    return flops / seconds / 1e12


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref||_F / ||ref||_F, computed in float64 on the tensors' device (dimensionless)."""
    diff = (out.double() - ref.double()).norm()
    return float(diff / ref.double().norm())


def _time_one(fn, device: torch.device) -> float:
    """Seconds taken by fn() on `device`: CUDA events around it on a GPU, a host clock after sync elsewhere."""
    if device.type == "cuda":
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop) / 1e3
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def measure(size: int, dtype: str, iters: int, warmup: int, device: torch.device, seed: int = 0) -> dict:
    """Time `iters` square products of side `size` after `warmup` untimed ones.

    Returns a dict with the per-size figures: times in ms (median_ms, mean_ms, min_ms), rates in TFLOP/s
    (tflops_median from the median time, tflops_best from the fastest) and rel_err of a checked product.
    Raises ValueError for an unknown dtype, a non-positive size or iteration count, and RuntimeError when the
    product disagrees with the float32 reference by more than MAX_REL_ERR[dtype] or is not finite.
    """
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} is not one of {sorted(DTYPES)}")
    if size <= 0 or iters <= 0 or warmup < 0:
        raise ValueError(f"need size > 0, iters > 0, warmup >= 0; got size={size} iters={iters} warmup={warmup}")
    gen = torch.Generator(device=device).manual_seed(seed)
    sets = [
        tuple(torch.randn(size, size, generator=gen, device=device, dtype=DTYPES[dtype]) for _ in range(2))
        for _ in range(2)
    ]
    out = torch.empty(size, size, device=device, dtype=DTYPES[dtype])

    # correctness: the first rows of one product against a float32 product of the same (rounded) operands
    a, b = sets[0]
    rows = min(size, 1024)
    out.fill_(float("nan"))
    torch.matmul(a, b, out=out)
    prev_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        ref = torch.matmul(a[:rows].float(), b.float())
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev_tf32
    err = relative_error(out[:rows], ref)
    if not torch.isfinite(out).all() or err > MAX_REL_ERR[dtype]:
        raise RuntimeError(f"{dtype} {size}^3 product is wrong: relative error {err:.2e} > {MAX_REL_ERR[dtype]}")
    del ref

    for i in range(warmup):
        a, b = sets[i % 2]
        torch.matmul(a, b, out=out)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    secs = []
    for i in range(iters):
        a, b = sets[i % 2]
        secs.append(_time_one(lambda a=a, b=b: torch.matmul(a, b, out=out), device))
    flops = matmul_flops(size, size, size)
    med = statistics.median(secs)
    return {
        "m": size, "n": size, "k": size, "dtype": dtype, "iters": iters, "warmup": warmup,
        "median_ms": med * 1e3, "mean_ms": statistics.fmean(secs) * 1e3, "min_ms": min(secs) * 1e3,
        "tflops_median": tflops(flops, med), "tflops_best": tflops(flops, min(secs)), "rel_err": err,
    }


def write_json_atomic(path: str, data: dict) -> None:
    """Write `data` as JSON to `path` through a temporary file in the same folder and os.replace."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".matmul-", suffix=".json")
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh, indent=1)
        fh.write("\n")
    os.replace(tmp, path)


def run(sizes: list[int], dtype: str, iters: int, warmup: int, device_name: str) -> dict:
    """Measure every size; the ceiling (TFLOP/s) is the largest median rate over the sizes."""
    device = torch.device(device_name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("no CUDA device visible (torch.cuda.is_available() is False); use --device cpu to test")
    results = [measure(s, dtype, iters, warmup, device) for s in sizes]
    best = max(results, key=lambda r: r["tflops_median"])
    return {
        "schema_version": 1,
        "measured": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "dtype": dtype, "results": results,
        "ceiling_tflops": best["tflops_median"], "ceiling_size": best["m"],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="8192", help="comma-separated square sizes (default 8192)")
    p.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--device", default="cuda", help="cuda (default) or cpu (tests only)")
    p.add_argument("--out", default=None, help="JSON file to write (default: none)")
    args = p.parse_args(argv)
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        p.error(f"--sizes must be comma-separated integers, got {args.sizes!r}")
    report = run(sizes, args.dtype, args.iters, args.warmup, args.device)
    print(f"{'size':>7} {'median ms':>10} {'min ms':>8} {'TFLOP/s med':>12} {'TFLOP/s best':>13} {'rel err':>8}")
    for r in report["results"]:
        print(f"{r['m']:>7} {r['median_ms']:>10.3f} {r['min_ms']:>8.3f} {r['tflops_median']:>12.1f}"
              f" {r['tflops_best']:>13.1f} {r['rel_err']:>8.1e}")
    if args.out:
        write_json_atomic(args.out, report)
    print(f"MATMUL_CEILING_TFLOPS={report['ceiling_tflops']:.1f} ({report['dtype']}, {report['ceiling_size']}^3,"
          f" median of {args.iters}, {report['device']}, torch {report['torch']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
