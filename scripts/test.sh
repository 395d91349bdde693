#!/usr/bin/env bash
# The test command (README): installs what the tests need on a fresh machine, starts the local services
# (Slurm with slurmdbd, an sshd for the SSH tunnel tests, PostgreSQL), then runs the whole test suite: every tier
# (-m "" clears the fast-tier selection of pyproject's addopts), spread over the cores by pytest-xdist (the Slurm
# tests stay together on one worker: tests/conftest.py), with many examples per property test. Safe to re-run.
# Arguments go to pytest after these, so `bash scripts/test.sh -m slurm` or `-n 0` narrow or override them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
# shellcheck disable=SC1091
source .venv/bin/activate
# four emulated nodes: the jobs of a sweep (and of the tests that queue several) run side by side, as on a cluster,
# instead of one after another on the one node that the default emulates
[ -f scripts/slurm_local/start.sh ] && SLURM_LOCAL_NODES=${SLURM_LOCAL_NODES:-4} bash scripts/slurm_local/start.sh
[ -f scripts/sshd_local/start.sh ] && bash scripts/sshd_local/start.sh
[ -f scripts/pg_local/start.sh ] && bash scripts/pg_local/start.sh
[ -f scripts/chromium/install.sh ] && bash scripts/chromium/install.sh
[ -f scripts/mlflow_local/install.sh ] && bash scripts/mlflow_local/install.sh
ruff check experiments launchers analysis tests benchmarks scripts contracts
mypy
exec python -m pytest -q -p no:cacheprovider -m "" -n auto --dist loadgroup --hypothesis-profile=thorough \
  --durations=15 "$@"
