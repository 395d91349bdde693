#!/usr/bin/env bash
# Workstation half of the H200 bring-up (scripts/gpu/README.md has the whole sequence).
#
# Downloads everything the H200 device image lacks into the git-ignored folder .gpu/, then packs it into
# carry-sized folders .gpu/c1 .. .gpu/cN (one per device `run` call; the device tool carries at most 64 MiB
# per call, the working tree included). Nothing here needs a GPU; run it from any directory.
#   .gpu/dl/whl/   wheels: Megatron-Core 0.19.2, Megatron-Bridge 0.6.2 and the imports they need that the
#                  device image lacks; Hydra, OmegaConf, NeMo-Run 0.11.1 (+ leptonai 0.27.3, torchx, fiddle,
#                  fabric/paramiko ...) and SQLAlchemy for `python -m experiments.sweep` on the device
#   .gpu/dl/te/    Transformer Engine 2.12.0: cu13 core wheel (181 MiB), meta wheel, transformer_engine_torch
#                  sdist (built on the device: stage build_ext), or a prebuilt extension wheel (SKIP_EXT_BUILD=0)
#   .gpu/cK/       bundle.part.NN (consecutive byte ranges of one tar of the above) + bundle.sha256 + bundle.parts
#                  (made by scripts/gpu/pack_bundle.sh)
#
# Knobs (environment):
#   PART_MIB=56       largest carried part; 64 MiB minus this is left for the working tree that travels too
#   SKIP_EXT_BUILD=1  1: ship the sdist only (device builds it in ~80 s); 0: build the extension here against
#                     torch 2.11.0 cu130 (~10 min on 2 cores; needs PY312, VENV, CUDA_HOME as below)
#   PY312=python3.12  VENV=/tmp/te-build-venv  CUDA_HOME=/usr/local/cuda   (only for SKIP_EXT_BUILD=0)
#   SDIST_PYTHON=.venv/bin/python   a Python with torch importable: the sdist's metadata step imports torch
# Pins and why: scripts/gpu/README.md ("What is carried"). Every install is --no-deps, so each needed
# dependency is named here, exactly one version each (checked below).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
# Versions come from pyproject.toml (scripts/gpu/deps.py): the `gpu` extra for Megatron and TE, the runtime
# dependencies for the orchestrator and analysis (a range there is resolved to the version .venv holds).
DEPS="${DEPS_PYTHON:-.venv/bin/python} scripts/gpu/deps.py"
TE_VER=$($DEPS version transformer-engine)   # 2.12.0: TE >= 2.13 cu13 needs a cuBLAS symbol torch 2.11 lacks
GPU_PINS=$($DEPS gpu | grep -v '^transformer-engine==')   # megatron-core, megatron-bridge
CARRY_PINS=$($DEPS carry)   # runtime deps the device image lacks (hydra, nemo-run, sqlalchemy, google-re2, ...)
PART_MIB=${PART_MIB:-56}
G=.gpu
mkdir -p $G/dl/whl $G/dl/te
t_start=$(date +%s)

PLAT="--python-version 3.12 --implementation cp --platform manylinux2014_x86_64 --platform manylinux1_x86_64"
for n in 17 24 27 28 31 34 35 36 37 38 39; do PLAT="$PLAT --platform manylinux_2_${n}_x86_64"; done
# pip's notices about this machine's own config (absent local indexes, running as root) are noise here
quiet() { "$@" 2> >(grep -v -e "is ignored: it is neither" -e "Running pip as the 'root' user" >&2); }
# shellcheck disable=SC2086
dl() { local dest=$1; shift; quiet python3 -m pip download -q --no-deps --only-binary=:all: $PLAT -d "$dest" "$@"; }

echo "== 1. Megatron wheels and the imports on the pretrain path that the device image lacks"
# Found by importing megatron.bridge.training.{pretrain,gpt_step} in a bare Python 3.12 + torch 2.11 venv
# until nothing was missing.
# shellcheck disable=SC2086
dl $G/dl/whl $GPU_PINS \
  pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 \
  typing-extensions==4.16.0 nvdlfw-inspect==0.2.2 \
  nvidia-resiliency-ext==0.6.0 defusedxml==0.7.1 \
  nvidia-modelopt==0.47.0 pulp==3.3.2 \
  megatron-energon==7.4.1 multi-storage-client==0.51.0 jmespath==1.1.0 jsonschema==4.26.0 \
  referencing==0.37.0 rpds-py==2026.9.1 jsonschema-specifications==2025.9.1 \
  opentelemetry-api==1.45.2 xattr==1.3.0 cffi==2.1.1 pycparser==3.12 wcmatch==12.0.1 \
  bracex==3.2.3 lark==1.3.1 prettytable==3.18.0 pyroute2==0.9.7 deprecation==2.1.0 \
  braceexpand==0.1.7 filetype==1.2.0 mfusepy==3.1.1 rapidyaml==0.15.2 webdataset==1.0.2 \
  datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 diffusers==0.42.1

