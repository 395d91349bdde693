#!/usr/bin/env bash
# The GPU budget's runs (the default job, the benchmark model, the overhead against direct runs), ON THE DEVICE
# after the bring-up (scripts/gpu/sequence.sh prints the whole call sequence):
#   bash scripts/gpu/h200_overhead.sh default          # the main job with NO overrides (1 GPU: EP=1, overlap pruned)
#   bash scripts/gpu/h200_overhead.sh bench NAME OVR.. # model=moe_bench_h200 through the sweep, profile=true,
#                                                     # 20 iterations, nvidia-smi dmon sampled in the background
#   bash scripts/gpu/h200_overhead.sh triples K.. -- OVR..   # per k: sweep run, direct payload, direct Bridge pretrain
#                                                     # of the same variant.json (overhead limits; interleaved)
#   SKIP_BRIDGE=1 bash scripts/gpu/h200_overhead.sh triples K.. -- OVR..  # pairs: sweep and direct payload only
#   bash scripts/gpu/h200_overhead.sh pack             # $R without raw traces -> $OUT/results16.tgz
# Every step records "kind name t0 t1 rc" in $R/timing.tsv and goes on when an earlier one fails.
set -u
cd "$(dirname "$0")/../.."
# shellcheck disable=SC1091
source scripts/gpu/device_env.sh || exit 1
R=${R:-results/r16}  # under the git-ignored results/: the device keeps it between calls while warm
OUT=${OUT:-/tmp/out}
mkdir -p "$R" "$OUT"
now() { date +%s.%N; }
record() { printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" >> "$R/timing.tsv"; }
secs() { python3 -c "print(f'{$2-$1:.1f}')"; }
BENCH=(cluster=local model=moe_bench_h200 sweep=full dispatcher=alltoall overlap=off delay_wgrad=off
       payload.train_iters=20)

brief() {  # one line per run of a sweep folder: status, step ms, TFLOP/s/GPU, breakdown
  python3 - "$1" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1] + "/report/summary.json"))
for r in s["runs"]:
    st, tf = r.get("step_time_ms") or {}, r.get("tflops_per_gpu") or {}
    print("RUN", r["name"], r["status"], r.get("reason"), "step_ms", st.get("median"), "tflops", tf.get("median"),
          "breakdown", json.dumps(r.get("step_breakdown_ms")), "hidden", r.get("hidden_comm_fraction"))
EOF
}

dmon_start() { nvidia-smi dmon -s u -d 1 > "$1" 2>&1 & DMON=$!; }
dmon_stop() { kill "$DMON" 2>/dev/null; wait "$DMON" 2>/dev/null; }
sm_busy() {  # median SM% over samples >= 50% (the steady steps; start-up and teardown read low)
  awk '$1 ~ /^[0-9]+$/ && $2+0 >= 50 { print $2 }' "$1" | sort -n | awk '{ a[NR] = $1 } END {
    if (NR) printf "SM busy median %s%% (p10 %s%%, %d samples >= 50%%)\n", a[int((NR + 1) / 2)], a[int(NR / 10) + 1], NR;
    else print "SM busy: no sample >= 50%" }'
}

phase=${1:-}; shift || true
case $phase in
default)
  t0=$(now); python3 -m experiments.sweep > "$R/default.console.log" 2>&1; rc=$?; t1=$(now)
  record sweep default "$t0" "$t1" "$rc"
  echo "default (no overrides) rc=$rc in $(secs "$t0" "$t1") s"; grep -E "EP|pruned|container|mode|exit code|->" "$R/default.console.log" | head -20
  d=$(ls -dt results/isolation/*/ 2>/dev/null | head -1); [ -n "$d" ] && cp -r "$d" "$R/default_sweep" && brief "$R/default_sweep"
  ;;
bench)
  name=$1; shift
  dmon_start "$R/$name.dmon"
  t0=$(now); python3 -m experiments.sweep "${BENCH[@]}" profile=true output_dir="$R/$name" "$@" > "$R/$name.console.log" 2>&1
  rc=$?; t1=$(now); dmon_stop
  record sweep "$name" "$t0" "$t1" "$rc"
  echo "bench $name rc=$rc in $(secs "$t0" "$t1") s"; tail -4 "$R/$name.console.log"
  for a in "$R/$name"/variants/*/attempt-1; do python3 -m analysis.profile_breakdown "$a" | head -40; done
  [ -f "$R/$name/report/summary.json" ] && brief "$R/$name"; sm_busy "$R/$name.dmon"
  ;;
triples)
  ks=(); while [ $# -gt 0 ] && [ "$1" != -- ]; do ks+=("$1"); shift; done; [ "${1:-}" = -- ] && shift
  for k in "${ks[@]}"; do
    t0=$(now); python3 -m experiments.sweep "${BENCH[@]}" output_dir="$R/tri_sweep_$k" "$@" > "$R/tri_sweep_$k.console.log" 2>&1
    rc=$?; t1=$(now); record sweep "tri_sweep_$k" "$t0" "$t1" "$rc"; echo "tri sweep $k rc=$rc $(secs "$t0" "$t1") s"
    vj=$R/tri_sweep_$k/variants/a2a.ovl0.dw0/variant.json
    [ -f "$vj" ] || { echo "no $vj"; continue; }
    # the same environment the sweep's LocalExecutor gives the job (conf/cluster/local.yaml env_vars)
    export CUDA_DEVICE_MAX_CONNECTIONS=32 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
    t0=$(now); torchrun --nproc-per-node=1 -m experiments.train "$vj" "$R/tri_payload_$k" --attempt 1 --mode train \
      > "$R/tri_payload_$k.log" 2>&1; rc=$?; t1=$(now); record payload "tri_payload_$k" "$t0" "$t1" "$rc"
    echo "tri payload $k rc=$rc $(secs "$t0" "$t1") s"
    [ "${SKIP_BRIDGE:-0}" = 1 ] && continue
    t0=$(now); torchrun --nproc-per-node=1 scripts/gpu/direct_pretrain.py "$vj" "$R/tri_bridge_$k" \
      > "$R/tri_bridge_$k.log" 2>&1; rc=$?; t1=$(now); record bridge "tri_bridge_$k" "$t0" "$t1" "$rc"
    echo "tri bridge $k rc=$rc $(secs "$t0" "$t1") s"; tail -2 "$R/tri_bridge_$k.log"
  done
  python3 scripts/gpu/overhead_table.py "$R"
  ;;
pack)
  tar --exclude='*.json.gz' --exclude='*.pt.trace.json' --exclude='tb' -czf "$OUT/results16.tgz" "$R" \
    && ls -la "$OUT/results16.tgz"
  # one raw trace (the smallest) for a local re-analysis, when it fits what comes back
  t=$(find "$R" -name 'rank-0.json.gz' -size -15M 2>/dev/null | head -1); [ -n "$t" ] && cp "$t" "$OUT/trace_rank0.json.gz"
  ;;
*) echo "unknown phase '$phase' (default, bench NAME ..., triples K.. -- OVR.., pack)"; exit 2 ;;
esac
