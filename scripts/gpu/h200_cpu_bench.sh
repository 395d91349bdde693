#!/usr/bin/env bash
# The CPU benchmarks on a GPU host, pinned to 2 cores (a small workstation's count) and with no GPU visible, so
# that the default main job validates on the CPU as it does on a CPU-only machine. A quiet host gives steadier
# figures than a shared workstation; every figure is still a ratio against the baseline tree in the same run.
#
#   bash scripts/gpu/h200_cpu_bench.sh BASE_TREE main plan parse report
#
# BASE_TREE: a folder holding the baseline revision's tree (git archive REV | tar -x -C results/base_REV; carried,
# the device machine has no .git). Needs the bundle installed (device_stage.sh recv assemble install). Output in $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}
GPU_SITE=${GPU_SITE:-/tmp/site}
CORES=${CORES:-0,1}
PY=${PY:-python3}
export PYTHONPATH=$GPU_SITE:$(pwd)${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
export CUDA_VISIBLE_DEVICES=  # no GPU: the main job validates on the CPU
BASE=${1:?usage: h200_cpu_bench.sh BASE_TREE main|plan|parse|report ...}
shift
mkdir -p "$OUT"
pin() { taskset -c "$CORES" "$@"; }
echo "host: $(nproc) CPUs, pinned to $CORES; load $(cut -d' ' -f1-3 /proc/loadavg); $($PY --version)"
for what in "$@"; do
  echo "== $what $(date -u +%H:%M:%S)"
  case $what in
    main) pin "$PY" benchmarks/main_job.py --repeats 5 --against "$BASE" ;;
    plan) pin "$PY" benchmarks/plan.py --repeat 3 --against "$BASE" ;;
    parse) pin "$PY" benchmarks/parse.py --mb 10,100,1024,3072 --logs typical --repeats 3 --against "$BASE" ;;
    report) pin "$PY" benchmarks/report.py --repeats 3 --against "$BASE" ;;
    *) echo "unknown benchmark $what (main, plan, parse, report)"; exit 2 ;;
  esac 2>&1 | tee "$OUT/bench_$what.txt"
done