echo "== 2. Orchestrator wheels: hydra, nemo-run and what 'import nemo_run' + a LocalExecutor torchrun job need"
# Found by --no-deps installs into a scratch Python 3.12 venv holding only packages the device image has
# (/work/.library/device/KINDS.md list), importing nemo_run and running a real LocalExecutor torchrun job
# until nothing was missing. ray (a leptonai requirement) is not imported. rich, filelock, numpy, scipy,
# matplotlib, pyyaml, click, typer, jinja2, httpx, requests, pillow, huggingface-hub are on the image.
# shellcheck disable=SC2086
dl $G/dl/whl $CARRY_PINS \
  catalogue==2.0.10 toml==0.10.2 \
  fiddle==0.3.1 libcst==1.9.0 graphviz==0.21 \
  torchx==0.7.0 docstring-parser==0.18.0 importlib-metadata==10.2.0 lazy-importer==0.1.0 \
  fabric==3.2.3 invoke==2.2.1 decorator==5.3.1 paramiko==5.1.0 cryptography==50.0.2 bcrypt==5.0.0 \
  pynacl==1.6.2 \
  loguru==0.7.3 fastapi==0.163.2 starlette==0.52.1 sniffio==1.3.1 contextlib2==21.6.0 \
  prometheus-fastapi-instrumentator==7.0.0 uvicorn==0.54.0 exceptiongroup==1.3.2 ledoc-ui==0.1.0
# antlr4 (omegaconf/hydra) is published only as an sdist: make a py3 wheel of it
ls $G/dl/whl/antlr4_python3_runtime-4.9.3-*.whl >/dev/null 2>&1 || \
  quiet python3 -m pip wheel -q --no-deps -w $G/dl/whl antlr4-python3-runtime==4.9.3

echo "== 3. Transformer Engine $TE_VER: cu13 core wheel and meta wheel"
dl $G/dl/te transformer_engine_cu13==$TE_VER transformer_engine==$TE_VER

echo "== 4. transformer_engine_torch $TE_VER sdist (its metadata step imports torch and wheel)"
if ! ls $G/dl/te/transformer_engine_torch-$TE_VER.tar.gz >/dev/null 2>&1; then
  SDIST_PYTHON=${SDIST_PYTHON:-.venv/bin/python}
  "$SDIST_PYTHON" -c "import torch" || { echo "SDIST_PYTHON=$SDIST_PYTHON cannot import torch (bash scripts/setup.sh test)"; exit 1; }
  W=$(mktemp -d); quiet python3 -m pip install -q --no-deps --target "$W" wheel
  PYTHONPATH="$W" quiet "$SDIST_PYTHON" -m pip download -q --no-deps --no-binary=:all: --no-build-isolation \
    -d $G/dl/te transformer_engine_torch==$TE_VER
  rm -rf "$W"
fi

if [ "${SKIP_EXT_BUILD:-1}" = 0 ]; then
  echo "== 4b. build transformer_engine_torch $TE_VER here against torch 2.11.0 cu130 (~10 min on 2 cores)"
  PY312=${PY312:-python3.12}; VENV=${VENV:-/tmp/te-build-venv}; CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
  if ! "$VENV/bin/python" -c "import torch, wheel, ninja" 2>/dev/null; then
    "$PY312" -m venv "$VENV" && "$VENV/bin/pip" install -q torch==2.11.0 wheel ninja
  fi
  "$VENV/bin/python" -c "import torch; assert torch.__version__.startswith('2.11.0') and torch.version.cuda.startswith('13.0'), torch.__version__"
  B=$(mktemp -d); tar -C "$B" -xzf $G/dl/te/transformer_engine_torch-$TE_VER.tar.gz
  NV=$("$VENV/bin/python" -c "import nvidia; print(list(nvidia.__path__)[0])")
  # cudnn.h, nccl.h, cusparse.h come from torch's nvidia-* wheels; crt/ headers from the toolkit
  ( cd "$B"/transformer_engine_torch-$TE_VER && \
    PATH="$VENV/bin:$PATH" NVTE_PYTORCH_FORCE_BUILD=TRUE CUDA_HOME="$CUDA_HOME" \
    CPLUS_INCLUDE_PATH=$(ls -d "$NV"/*/include | paste -sd:) MAX_JOBS=$(nproc) \
    "$VENV/bin/pip" wheel -q --no-build-isolation --no-deps -w "$ROOT/$G/dl/te" . )
  rm -rf "$B"
else
  rm -f $G/dl/te/transformer_engine_torch-*.whl   # a stale prebuilt wheel would shadow the device build
fi

echo "== 5. one version of each distribution; every runtime dependency of pyproject is in the bundle"
for pin in $GPU_PINS $CARRY_PINS; do
  n=$(echo "${pin%%==*}" | tr 'A-Z-' 'a-z_')
  ls $G/dl/whl $G/dl/te | tr 'A-Z-' 'a-z_' | grep -qE "^${n}[-_][0-9]" || { echo "missing from the bundle: $pin"; exit 1; }
done
dups=$(ls $G/dl/whl $G/dl/te | grep -E '\.whl$' | sed -E 's/-[0-9].*//' | tr 'A-Z-' 'a-z_' | sort | uniq -d)
[ -z "$dups" ] || { echo "more than one version of: $dups (delete the stale files under $G/dl)"; exit 1; }

echo "== 6. bundle .gpu/dl into carry-sized parts .gpu/c1 .. .gpu/cN"
bash scripts/gpu/pack_bundle.sh $G
echo "done in $(( $(date +%s) - t_start )) s"
