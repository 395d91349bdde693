# Source ON THE DEVICE, from the repository root, after the bring-up stages (scripts/gpu/README.md):
#   source scripts/gpu/device_env.sh && python -m experiments.sweep cluster=local model=tiny_moe ...
# Puts the carried packages ($GPU_SITE, default /tmp/site) and the repository ahead of the image's, so that the
# sweep, NeMo-Run's LocalExecutor and the torchrun payload it starts all see them (child processes inherit it).
# Returns 1 when the bring-up is gone: the machine was given back (30 s idle) and a fresh one is bare.
GPU_SITE=${GPU_SITE:-/tmp/site}
if [ ! -d "$GPU_SITE/megatron/bridge" ] || [ ! -d "$GPU_SITE/nemo_run" ]; then
  echo "device_env: no bring-up in $GPU_SITE (fresh machine?): repeat the bring-up calls in scripts/gpu/README.md" >&2
  return 1 2>/dev/null || exit 1
fi
export PYTHONPATH=$GPU_SITE:$(pwd)${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
# nothing outside the machine can be reached: never let a library wait on a hub
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
# NVLink multicast stays off on these machines (device KINDS.md); harmless on one GPU
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
