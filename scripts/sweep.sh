#!/usr/bin/env bash
# The main-job command (README): set up .venv on a fresh machine (orchestrator + torch + megatron-core for the
# embedded local run's real validate mode), then run `python -m experiments.sweep` with your overrides.
#   bash scripts/sweep.sh                         # the embedded default: tiny_moe, cluster=local, sweep=isolation
#   bash scripts/sweep.sh action=plan cluster=h100_slurm model=qwen3_30b_a3b
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh megatron
# exec keeps this process's pid and start time: the conductor's timeline (experiments/timeline.py) starts here,
# after the set-up above, not when this script started
export MOE_SWEEP_EXEC="$$:$(date +%s.%N)"
exec .venv/bin/python -m experiments.sweep "$@"
