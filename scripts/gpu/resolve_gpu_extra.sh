#!/usr/bin/env bash
# Resolve pyproject's `gpu` extra (what `bash scripts/setup.sh gpu` installs) for a GPU workstation: Linux x86_64
# with glibc >= 2.39 (nvidia-resiliency-ext 0.6.0, a megatron-core `dev` dependency of megatron-bridge 0.6.2, has no
# wheel for older glibc) and Python 3.12, against PyPI, without installing or building anything (uv pip compile).
# The two sdists whose build needs torch get their declared metadata from scripts/gpu/sdist_metadata.toml. Exit 0 and
# the resolved versions of the stack, or uv's explanation of the conflict (the device bundle installs with --no-deps,
# so only this catches a pin of ours that the GPU stack's requirements exclude: hydra-core 1.3.2 did, 2026-12-01).
#   bash scripts/gpu/resolve_gpu_extra.sh [LOCK_OUT]      (default /tmp/moe-sweep-gpu-lock.txt; about 10 s)
#   PYPROJECT=other/pyproject.toml bash scripts/gpu/resolve_gpu_extra.sh   (another project file, e.g. in a test)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-/tmp/moe-sweep-gpu-lock.txt}
meta=$(pwd)/scripts/gpu/sdist_metadata.toml
project=$(realpath "${PYPROJECT:-pyproject.toml}")
UV=$(command -v uv || true)
if [ -z "$UV" ]; then
  [ -x .venv/bin/uv ] || .venv/bin/python -m pip install -q uv
  UV=.venv/bin/uv
fi
UV=$(realpath "$UV")
cd "$(dirname "$project")"  # uv reads the project file's folder (.python-version there or above)
"$UV" pip compile "$project" --extra gpu --python-platform x86_64-manylinux_2_39 --python-version 3.12 \
  --config-file "$meta" --quiet -o "$out"
echo "resolved $(grep -c '^[a-z0-9]' "$out") packages -> $out"
grep -E '^(torch|megatron-core|megatron-bridge|transformer-engine|transformer-engine-cu13|transformer-engine-torch|hydra-core|omegaconf|nemo-run|nvidia-resiliency-ext)==' "$out"
