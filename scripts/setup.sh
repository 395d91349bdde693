#!/usr/bin/env bash
# Create .venv (Python 3.12, selected by .python-version) and install the project.
#   bash scripts/setup.sh        orchestrator only (hydra, nemo-run, analysis libraries)
#   bash scripts/setup.sh megatron   + torch and megatron-core 0.19 (about 3 GB): real validate mode on a CPU
#   bash scripts/setup.sh test   + megatron, pytest, hypothesis, ruff, mypy
#   bash scripts/setup.sh gpu    + the payload's GPU stack (pyproject [gpu]: megatron-core, megatron-bridge,
#                                transformer-engine[pytorch] 2.12.0) on a GPU workstation with CUDA and a registry;
#                                the TE torch extension builds against the installed torch (needs CUDA_HOME)
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
  if [ "$extra" = gpu ]; then
    # transformer_engine_torch is an sdist whose build imports torch: install torch and the build tools first,
    # then build without isolation so that it links against this torch
    .venv/bin/python -m pip install -q "torch>=2.6,<2.15" wheel ninja pybind11 setuptools
    NVTE_FRAMEWORK=pytorch .venv/bin/python -m pip install -q --no-build-isolation -e "$spec"
  else
    .venv/bin/python -m pip install -q -e "$spec"
  fi
  touch "$stamp"
fi
