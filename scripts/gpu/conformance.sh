#!/usr/bin/env bash
# The conformance stage against Megatron-Bridge's own tests, on the device after the bring-up (scripts/gpu/README.md).
#
#   workstation:  BRIDGE_SRC=<Megatron-Bridge git dir or URL> BRIDGE_REF=v0.6.2 bash scripts/gpu/conformance.sh fetch
#                 -> .gpu/bridge_tests/ (git-ignored, never committed): tests/unit_tests/{__init__,conftest}.py,
#                    tests/unit_tests/training/{__init__,test_comm_overlap,test_deepep}.py and scripts/performance
#                    (test_deepep imports scripts.performance.utils), plus pytest's wheels in wheels/ in case the
#                    image has no pytest. About 1 MiB: carry it with any call, e.g. the first sweep call.
#   device:       run(carry=[".gpu/bridge_tests"], timeout_s=600,
#                     command="bash scripts/gpu/conformance.sh run 2>&1 | tee $OUT/conformance.log")
#                 -> python -m experiments.conformance (the same job the sweep's conformance=true submits) writes
#                    $OUT/conformance/conformance.json and one junit XML per suite; then, with SWEEP=1, a sweep with
#                    conformance=true conformance_dir=<that folder> so that the gating is exercised end to end.
# Exit codes: 0 done (a failed upstream test is a result, read conformance.json), 1 a missing piece (no bring-up,
# no tests fetched, no pytest), 2 usage.
set -euo pipefail
cd "$(dirname "$0")/../.."
DEST=.gpu/bridge_tests
case "${1:-}" in
  fetch)
    src=${BRIDGE_SRC:-https://github.com/NVIDIA-NeMo/Megatron-Bridge.git}
    ref=${BRIDGE_REF:-v0.6.2}
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    if [ -d "$src" ]; then git_dir=$src; else git clone -q --bare --filter=blob:none "$src" "$tmp/repo.git"; git_dir=$tmp/repo.git; fi
    git -C "$git_dir" rev-parse --verify -q "$ref^{commit}" >/dev/null || { echo "conformance: $src has no ref $ref" >&2; exit 1; }
    rm -rf "$DEST" && mkdir -p "$DEST/wheels"
    git -C "$git_dir" archive "$ref" tests/unit_tests/__init__.py tests/unit_tests/conftest.py \
      tests/unit_tests/training/__init__.py tests/unit_tests/training/test_comm_overlap.py \
      tests/unit_tests/training/test_deepep.py scripts/performance | tar -x -C "$DEST"
    git -C "$git_dir" rev-parse "$ref^{commit}" > "$DEST/REF"
    "${PYTHON:-.venv/bin/python}" -m pip download -q --no-deps -d "$DEST/wheels" pytest pluggy iniconfig
    du -sh "$DEST"; echo "fetched $ref ($(cat "$DEST/REF")) into $DEST"
    ;;
  run)
    [ -f "$DEST/tests/unit_tests/training/test_comm_overlap.py" ] || { echo "conformance: carry $DEST (run fetch on the workstation)" >&2; exit 1; }
    # shellcheck source=/dev/null
    source scripts/gpu/device_env.sh || exit 1
    if ! python3 -c "import pytest" 2>/dev/null; then
      python3 -m pip install -q --no-index --no-deps --target "${GPU_SITE:-/tmp/site}" "$DEST"/wheels/*.whl || { echo "conformance: no pytest" >&2; exit 1; }
    fi
    out=${OUT:-results}/conformance
    python3 -m experiments.conformance "$(pwd)/$DEST/tests/unit_tests" "$out" \
      comm_overlap=training/test_comm_overlap.py deepep=training/test_deepep.py
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); [print(k, v.get('exit'), {o: sum(x == o for x in v['tests'].values()) for o in ('passed','failed','error','skipped')}) for k, v in d.items()]" "$out/conformance.json"
    if [ "${SWEEP:-0}" = 1 ]; then
      python3 -m experiments.sweep cluster=local model=tiny_moe model.expert_model_parallel_size=1 conformance=true \
        "conformance_dir=$(pwd)/$DEST/tests/unit_tests" allow_dirty=true
    fi
    ;;
  *) echo "usage: bash scripts/gpu/conformance.sh fetch|run" >&2; exit 2 ;;
esac
