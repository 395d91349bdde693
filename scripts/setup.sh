#!/usr/bin/env bash
# Create .venv (Python 3.12, selected by .python-version) and install the project.
#   bash scripts/setup.sh        orchestrator only (hydra, nemo-run, analysis libraries)
#   bash scripts/setup.sh megatron   + torch and megatron-core 0.19 (about 3 GB): real validate mode on a CPU
#   bash scripts/setup.sh test   + megatron, pytest, hypothesis, ruff
# Re-running is cheap: pip is skipped when pyproject.toml has not changed since the last install.
set -euo pipefail
cd "$(dirname "$0")/.."
extra=${1:-}
PY=${PYTHON:-python3.12}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
fi
stamp=".venv/.installed-${extra:-base}"
# the test extra includes megatron, so a test install also satisfies the main job
[ "$extra" = megatron ] && [ -f .venv/.installed-test ] && [ ! pyproject.toml -nt .venv/.installed-test ] && exit 0
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  spec="."
  [ -n "$extra" ] && spec=".[$extra]"
  .venv/bin/python -m pip install -q -e "$spec"
  touch "$stamp"
fi
