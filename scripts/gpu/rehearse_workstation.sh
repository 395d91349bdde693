#!/usr/bin/env bash
# Rehearse the device install here, at no device time: a scratch Python 3.12 venv that holds only packages the
# device image has (device KINDS.md list; the versions that list gives are pinned, the rest are PyPI's current ones,
# so this approximates the image), torch borrowed from .venv by symlinks, then the real bundle from .gpu/c*/ through
# device_stage.sh recv assemble install orch into $GPU_SITE. TE is removed again afterwards (it loads only on a GPU
# machine): `build_ext`, `imports` and `smoke` need the device. Afterwards, to run the orchestrator against exactly
# the carried packages:
#   export GPU_SITE=/tmp/gpu-rehearse/site; source scripts/gpu/device_env.sh
#   PATH=/tmp/gpu-rehearse/venv/bin:$PATH python -m experiments.sweep cluster=local model=tiny_moe ...
# (no GPU here, so the local profile runs in validate mode). Usage: bash scripts/gpu/rehearse_workstation.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
R=${REHEARSE_DIR:-/tmp/gpu-rehearse}
PY312=${PY312:-python3.12}
V=$R/venv
S=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
ls .gpu/c1/bundle.part.* >/dev/null 2>&1 || { echo "no .gpu/c1: run scripts/gpu/prepare_workstation.sh first"; exit 1; }
quiet() { "$@" 2> >(grep -v -e "is ignored: it is neither" -e "Running pip as the 'root' user" >&2); }

if [ ! -x "$V/bin/python" ]; then
  "$PY312" -m venv "$V"
  # what the orchestrator path touches on the image (pins: versions read on the device, KINDS.md / first bring-up)
  quiet "$V/bin/pip" install -q --no-deps typer==0.27.2 typing-extensions==4.16.0 huggingface-hub==1.33.0 \
    transformers==5.17.0 numpy==2.5.2 absl-py annotated-doc anyio certifi click cloudpickle filelock h11 httpcore \
    httpx idna jinja2 markdown-it-py markupsafe mdurl mypy-extensions networkx packaging pillow \
    prometheus-client pygments pyre-extensions pyyaml requests rich shellingham tqdm typing-inspect urllib3 \
    scipy matplotlib contourpy cycler fonttools kiwisolver pyparsing python-dateutil six psutil protobuf wheel \
    attrs regex safetensors tokenizers einops zipp charset-normalizer
  # torch and its CUDA wheels come from .venv (the image has torch 2.11; .venv's is newer, fine for imports)
  mkdir -p "$R/torch"
  for d in "$S"/torch "$S"/torch-*.dist-info "$S"/torchgen "$S"/functorch "$S"/nvidia "$S"/cuda "$S"/cuda_* \
           "$S"/triton "$S"/triton-*.dist-info "$S"/sympy "$S"/mpmath "$S"/fsspec "$S"/setuptools "$S"/_distutils_hack; do
    [ -e "$d" ] && ln -sfn "$d" "$R/torch/"
  done
  echo "$R/torch" > "$("$V/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/zz_torch.pth"
  printf '#!%s\nimport sys\nfrom torch.distributed.run import main\nsys.exit(main())\n' "$V/bin/python" > "$V/bin/torchrun"
  chmod +x "$V/bin/torchrun"
fi

# this machine's glibc may be older than the device's 2.39: let pip accept the wheels' manylinux tags
FLAGS="--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux2014_x86_64"
for n in 17 24 27 28 31 34 35 36 37 38 39; do FLAGS="$FLAGS --platform manylinux_2_${n}_x86_64"; done
rm -rf "$R/site" "$R/stage"
# one recv per carried folder, as on the device, then the rest in one go
for c in .gpu/c*/; do
  rm -rf "$R/carry" && mkdir -p "$R/carry" && cp -r "$c" "$R/carry/"
  OUT=$R/out GPU_STAGE=$R/stage GPU_SITE=$R/site GPU_CARRY=$R/carry PY=$V/bin/python \
    bash scripts/gpu/device_stage.sh recv
done
rm -rf "$R/carry"
OUT=$R/out GPU_STAGE=$R/stage GPU_SITE=$R/site PY=$V/bin/python GPU_PIP_FLAGS="$FLAGS" PATH="$V/bin:$PATH" \
  bash scripts/gpu/device_stage.sh assemble install orch
# TE's core library needs a GPU machine's cuDNN/driver and raises RuntimeError (not ImportError) at import here,
# which megatron.core does not catch: drop it so that validate mode runs here as in CI (TE is the device's part)
rm -rf "$R"/site/transformer_engine "$R"/site/transformer_engine-* "$R"/site/transformer_engine_cu13*
echo "rehearsal OK: export GPU_SITE=$R/site; source scripts/gpu/device_env.sh; PATH=$V/bin:\$PATH python -m experiments.sweep ..."
