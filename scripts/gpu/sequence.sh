#!/usr/bin/env bash
# Print the whole device sequence, in order, as the `run` calls to make back to back (a call more than 30 s after the last gets a bare machine): the bring-up
# (one call per carried part .gpu/cK, the last one installing and checking everything) and then the runs.
# It reads how many parts scripts/gpu/prepare_workstation.sh made; run that first (PART_MIB=62 makes 4 parts when
# the working tree is small). Usage: bash scripts/gpu/sequence.sh [bringup|runs|all]   (default all)
set -euo pipefail
cd "$(dirname "$0")/../.."
what=${1:-all}
n=$(ls -d .gpu/c[0-9]* 2>/dev/null | wc -l)
[ "$n" -gt 0 ] || { echo "no .gpu/cK parts: run bash scripts/gpu/prepare_workstation.sh first" >&2; exit 1; }
call() { printf 'run(carry=[%s], timeout_s=%s, command="%s")\n' "$1" "$2" "$3"; }
if [ "$what" != runs ]; then
  echo "# status() first: the bring-up needs about 5 device minutes; the machine goes back 30 s after each call"
  for k in $(seq 1 "$n"); do
    stages="recv"; t=120
    [ "$k" = 1 ] && { stages="info matmul recv"; t=300; }
    [ "$k" = "$n" ] && { stages="$stages assemble install build_ext imports orch smoke"; t=600; }
    call "\".gpu/c$k\"" $t "bash scripts/gpu/device_stage.sh $stages 2>&1 | tee \$OUT/bringup$k.log"
  done
fi
if [ "$what" != bringup ]; then
  echo "# runs (no carry: the tree travels and results/ (git-ignored) stays while the machine is warm; a folder that is neither tracked nor ignored is removed by the next call)"
  call "" 600 "set -o pipefail; (bash scripts/gpu/h200_overhead.sh default; bash scripts/gpu/h200_overhead.sh bench b1; bash scripts/gpu/h200_overhead.sh pack) 2>&1 | tee \$OUT/runs1.log"
  call "" 600 "set -o pipefail; (bash scripts/gpu/h200_overhead.sh triples 1 2 -- model.num_layers=4; bash scripts/gpu/h200_overhead.sh pack) 2>&1 | tee \$OUT/runs2.log"
  call "" 600 "set -o pipefail; (bash scripts/gpu/h200_overhead.sh triples 3 -- model.num_layers=4; bash scripts/gpu/h200_overhead.sh pack) 2>&1 | tee \$OUT/runs3.log"
  echo "give_back()"
fi
