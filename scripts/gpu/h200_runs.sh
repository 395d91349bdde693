#!/usr/bin/env bash
# Sweeps of the GPU path, run ON THE DEVICE after the bring-up (scripts/gpu/README.md), from the repository root:
#   bash scripts/gpu/h200_runs.sh train          # tiny_moe through the sweep (LocalExecutor + torchrun, 1 GPU):
#                                                #   the isolation sweep at EP=1 (baseline trains, overlap pruned)
#                                                #   and the overlap arm forced through with preflight=off
#   bash scripts/gpu/h200_runs.sh overhead 1 2   # qwen3_moe_1b: sweep run k, then a direct torchrun of the same
#                                                #   payload and variant.json (interleaved, for k in the arguments)
#   bash scripts/gpu/h200_runs.sh ep2            # 2-GPU machine: the isolation sweep of qwen3_moe_1b at
#                                                #   EP=2 over both GPUs (alltoall arms; flex pruned: no DeepEP)
#   bash scripts/gpu/h200_runs.sh aa             # A/A with the control arm (qwen3_moe_1b, 1 GPU):
#                                                #   baseline + a2a.ovl0.dw0.ctl, repeats=auto up to 3 blocks
#   bash scripts/gpu/h200_runs.sh ab             # A/B at EP=1: alltoall against allgather,
#                                                #   3 interleaved blocks (6 runs of ~75 s fit one 600 s call)
#   bash scripts/gpu/h200_runs.sh ab_bench       # the same A/B on moe_bench_h200 (4 layers, compute-bound),
#                                                #   repeats=auto up to 3 blocks
#   bash scripts/gpu/h200_runs.sh aa_bench       # A/A on moe_bench_h200 (4 layers, 20 iterations) with the control
#                                                #   arm, 2 interleaved blocks: the GPU time split of each run
#                                                #   (summary.json gpu_time, runs[].fixed_cost)
#   bash scripts/gpu/h200_runs.sh importtime     # python -X importtime of the payload's training imports
#                                                #   -> $R/importtime.txt (the 25 slowest modules printed)
#   bash scripts/gpu/h200_runs.sh pack           # $R (results/gpu) -> $OUT/results_gpu.tgz
# Every step goes on when an earlier one fails (each records its exit code in $R/timing.tsv).
set -u
cd "$(dirname "$0")/../.."
# shellcheck disable=SC1091
source scripts/gpu/device_env.sh || exit 1
R=${R:-results/gpu}  # under the git-ignored results/: the device keeps it between calls while warm
OUT=${OUT:-/tmp/out}
mkdir -p "$R" "$OUT"
PY=python3
COMMON=(cluster=local container=mbridge_0_6_h200 poll_s=1)
now() { date +%s.%N; }
record() { printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" >> "$R/timing.tsv"; }  # what k start end rc

run_sweep() { # name, overrides...
  local name=$1; shift
  local t0 t1 rc
  t0=$(now)
  $PY -m experiments.sweep "${COMMON[@]}" "$@" output_dir="$R/$name" > "$R/$name.console.log" 2>&1
  rc=$?; t1=$(now)
  record sweep "$name" "$t0" "$t1" "$rc"
  echo "sweep $name rc=$rc ($(python3 -c "print(f'{$t1-$t0:.1f}')") s)"; tail -5 "$R/$name.console.log"
}

for phase in "$@"; do
  case $phase in
  train)
    # one GPU, also on a 2-GPU machine (cluster.gpus_per_node=1: torchrun with one process)
    run_sweep tiny_isolation model=tiny_moe model.expert_model_parallel_size=1 cluster.gpus_per_node=1
    run_sweep tiny_forced model=tiny_moe model.expert_model_parallel_size=1 cluster.gpus_per_node=1 \
      preflight=off sweep=full dispatcher=alltoall overlap=on delay_wgrad=off
    ;;
  ep2)
    run_sweep ep2_isolation model=qwen3_moe_1b model.expert_model_parallel_size=2 cluster.gpus_per_node=2 \
      sweep=isolation
    ;;
  aa)
    run_sweep aa_control model=qwen3_moe_1b cluster.gpus_per_node=1 sweep=full dispatcher=alltoall overlap=off \
      delay_wgrad=off control=true repeats=auto max_blocks=3 block_seed=15 payload.train_iters=15
    ;;
  ab)
    run_sweep ab_dispatcher model=qwen3_moe_1b cluster.gpus_per_node=1 sweep=full dispatcher=alltoall,allgather \
      overlap=off delay_wgrad=off repeats=3 block_seed=15 payload.train_iters=15
    ;;
  ab_bench)
    # the compute-bound benchmark model (0.5% spread between runs; qwen3_moe_1b drifts by ~28%) at EP=1, 4 layers,
    # alltoall against allgather, repeats=auto up to 3 blocks (at most 6 runs of ~75 s: one 600 s call)
    run_sweep ab_bench model=moe_bench_h200 model.num_layers=4 cluster.gpus_per_node=1 sweep=full \
      dispatcher=alltoall,allgather overlap=off delay_wgrad=off repeats=auto max_blocks=3 block_seed=16 \
      payload.train_iters=15
    ;;
  aa_bench)
    run_sweep aa_bench model=moe_bench_h200 model.num_layers=4 cluster.gpus_per_node=1 sweep=full \
      dispatcher=alltoall overlap=off delay_wgrad=off control=true repeats=2 block_seed=26 payload.train_iters=20
    $PY - "$R/aa_bench" <<'PYEOF'
import json, sys
s = json.load(open(sys.argv[1] + "/report/summary.json"))
print("GPU_TIME", json.dumps(s.get("gpu_time")))
for r in s["runs"]:
    print("RUN", r["name"], r["status"], (r.get("step_time_ms") or {}).get("median"), json.dumps(r.get("fixed_cost")))
PYEOF
    ;;
  importtime)
    $PY -X importtime -c "from experiments.payload.bridge_api import load_bridge; load_bridge(None)" \
      2> "$R/importtime.txt"
    sort -t'|' -k2 -n -r "$R/importtime.txt" | head -25
    ;;
  overhead)
    shift_done=1
    ;;
  pack)
    tar -czf "$OUT/results_gpu.tgz" "$R" && ls -la "$OUT/results_gpu.tgz"
    ;;
  [0-9]*)
    k=$phase
    run_sweep "mid_sweep_$k" model=qwen3_moe_1b sweep=full dispatcher=alltoall overlap=off delay_wgrad=off
    vj=$(ls "$R"/mid_sweep_*/variants/a2a.ovl0.dw0/variant.json 2>/dev/null | head -1)
    if [ -n "$vj" ]; then
      d="$R/mid_direct_$k"; mkdir -p "$d"
      t0=$(now)
      # the same environment the sweep's LocalExecutor gives the job (conf/cluster/local.yaml env_vars)
      CUDA_DEVICE_MAX_CONNECTIONS=32 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True \
        torchrun --nproc-per-node=1 -m experiments.train "$vj" "$d/out" --attempt 1 --mode train \
        > "$d/direct_$k.log" 2>&1
      rc=$?; t1=$(now)
      record direct "mid_direct_$k" "$t0" "$t1" "$rc"
      echo "direct $k rc=$rc"; tail -3 "$d/direct_$k.log"
    fi
    ;;
  *) echo "unknown phase $phase (train, ep2, aa, ab, ab_bench, overhead K..., pack)"; exit 2 ;;
  esac
done
: "${shift_done:=0}"
