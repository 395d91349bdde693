#!/usr/bin/env bash
# Device half of the H200 bring-up: run ON THE DEVICE machine, from the repository root, in stages.
# scripts/gpu/README.md has the exact `run` calls (carry lists, order, timings). Everything is installed into
# $GPU_SITE (default /tmp/site), which lasts only while the machine stays warm (30 s after each call).
#
# Usage: bash scripts/gpu/device_stage.sh STAGE [STAGE ...]    (stops at the first stage that fails)
#   info       machine facts: GPU, python, torch, CUDA, make/nvcc, the cuBLAS symbol TE >= 2.13 needs;
#              the image's pip freeze -> $OUT/image_freeze.txt
#   matmul     bf16 dense matmul ceiling (8192^3, CUDA events) -> $OUT/matmul.json, MATMUL_CEILING_TFLOPS=...
#   recv       copy the carried .gpu/cK/bundle.part.* (one or more per call) into $GPU_STAGE
#   assemble   all parts here? cat them, check sha256, unpack the bundle (wheels/, te/)
#   install    pip-install the wheels into $GPU_SITE, then the TE core + meta wheels on top
#   build_ext  build transformer_engine_torch from its sdist here (~80 s on 16 cores), install it
#   imports    import transformer_engine(.pytorch), megatron.core, megatron.bridge (+ pretrain, gpt_step)
#   orch       import every runtime dep pyproject names (scripts/gpu/deps.py imports: hydra, nemo_run, re2,
#              pyarrow, psycopg, ...), torchx, fiddle and every module of experiments/, launchers/, analysis/
#   smoke      te.Linear bf16 forward + backward on the GPU
#   pack       tar results/ (or $PACK_DIRS) into $OUT/results.tgz (one file: $OUT keeps 2 folder levels only)
# Afterwards: `source scripts/gpu/device_env.sh` and run the sweep (README).
set -uo pipefail
OUT=${OUT:-/tmp/out}
GPU_SITE=${GPU_SITE:-/tmp/site}
GPU_STAGE=${GPU_STAGE:-/tmp/stage}
GPU_CARRY=${GPU_CARRY:-.gpu}
PY=${PY:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT" "$GPU_STAGE" "$GPU_SITE"
export PYTHONPATH=$GPU_SITE:$(pwd)${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
# GPU_PIP_FLAGS: extra pip flags, e.g. --platform tags when rehearsing on an older-glibc workstation
pipq() { "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir ${GPU_PIP_FLAGS:-} "$@" 2>&1 | grep -vi "warning"; return "${PIPESTATUS[0]}"; }

stage_info() {
  nvidia-smi -L; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv,noheader
  "$PY" --version; ldd --version | head -1; nproc; free -g | head -2; df -h /tmp | tail -1
  for t in python python3 torchrun make nvcc gcc; do printf '%-9s %s\n' "$t" "$(command -v $t || echo MISSING)"; done
  nvcc --version 2>/dev/null | tail -1
  "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpu', torch.cuda.get_device_name(0))"
  # the image's own packages, for pinning what is carried (/tmp/site is kept out of this listing)
  PYTHONPATH= "$PY" -m pip freeze 2>/dev/null > "$OUT/image_freeze.txt"; echo "image: $(wc -l < "$OUT/image_freeze.txt") packages -> \$OUT/image_freeze.txt"
  PYTHONPATH= "$PY" -m pip list 2>/dev/null | grep -iE "^(nvidia-cublas|nvidia-cudnn-cu13|nvidia-nccl-cu13|numpy|scipy|matplotlib|rich|filelock|pyyaml|typer|click|transformers|typing.extensions|setuptools|wheel) " | tr -s ' '
  "$PY" - <<'EOF'
import ctypes, glob, os, nvidia
libs = [p for r in nvidia.__path__ for p in glob.glob(os.path.join(r, "*", "lib", "libcublasLt.so.*"))]
for p in libs:
    lib = ctypes.CDLL(p)
    # TE >= 2.13 (cu13) needs this symbol; torch 2.11's cuBLAS 13.1 lacks it (README gotcha 1)
    print(p.split("nvidia/")[-1], "cublasLtGroupedMatrixLayoutInit_internal:",
          hasattr(lib, "cublasLtGroupedMatrixLayoutInit_internal"), "cublasLtGetVersion:", lib.cublasLtGetVersion())
EOF
  return 0  # facts only: never stops the stages after it
}

stage_matmul() {
  "$PY" "$HERE/matmul_ceiling.py" --sizes "${MATMUL_SIZES:-8192}" --iters 20 --warmup 5 --out "$OUT/matmul.json"
}

stage_recv() {
  local n=0 f
  for f in "$GPU_CARRY"/c*/bundle.part.*; do
    [ -e "$f" ] || continue
    cp "$f" "$GPU_STAGE/" && n=$((n + 1))
    cp "$(dirname "$f")/bundle.sha256" "$(dirname "$f")/bundle.parts" "$GPU_STAGE/"
  done
  [ "$n" -gt 0 ] || { echo "recv: no $GPU_CARRY/c*/bundle.part.* here: name a .gpu/cK folder in carry"; return 1; }
  echo "recv: $n part(s); have $(ls "$GPU_STAGE"/bundle.part.* | wc -l) of $(cat "$GPU_STAGE/bundle.parts")"
}

stage_assemble() {
  [ -f "$GPU_STAGE/bundle.parts" ] || { echo "assemble: nothing received (stage recv first)"; return 1; }
  local want have k
  want=$(cat "$GPU_STAGE/bundle.parts")
  for k in $(seq 0 $((want - 1))); do
    [ -f "$GPU_STAGE/bundle.part.$(printf %02d "$k")" ] || { echo "assemble: part .gpu/c$((k + 1)) is missing (machine went cold between calls?)"; return 1; }
  done
  have=$(ls "$GPU_STAGE"/bundle.part.* | wc -l)
  [ "$have" -eq "$want" ] || { echo "assemble: $have parts here, bundle.parts says $want (stale parts? re-run prepare)"; return 1; }
  cat "$GPU_STAGE"/bundle.part.* > "$GPU_STAGE/bundle.tar"
  (cd "$GPU_STAGE" && sha256sum -c bundle.sha256) || return 1
  rm -rf "$GPU_STAGE/bundle" && mkdir -p "$GPU_STAGE/bundle"
  tar -C "$GPU_STAGE/bundle" -xf "$GPU_STAGE/bundle.tar" && rm -f "$GPU_STAGE/bundle.tar" "$GPU_STAGE"/bundle.part.*
  echo "assemble: $(ls "$GPU_STAGE/bundle/wheels" | wc -l) wheels; te: $(ls "$GPU_STAGE/bundle/te" | tr '\n' ' ')"
}

stage_install() {
  local B=$GPU_STAGE/bundle
  [ -d "$B/wheels" ] || { echo "install: no $B/wheels (stage assemble first)"; return 1; }
  pipq --upgrade --target "$GPU_SITE" "$B"/wheels/*.whl || return 1
  # TE's core, meta (and a prebuilt torch-extension wheel, if one was made) in ONE install into a scratch
  # folder, copied over: a second `pip --target --upgrade` would replace the whole transformer_engine/ folder.
  rm -rf /tmp/site_te
  pipq --target /tmp/site_te "$B"/te/*.whl || return 1
  cp -r /tmp/site_te/. "$GPU_SITE/" && rm -rf /tmp/site_te
  # The megatron-core wheel ships datasets/helpers_cpp*.so prebuilt but no Makefile, and Bridge's
  # initialize_megatron still runs `make -C .../megatron/core/datasets` (exit 1 -> SystemExit). A no-op
  # Makefile makes that step pass where `make` exists. The payload must not rely on this shim.
  local D=$GPU_SITE/megatron/core/datasets
  if [ ! -f "$D/Makefile" ] && ls "$D"/helpers_cpp*.so >/dev/null 2>&1; then
    printf '# no-op: helpers_cpp is prebuilt in the wheel (scripts/gpu/device_stage.sh)\nall:\n\t@true\n' > "$D/Makefile"
  fi
  # pip installs here with --no-compile (quicker to unpack); compile the bytecode now, as a normal pip install
  # would, on every core: the image sets no bytecode cache of its own for these files, so without it every
  # process compiled NeMo-Run, Hydra and the rest from source again (about 0.5 s of a plan, seconds of a sweep)
  "$PY" -m compileall -q -j 0 "$GPU_SITE" >/dev/null 2>&1 || true
  "$PY" -m compileall -q -j 0 contracts experiments launchers analysis >/dev/null 2>&1 || true
  echo "install: $(ls "$GPU_SITE" | grep -c dist-info) distributions in $GPU_SITE"
}

stage_build_ext() {
  # the extension links against libtorch: import torch first, or the check always fails and the build reruns
  if "$PY" -c "import torch, transformer_engine_torch" 2>/dev/null && [ "${FORCE_BUILD_EXT:-0}" != 1 ]; then
    echo "build_ext: transformer_engine_torch already importable (prebuilt wheel); FORCE_BUILD_EXT=1 rebuilds"; return 0
  fi
  local src
  src=$(ls "$GPU_STAGE"/bundle/te/transformer_engine_torch-*.tar.gz 2>/dev/null | head -1)
  [ -n "$src" ] || { echo "build_ext: no transformer_engine_torch sdist in the bundle"; return 1; }
  rm -rf /tmp/tebuild /tmp/tewheel && mkdir -p /tmp/tebuild && tar -C /tmp/tebuild -xzf "$src"
  local NV
  NV=$("$PY" -c "import nvidia; print(list(nvidia.__path__)[0])")
  # cudnn.h, nccl.h, cusparse.h come from torch's nvidia-* wheels, crt/host_defines.h from the toolkit;
  # NVTE_PYTORCH_FORCE_BUILD stops setup.py from trying to download a prebuilt wheel (no network here)
  (cd /tmp/tebuild/transformer_engine_torch-* && \
    CPLUS_INCLUDE_PATH=$(ls -d "$NV"/*/include | paste -sd:) NVTE_PYTORCH_FORCE_BUILD=TRUE \
    MAX_JOBS=$(nproc) CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} \
    "$PY" -m pip wheel -v --no-build-isolation --no-deps --no-index -w /tmp/tewheel . > "$OUT/te_build.log" 2>&1)
  local rc=$?
  tail -3 "$OUT/te_build.log"
  [ $rc -eq 0 ] || { echo "build_ext: build failed rc=$rc (full log: \$OUT/te_build.log)"; return 1; }
  rm -rf /tmp/site_ext
  pipq --target /tmp/site_ext /tmp/tewheel/*.whl && cp -r /tmp/site_ext/. "$GPU_SITE/" && rm -rf /tmp/site_ext
}

import_check() {  # import_check MODULE... : time each import, fail if any fails
  "$PY" - "$@" <<'EOF'
import importlib, sys, time, traceback
bad = []
for m in sys.argv[1:]:
    t = time.time()
    try:
        mod = importlib.import_module(m)
        print(f"OK   {m:40s} {time.time() - t:5.1f}s {getattr(mod, '__version__', '')}", flush=True)
    except Exception as e:  # report every failure, not only the first
        traceback.print_exc()
        print(f"FAIL {m}: {type(e).__name__}: {e}", flush=True)
        bad.append(m)
sys.exit(1 if bad else 0)
EOF
}

deps_imports() {  # the import names of pyproject's runtime deps and gpu extra (scripts/gpu/deps.py)
  "$PY" "$HERE/deps.py" imports
}

stage_imports() {
  # shellcheck disable=SC2046
  import_check $(deps_imports | grep -E '^(megatron|transformer_engine)') transformer_engine.pytorch \
    megatron.bridge.training.pretrain megatron.bridge.training.gpt_step megatron.bridge.models.gpt_provider
}

stage_orch() {
  local mods
  mods=$(find experiments launchers analysis -name '*.py' ! -name '__main__.py' 2>/dev/null \
    | sed -e 's|/__init__\.py$||' -e 's|\.py$||' -e 's|/|.|g' | sort)
  # shellcheck disable=SC2086
  import_check $(deps_imports | grep -vE '^(megatron|transformer_engine|torch$)') torchx fiddle $mods
}

stage_smoke() {
  "$PY" - <<'EOF'
import torch
import transformer_engine.pytorch as te
x = torch.randn(64, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
lin = te.Linear(128, 256, params_dtype=torch.bfloat16).cuda()
y = lin(x)
y.float().sum().backward()
torch.cuda.synchronize()
assert torch.isfinite(y).all() and x.grad is not None and torch.isfinite(x.grad).all()
print("smoke: te.Linear bf16 fwd/bwd OK", tuple(y.shape), torch.cuda.get_device_name(0))
EOF
}

stage_pack() {
  local dirs=${PACK_DIRS:-results}
  # shellcheck disable=SC2086
  tar -czf "$OUT/results.tgz" $dirs || return 1
  ls -la "$OUT/results.tgz"
  [ "$(stat -c %s "$OUT/results.tgz")" -lt $((16 * 1048576)) ] || { echo "pack: over 16 MiB, will not come back: pack less"; return 1; }
}

[ $# -gt 0 ] || { sed -n '2,20p' "$0"; exit 2; }
for stage in "$@"; do
  declare -F "stage_$stage" >/dev/null || { echo "unknown stage '$stage'; valid: info matmul recv assemble install build_ext imports orch smoke pack"; exit 2; }
done
for stage in "$@"; do
  t0=$(date +%s.%N); echo "=== stage $stage ($(date -u +%H:%M:%S))"
  "stage_$stage"; rc=$?
  echo "=== stage $stage rc=$rc took $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f s", b - a }')"
  [ $rc -eq 0 ] || { echo "=== STOP: stage $stage failed"; exit $rc; }
done
