#!/usr/bin/env bash
# GPU-seconds per verdict, ON THE DEVICE after the bring-up (scripts/gpu/README.md), from the repository root of the
# device's copy; two code trees travel beside it (run's carry), so that merges into the checkout do not change what
# is measured:
#   .wt_base  today's code (main at 8bac3ce: repeats=auto with the t test over blocks, payload.train_iters=20)
#   .wt_gpu   this branch (the pooled statistic with the nightly prior, payload.train_iters=auto, caches, teardown)
# Phases (each goes on when an earlier one fails; every sweep's wall time goes to $R/timing.tsv):
#   bash scripts/gpu/verdict_cost.sh today      # A/A of moe_bench_h200 (4 layers, control arm) with today's code,
#                                               #   repeats=auto, max_blocks=3, +-2%; recorded into $R/history.db
#   bash scripts/gpu/verdict_cost.sh seed       # the H200 A/B fixture (tests/e2e/fixtures/h200_blocks/ab_bench)
#                                               #   recorded as an earlier night of the same series
#   bash scripts/gpu/verdict_cost.sh mine       # the same A/A with this branch: train_iters=auto, nightly prior
#   bash scripts/gpu/verdict_cost.sh importtime # python -X importtime of the payload's imports, both trees
#   bash scripts/gpu/verdict_cost.sh pack       # $R (no caches) -> $OUT/verdict_cost.tgz
# Run it from the device copy's root as: ROOT=$PWD bash .wt_gpu/scripts/gpu/verdict_cost.sh PHASE...
set -u
ROOT=${ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$ROOT" || exit 1
# shellcheck disable=SC1091
source scripts/gpu/device_env.sh || exit 1
R=${R:-$ROOT/results/vc}
OUT=${OUT:-/tmp/out}
mkdir -p "$R" "$OUT"
HIST="sqlite:///$R/history.db"
AA=(cluster=local container=mbridge_0_6_h200 poll_s=1 model=moe_bench_h200 model.num_layers=4 model.expert_model_parallel_size=1
    cluster.gpus_per_node=1
    sweep=full dispatcher=alltoall overlap=off delay_wgrad=off control=true repeats=auto max_blocks=3 block_seed=26
    sweep.history=true "history.url=$HIST")
now() { date +%s.%N; }

in_tree() { # tree, name, overrides...: the sweep with that tree's code (its own PYTHONPATH ahead of the checkout)
  local tree=$1 name=$2; shift 2
  local t0 t1 rc
  t0=$(now)
  (cd "$ROOT/$tree" && PYTHONPATH="${GPU_SITE:-/tmp/site}:$ROOT/$tree" python3 -m experiments.sweep "$@" \
     output_dir="$R/$name" > "$R/$name.console.log" 2>&1)
  rc=$?; t1=$(now)
  printf 'sweep\t%s\t%s\t%s\t%s\n' "$name" "$t0" "$t1" "$rc" >> "$R/timing.tsv"
  echo "sweep $name rc=$rc ($(python3 -c "print(f'{$t1-$t0:.1f}')") s)"; tail -4 "$R/$name.console.log"
  python3 - "$R/$name" <<'PYEOF'
import json, sys
try:
    s = json.load(open(sys.argv[1] + "/report/summary.json"))
except OSError as e:
    sys.exit(f"no summary: {e}")
print("GPU_TIME", json.dumps(s.get("gpu_time")))
for c in s["comparisons"]:
    print("VERDICT", c["variant"], c["verdict"], json.dumps(c["speedup"]), json.dumps({k: (c.get("sequential") or {}).get(k) for k in ("design", "look", "blocks", "prior_used", "se", "dof")}))
for r in s["runs"]:
    print("RUN", r["name"], r["status"], (r.get("step_time_ms") or {}).get("median"), json.dumps(r.get("fixed_cost")))
PYEOF
}

for phase in "$@"; do
  case $phase in
  today) in_tree .wt_base today "${AA[@]}" payload.train_iters=20 ;;
  seed)
    rm -rf "$R/h200_ab_bench" && cp -r "$ROOT/.wt_gpu/tests/e2e/fixtures/h200_blocks/ab_bench" "$R/h200_ab_bench"
    (cd "$ROOT/.wt_gpu" && PYTHONPATH="${GPU_SITE:-/tmp/site}:$ROOT/.wt_gpu" python3 -m analysis.report \
       "$R/h200_ab_bench" --quiet && PYTHONPATH="${GPU_SITE:-/tmp/site}:$ROOT/.wt_gpu" python3 -m analysis.history \
       record "$R/h200_ab_bench" --url "$HIST"); echo "seed rc=$?"
    ;;
  mine|mine2) in_tree .wt_gpu "$phase" "${AA[@]}" payload.train_iters=auto payload.max_iters=20 ;;
  importtime)
    for tree in .wt_base .wt_gpu; do
      (cd "$ROOT/$tree" && PYTHONPATH="${GPU_SITE:-/tmp/site}:$ROOT/$tree" python3 -X importtime -c \
         "from experiments.payload.bridge_api import load_bridge; load_bridge(None)" 2> "$R/importtime${tree}.txt")
      echo "== $tree: $(tail -1 "$R/importtime${tree}.txt")"
      sort -t'|' -k2 -n -r "$R/importtime${tree}.txt" | head -12
    done
    ;;
  pack)
    tar -czf "$OUT/verdict_cost.tgz" --exclude='*/cache/*' -C "$(dirname "$R")" "$(basename "$R")" \
      && ls -la "$OUT/verdict_cost.tgz"
    ;;
  *) echo "unknown phase $phase (today, seed, mine, mine2, importtime, pack)"; exit 2 ;;
  esac
done
