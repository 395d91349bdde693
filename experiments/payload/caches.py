"""Compile and autotune caches kept with the sweep, so that only a sweep's first run pays for them.

The payload points each cache the stack supports at a folder shared by the sweep's runs, before torch is
imported (each variable is read when its library starts), unless the job's environment already names one:

| variable | library | what it keeps |
|---|---|---|
| ``TRITON_CACHE_DIR`` | Triton | compiled kernels (``triton/runtime/cache.py``; default ``~/.triton/cache``) |
| ``TORCHINDUCTOR_CACHE_DIR`` | TorchInductor | generated code, FX graph and autotune results |
| ``TORCHINDUCTOR_FX_GRAPH_CACHE`` | TorchInductor | ``1``: the FX graph cache on, whatever the torch version's default |
| ``CUDA_CACHE_PATH`` | the CUDA driver | PTX compiled to the GPU's code by the driver's JIT (default ``~/.nv/ComputeCache``) |
| ``NCCL_TOPO_DUMP_FILE`` / ``NCCL_TOPO_FILE`` | NCCL | the first run on a host dumps the detected topology (XML; local rank 0 only), later runs on it load that file |

The folder is ``$MOE_SWEEP_CACHE`` when set (a cluster's scratch: ``cluster.env_vars``), else ``cache/`` in the
sweep folder (the variant file lives at ``<sweep>/variants/<variant>/variant.json``), else ``cache/`` in the run's
own folder. Transformer Engine keeps no kernel cache on disk of its own (its NVRTC kernels are compiled per
process), so the CUDA driver's JIT cache is the one that serves it.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

ENV_ROOT = "MOE_SWEEP_CACHE"
FOLDERS = {"TRITON_CACHE_DIR": "triton", "TORCHINDUCTOR_CACHE_DIR": "inductor", "CUDA_CACHE_PATH": "cuda"}


def cache_root(variant_json: Path, out_dir: Path) -> Path:
    """The cache folder for a run (see the module docstring)."""
    if os.environ.get(ENV_ROOT):
        return Path(os.environ[ENV_ROOT])
    vdir = Path(variant_json).resolve().parent
    if vdir.parent.name == "variants":
        return vdir.parent.parent / "cache"
    return Path(out_dir) / "cache"


def use_caches(variant_json: Path, out_dir: Path) -> dict[str, str]:
    """Set the cache variables that the job's environment leaves unset; returns those it set (name -> value).
    A folder that cannot be made leaves that cache at its library's default."""
    root = cache_root(variant_json, out_dir)
    done: dict[str, str] = {}
    for var, sub in FOLDERS.items():
        if os.environ.get(var):
            continue
        try:
            (root / sub).mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        os.environ[var] = done[var] = str(root / sub)
    if "TORCHINDUCTOR_FX_GRAPH_CACHE" not in os.environ:
        os.environ["TORCHINDUCTOR_FX_GRAPH_CACHE"] = done["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "1"
    if not os.environ.get("NCCL_TOPO_FILE") and not os.environ.get("NCCL_TOPO_DUMP_FILE"):
        topo = root / "nccl" / f"topo-{socket.gethostname()}.xml"
        if topo.is_file() and topo.stat().st_size:
            os.environ["NCCL_TOPO_FILE"] = done["NCCL_TOPO_FILE"] = str(topo)
        elif os.environ.get("LOCAL_RANK", "0") == "0":  # one writer per host
            try:
                topo.parent.mkdir(parents=True, exist_ok=True)
                os.environ["NCCL_TOPO_DUMP_FILE"] = done["NCCL_TOPO_DUMP_FILE"] = str(topo)
            except OSError:
                pass
    return done
