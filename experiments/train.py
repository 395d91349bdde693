"""The training payload: one process per GPU, inside the training container (CONTRACTS §3, §6).

Usage::

    python -m experiments.train VARIANT_JSON OUT_DIR [--mode train|validate] [--attempt K] [--hold-s N]

Start it with ``torchrun --nproc-per-node=G -m experiments.train ...`` or one ``srun`` task per GPU; the rank comes
from ``RANK`` or ``SLURM_PROCID``. It reads ``variant.json`` (schema_version 1) and writes only into OUT_DIR:
``OUT_DIR/effective_config.json`` (rank 0). Command-line flags override the file's ``mode`` and
``payload.hold_s``.

- ``--mode train``: build the Megatron-Bridge recipe named by ``model.recipe`` (a dotted function path; ``model.hf_path``
  reaches it as a local Hugging Face folder), or a GPTModelProvider for ``gpt_provider``; apply every setting, set
  overlap and delay_wgrad on ``cfg.comm_overlap`` explicitly, apply the dispatcher, the benchmark settings (mock data,
  no checkpoints, no evaluation, log every iteration with throughput, fixed seed, ``payload.train_iters``), check
  the exported environment, prove the effective config is the requested one, then ``pretrain(cfg, forward_step)``.
  Details: :mod:`experiments.payload.train_run`.
- ``--mode validate``: build the config and run every library check, write the verdict, never train, no
  distributed launch. Without Megatron-Bridge/Transformer Engine only Megatron-Core's checks run, and the rest are
  listed in ``checks.not_run``. Details: :mod:`experiments.payload.validate`.
- ``--hold-s N``: after the work, hold N seconds (a heartbeat line every 5 s) before exiting, so tests of
  cancellation and time limits have a job that lives long enough.

Every log line of the payload starts with ``[payload]``. A diagnosed failure prints one line
``[payload] error <code> <kind>: <cause>`` and exits with its code:

====  ================  ==========================================================================================
code  kind              when
====  ================  ==========================================================================================
0     ok                training finished, or the validate verdict is ``pass``
1     check_failed      a Megatron-Bridge / Megatron-Core check rejected the config (validate verdict ``fail``,
                        or train mode before iteration 1); the library's own message is logged and written
2     usage             bad command line
10    bad_variant_file  variant.json missing, unreadable, not JSON, wrong ``schema_version``, or inconsistent
11    unknown_recipe    ``model.recipe`` names no recipe function; close matches are listed
12    bridge_missing    ``megatron.bridge`` not importable in train mode (or lacks an object): use the container image
13    core_missing      ``megatron.core`` not importable: use the container image or the ``[megatron]`` extra
14    unknown_field     a setting does not exist on this Megatron-Bridge / Megatron-Core version (version named)
15    hf_unreachable    the Hugging Face config/tokenizer is unreachable offline: set ``model.hf_path``
16    mismatch          requested != effective outside ``allow_adjust`` (flex fallback, override, recipe default)
17    env_mismatch      a variable ``variant.env`` exports is missing or has another value in the job
18    no_gpu            train mode found no GPU (it never falls back to validate by itself, CONTRACTS §1)
19    internal          a payload bug (traceback in the log)
20    training_failed   ``pretrain`` raised something else after the config was accepted (OOM, NCCL, ...)
130   interrupted       SIGINT
====  ================  ==========================================================================================
"""

from __future__ import annotations

import sys

from experiments.payload.cli import main

if __name__ == "__main__":
    sys.exit(main())
