"""Megatron-Bridge's ``pretrain`` run directly on a variant's config, without the payload's additions: the reference
that shows what the payload's own checks and logging cost in step time.

    torchrun --nproc-per-node=1 scripts/gpu/direct_pretrain.py VARIANT_JSON OUT_DIR [--log-interval 10]

The ConfigContainer is built by the same code as the payload's (``build_config`` + ``apply_variant``), so model,
parallelism, batch, data and optimizer are identical; then the logger goes back to Megatron-Bridge's own
``LoggerConfig()`` defaults (no throughput logging) with ``log_interval`` 10, since the default of 100 would print
nothing in a 20-iteration run: the line at iteration 20 gives the mean step time of iterations 11-20. Left out
are the payload's pre-check (``runtime_config_update`` on a copy), the train-start hook (host names, effective
config, dispatcher classes), the env checks, ``effective_config.json`` and log interval 1.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("variant_json")
    ap.add_argument("out_dir")
    ap.add_argument("--log-interval", type=int, default=10)
    args = ap.parse_args(argv)
    t0 = time.time()
    from experiments.payload.bridge_api import load_bridge, stub_compile_helpers
    from experiments.payload.bridge_config import apply_variant, build_config
    from experiments.payload.spec import load_variant

    spec = load_variant(args.variant_json)
    api = load_bridge(spec.container.get("image"))
    stub_compile_helpers()
    cfg, _ = build_config(spec, api)
    apply_variant(cfg, spec, api)
    cfg.logger = api.LoggerConfig(log_interval=args.log_interval)  # Bridge's defaults otherwise
    cfg.profiling = None
    Path(args.out_dir).mkdir(parents=True, exist_ok=True)
    api.pretrain(cfg, api.forward_step)
    print(f"[direct] pretrain returned after {spec.train_iters} iterations; wall {time.time() - t0:.1f} s "
          "(from this script's imports)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
