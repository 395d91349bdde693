#!/usr/bin/env bash
# The test command (README): installs what the tests need on a fresh machine, starts the local services
# (Slurm with slurmdbd, an sshd for the SSH tunnel tests, PostgreSQL), then runs the whole test suite. Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
# shellcheck disable=SC1091
source .venv/bin/activate
[ -f scripts/slurm_local/start.sh ] && bash scripts/slurm_local/start.sh
[ -f scripts/sshd_local/start.sh ] && bash scripts/sshd_local/start.sh
[ -f scripts/pg_local/start.sh ] && bash scripts/pg_local/start.sh
[ -f scripts/chromium/install.sh ] && bash scripts/chromium/install.sh
ruff check experiments launchers analysis tests benchmarks scripts
exec python -m pytest -q -p no:cacheprovider "$@"
