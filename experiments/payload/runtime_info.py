"""What the payload runs on: library versions, the GPU, the ranks and the performance environment variables.

Nothing here imports Transformer Engine, Megatron-Bridge or DeepEP: versions come from package metadata (or the
module, when it is already imported), so recording them is cheap and never fails.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import platform
import socket
import sys
from typing import Any

from experiments.payload.spec import VariantSpec

# Environment variables that change performance (FACTS §2-§3: the EP-overlap perf harness exports these).
PERF_ENV = (
    "CUDA_DEVICE_MAX_CONNECTIONS",
    "NCCL_NVLS_ENABLE",
    "NCCL_GRAPH_REGISTER",
    "PYTORCH_CUDA_ALLOC_CONF",
    "TORCH_NCCL_AVOID_RECORD_STREAMS",
    "TORCH_NCCL_HIGH_PRIORITY",
)
# HybridEP's own knobs (FACTS §3, Megatron-Bridge scripts/performance for hybridep).
HYBRIDEP_ENV = (
    "NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN",
    "NVLINK_DOMAIN_SIZE",
    "USE_MNNVL",
    "NUM_OF_TOKENS_PER_CHUNK_COMBINE_API",
)
SECRET_VALUE = "***"  # CONTRACTS §10


def say(line: str) -> None:
    """Print a progress line to the log, flushed (several ranks may share one log file)."""
    print(line, flush=True)


def _dist_version(*names: str) -> str | None:
    for name in names:
        try:
            return md.version(name)
        except md.PackageNotFoundError:
            continue
    return None


def _module_version(module: str) -> str | None:
    mod = sys.modules.get(module)
    v = getattr(mod, "__version__", None) if mod is not None else None
    return str(v) if v is not None else None


def versions() -> dict[str, str | None]:
    """Versions of the stack (CONTRACTS §6 ``versions``); ``None`` where a component is absent."""
    out: dict[str, str | None] = {"python": platform.python_version()}
    try:
        import torch

        out["torch"] = str(torch.__version__)
        out["cuda"] = torch.version.cuda
        try:
            out["nccl"] = ".".join(str(x) for x in torch.cuda.nccl.version())
        except Exception:  # CPU-only torch build: no NCCL
            out["nccl"] = None
    except ImportError:
        out.update(torch=None, cuda=None, nccl=None)
    out["transformer_engine"] = _module_version("transformer_engine") or _dist_version(
        "transformer_engine", "transformer-engine")
    out["megatron_core"] = _dist_version("megatron-core", "megatron_core") or _module_version("megatron.core")
    out["megatron_bridge"] = _dist_version("megatron-bridge", "megatron_bridge") or _module_version("megatron.bridge")
    out["deep_ep"] = _dist_version("deep_ep", "deep-ep") or _module_version("deep_ep")
    return out


def rank() -> int:
    """This process's global rank: ``RANK`` (torchrun) or ``SLURM_PROCID`` (srun), else 0."""
    for var in ("RANK", "SLURM_PROCID"):
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return 0


def _env_int(*names: str) -> int | None:
    for name in names:
        text = os.environ.get(name, "")
        head = text.split("(")[0]  # SLURM_TASKS_PER_NODE may read "8(x2)"
        if head.isdigit():
            return int(head)
    return None


def gpu() -> tuple[str | None, str | None, int]:
    """``(name, "major.minor", device count)`` of the local GPU, or ``(None, None, 0)`` without one."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None, None, 0
        count = torch.cuda.device_count()
        local = _env_int("LOCAL_RANK", "SLURM_LOCALID") or 0  # this rank's GPU, without touching device 0
        idx = local if local < count else 0
        major, minor = torch.cuda.get_device_capability(idx)
        return torch.cuda.get_device_name(idx), f"{major}.{minor}", count
    except Exception:
        return None, None, 0


def hardware(spec: VariantSpec, hostnames: list[str] | None, *, target: bool) -> dict[str, Any]:
    """CONTRACTS §6 ``hardware``.

    ``target=True`` (validate mode, one process): nodes, GPUs per node and world size are the target cluster's
    (the values the checks used); ``target=False`` (train mode): they come from the launcher's environment
    (torchrun ``WORLD_SIZE``/``LOCAL_WORLD_SIZE``/``GROUP_WORLD_SIZE``, or Slurm ``SLURM_*``).
    """
    name, cap, count = gpu()
    if target:
        nodes, gpn, world = spec.cluster.get("nodes"), spec.cluster.get("gpus_per_node"), spec.world_size
    else:
        world = _env_int("WORLD_SIZE", "SLURM_NTASKS")
        gpn = _env_int("LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE") or (count or None)
        nodes = _env_int("SLURM_NNODES", "SLURM_JOB_NUM_NODES", "GROUP_WORLD_SIZE")
        if nodes is None and world and gpn:
            nodes = max(1, world // gpn)
    return {"gpu_name": name, "compute_capability": cap, "nodes": nodes if isinstance(nodes, int) else None,
            "gpus_per_node": gpn if isinstance(gpn, int) else None, "world_size": world,
            "hostnames": hostnames,
            "nodelist": os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST") or None}


def local_hostname() -> str:
    """This machine's host name."""
    return socket.gethostname()


def env_report(spec: VariantSpec) -> tuple[dict[str, Any], list[str], list[str]]:
    """Check the environment the launcher promised and the performance variables.

    Returns ``(env, problems, warnings)``:
      - ``env``: every variable in ``variant.env`` plus :data:`PERF_ENV` (plus :data:`HYBRIDEP_ENV` for hybridep),
        with its value in this process (``None`` when unset, ``"***"`` for secrets);
      - ``problems``: a variable ``variant.env`` lists is unset here or has another value (e.g. a container image
        whose own setting won, FACTS §5 pyxis ``container_env``);
      - ``warnings``: performance hazards (FACTS §2: CUDA_DEVICE_MAX_CONNECTIONS must be > 1 for the overlap gain,
        published +7.8% at 32 vs +3.7% at 1; unset HybridEP knobs fall back to HybridEP defaults).
    """
    keys = list(spec.env) + [k for k in PERF_ENV if k not in spec.env]
    if spec.dispatcher == "hybridep":
        keys += [k for k in HYBRIDEP_ENV if k not in keys]
    env: dict[str, Any] = {}
    problems: list[str] = []
    for key in keys:
        have = os.environ.get(key)
        promised = spec.env.get(key)
        env[key] = SECRET_VALUE if (promised == SECRET_VALUE and have is not None) else have
        if key not in spec.env:
            continue
        if have is None:
            problems.append(f"{key} is not set in the job environment (variant.env says {promised!r})")
        elif promised == SECRET_VALUE and have == SECRET_VALUE:
            problems.append(f"{key} reached the job as the mask '***', not its value (export it where the sweep "
                            "is submitted from)")
        elif promised != SECRET_VALUE and str(promised) != have:
            problems.append(f"{key}={have!r} in the job environment, but variant.env says {promised!r}")
    warnings: list[str] = []
    cdmc = os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS")
    if spec.overlap and (cdmc is None or cdmc.strip() == "1"):
        warnings.append(f"CUDA_DEVICE_MAX_CONNECTIONS={cdmc} with overlap on: the overlap gain shrinks "
                        "(export a value > 1 in the job environment; setting it from Python is too late)")
    if spec.dispatcher == "hybridep":
        unset = [k for k in HYBRIDEP_ENV if os.environ.get(k) is None]
        if unset:
            warnings.append(f"hybridep without {', '.join(unset)}: HybridEP uses its defaults for them")
    return env, problems, warnings
