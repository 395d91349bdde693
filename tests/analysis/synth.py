"""Synthetic Megatron / Megatron-Bridge log lines and sweep folders for the analysis tests.

The line formats copy the real fixtures (tests/analysis/fixtures): Megatron-LM/Bridge ``training_log`` iteration
lines, Bridge memory (GB) and Step Time lines, Megatron memory (MB) lines.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures"


def megatron_lines() -> list[str]:
    """The non-comment lines of fixtures/megatron_lines.txt (real public log lines)."""
    text = (FIXTURES / "megatron_lines.txt").read_text()
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


def iteration_line(i: int, total: int, *, step_ms: float = 500.0, tflops: float | None = 3.0, loss: float = 7.0,
                   grad: float = 1.0, gbs: int = 8, skipped: int = 0, nans: int = 0, ts: str | None = "2026-11-29 15:08:09",
                   extra: dict[str, float] | None = None, label: str = "throughput per GPU (TFLOP/s/GPU)",
                   prefix: str = " ") -> str:
    """A Megatron iteration line in the exact layout of the real logs."""
    parts = [f"{prefix}[{ts}] " if ts else prefix, f"iteration {i:8d}/{total:8d} |",
             f" consumed samples: {i * gbs:12d} |", f" elapsed time per iteration (ms): {step_ms:.1f} |"]
    if tflops is not None:
        parts.append(f" {label}: {tflops:.1f} |")
    parts.append(f" learning rate: 3.000000E-05 | global batch size: {gbs:5d} | lm loss: {loss:.6E} |")
    for key, value in (extra or {"load_balancing_loss": 1.1}).items():
        parts.append(f" {key}: {value:.6E} |")
    parts.append(f" loss scale: 1.0 | grad norm: {grad:.3f} | number of skipped iterations: {skipped:3d} |"
                 f" number of nan iterations: {nans:3d} |")
    return "".join(parts)


def memory_gb(i: int, max_alloc: float, rank: int = 0) -> str:
    return (f"[Rank {rank}] (after {i} iterations) memory (GB) | mem-allocated-gigabytes: 1.3372 | "
            f"mem-max-allocated-gigabytes: {max_alloc} | mem-max-reserved-gigabytes: 1.8098 | mem-alloc-retires: 0")


def memory_mb(i: int, max_alloc: float, rank: int = 0) -> str:
    return (f"[Rank {rank}] (after {i} iterations) memory (MB) | allocated: 1000.0 | max allocated: {max_alloc} | "
            f"reserved: 3000.0 | max reserved: 3100.0")


def step_time(step_s: float, tflops: float, sep: str = " : ", unit: str = "MODEL_TFLOP/s/GPU") -> str:
    return f"Step Time{sep}{step_s:.2f}s GPU utilization: {tflops:.1f}{unit}"


SETUP = [
    "INFO:megatron.core.num_microbatches_calculator:setting number of microbatches to constant 8",
    "[model] Non-default values (vs Mcore TransformerConfig):",
    "  moe_token_dispatcher_type: 'alltoall'  (Mcore default: 'allgather')",
    "  global_batch_size: 8",
    "  seq_length: 1024",
    "> initializing torch distributed ...",
    "Starting training loop at iteration 0",
]


def training_log(n: int, total: int | None = None, *, step: Callable[[int], float] = lambda i: 500.0,
                 loss: Callable[[int], float] = lambda i: 10.0 - 0.1 * i, tflops: float | None = 3.0,
                 bridge_step_lines: bool = True, setup: Iterable[str] = SETUP, tail: Iterable[str] = (),
                 done: bool = True, gbs: int = 8, grad: Callable[[int], float] = lambda i: 1.0) -> list[str]:
    """Lines of a Bridge-style run: set-up, then per iteration a Step Time line and an iteration line, memory after
    iteration 1, ``[after training is done]`` when ``done``, then ``tail``."""
    total = total or n
    lines = list(setup)
    for i in range(1, n + 1):
        ms = step(i)
        if bridge_step_lines:
            lines.append(step_time(ms / 1000, tflops or 0.0))
        lines.append(iteration_line(i, total, step_ms=ms, tflops=tflops, loss=loss(i), grad=grad(i), gbs=gbs))
        if i == 1:
            lines.append(memory_gb(1, 1.7664))
    if done:
        lines.append("[after training is done] datetime: 2026-11-29 15:08:09 ")
    lines.extend(tail)
    return lines


def write_log(path: Path, lines: Iterable[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def effective_config(variant: str, requested: dict[str, Any], *, mode: str = "train", overlap_eff: bool | None = None,
                     dispatcher_type: str | None = None, backend: str | None = None, world_size: int = 2,
                     gbs: int = 8, seq: int = 1024, train_iters: int = 30, cuda_max_conn: str = "32",
                     checks: dict[str, Any] | None = None, adjustments: list[dict[str, Any]] | None = None,
                     profile: dict[str, Any] | None = None) -> dict[str, Any]:
    """An effective_config.json (CONTRACTS §6) whose effective values follow ``requested`` unless overridden."""
    flex = requested.get("dispatcher") in ("deepep", "hybridep", "ncclep")
    eff = {
        "moe_token_dispatcher_type": dispatcher_type or ("flex" if flex else requested.get("dispatcher")),
        "moe_flex_dispatcher_backend": backend or (requested.get("dispatcher") if flex else "deepep"),
        "overlap_moe_expert_parallel_comm": requested.get("overlap") if overlap_eff is None else overlap_eff,
        "delay_wgrad_compute": requested.get("delay_wgrad"),
        "moe_shared_expert_overlap": False, "expert_model_parallel_size": 2, "global_batch_size": gbs,
        "seq_length": seq, "micro_batch_size": 1, "train_iters": train_iters,
    }
    d = {"schema_version": 1, "variant": variant, "mode": mode, "attempt": 1, "requested": requested,
         "effective": eff, "adjustments": adjustments or [], "env": {"CUDA_DEVICE_MAX_CONNECTIONS": cuda_max_conn},
         "versions": {}, "hardware": {"gpu_name": "NVIDIA H200", "world_size": world_size, "hostnames": ["node01"]},
         "checks": checks or {"verdict": "pass", "messages": [], "not_run": []}}
    if profile:
        d["profile"] = profile
    return d


def make_sweep(root: Path, variants: list[dict[str, Any]], *, sweep_id: str = "20261129-160000Z-a1b2c3",
               mode: str = "train") -> Path:
    """Write a sweep folder. Each variant dict: name, dispatcher, overlap, delay_wgrad, role, status (manifest),
    group, and ``attempts``: list of dicts with repeat, status, exit_code, lines (log lines or None), effective
    (dict or None), log_name."""
    sweep = root / sweep_id
    manifest = {"schema_version": 1, "sweep_id": sweep_id, "name": "isolation", "created": "2026-11-29T16:00:00Z",
                "git_sha": "abc1234", "dirty": False, "mode": mode, "model": "tiny_moe", "cluster": "local",
                "container": {"torch": "2.14.1"}, "warnings": [], "stages": [], "runs": [], "variants": []}
    for v in variants:
        settings = {"moe_token_dispatcher_type": "flex" if v["dispatcher"] in ("deepep", "hybridep") else v["dispatcher"],
                    "overlap_moe_expert_parallel_comm": v["overlap"], "delay_wgrad_compute": v["delay_wgrad"],
                    "global_batch_size": 8, "seq_length": 1024}
        entry = {"name": v["name"], "dispatcher": v["dispatcher"], "overlap": v["overlap"],
                 "delay_wgrad": v["delay_wgrad"], "axes": v.get("axes", {}), "group": v.get("group", {}),
                 "role": v.get("role", "variant"), "stage": 1, "settings": settings,
                 "status": v.get("status", "planned"), "reasons": v.get("reasons", []),
                 "allow_adjust": ["moe_shared_expert_overlap"], "attempts": []}
        vdir = sweep / "variants" / v["name"]
        vdir.mkdir(parents=True)
        (vdir / "variant.json").write_text(json.dumps({
            "schema_version": 1, "variant": v["name"], "mode": mode, "settings": settings,
            "cluster": {"world_size": 2}, "env": {"CUDA_DEVICE_MAX_CONNECTIONS": "32"},
            "payload": {"train_iters": v.get("train_iters", 30)}}))
        for k, a in enumerate(v.get("attempts", []), start=1):
            adir = vdir / f"attempt-{k}"
            (adir / "logs").mkdir(parents=True)
            if a.get("lines") is not None:
                write_log(adir / "logs" / a.get("log_name", f"log-{v['name']}_{100 + k}_0.out"), a["lines"])
            if a.get("effective") is not None:
                (adir / "effective_config.json").write_text(json.dumps(a["effective"]))
            entry["attempts"].append({"attempt": k, "repeat": a.get("repeat", 0), "status": a.get("status", "succeeded"),
                                      "job_id": str(100 + k), "exit_code": a.get("exit_code", 0),
                                      "flags": a.get("flags", []), "log_dir": f"variants/{v['name']}/attempt-{k}/logs"})
            manifest["runs"].append({"variant": v["name"], "repeat": a.get("repeat", 0)})
        manifest["variants"].append(entry)
    (sweep / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return sweep
