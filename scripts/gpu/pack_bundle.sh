#!/usr/bin/env bash
# Pack GPU_DIR/dl/whl/*.whl and GPU_DIR/dl/te/* into one tar and cut it into equal parts of at most PART_MIB
# MiB, one per device `run` call: GPU_DIR/cK/bundle.part.NN + bundle.sha256 + bundle.parts (the count).
# device_stage.sh's recv/assemble stages put them back together. Called by prepare_workstation.sh; run from the
# repository root (it reports the size of the working tree that travels with each call).
# Usage: bash scripts/gpu/pack_bundle.sh [GPU_DIR=.gpu]      Env: PART_MIB=56 (or PART_BYTES, for tests)
set -euo pipefail
G=${1:-.gpu}
PART_MIB=${PART_MIB:-56}
part=${PART_BYTES:-$((PART_MIB * 1048576))}
limit=$((64 * 1048576))   # the device tool carries at most 64 MiB per call, the working tree included
[ -d "$G/dl/whl" ] && [ -d "$G/dl/te" ] || { echo "pack_bundle: need $G/dl/whl and $G/dl/te (run prepare_workstation.sh)"; exit 1; }
rm -rf "$G/bundle" "$G/bundle.tar" "$G"/c[0-9]*
mkdir -p "$G/bundle/wheels" "$G/bundle/te"
cp -l "$G"/dl/whl/*.whl "$G/bundle/wheels/"
cp -l "$G"/dl/te/* "$G/bundle/te/"
tar -C "$G/bundle" -cf "$G/bundle.tar" wheels te
rm -rf "$G/bundle"
size=$(stat -c %s "$G/bundle.tar")
n=$(( (size + part - 1) / part ))
(cd "$G" && sha256sum bundle.tar > bundle.sha256)
split -n "$n" -d -a 2 "$G/bundle.tar" "$G/bundle.part."
rm "$G/bundle.tar"
for k in $(seq 1 "$n"); do
  mkdir -p "$G/c$k"
  mv "$G/bundle.part.$(printf %02d $((k - 1)))" "$G/c$k/"
  cp "$G/bundle.sha256" "$G/c$k/"; echo "$n" > "$G/c$k/bundle.parts"
done
rm "$G/bundle.sha256"

tree=0
if git rev-parse --git-dir >/dev/null 2>&1; then
  tree=$(git ls-files -co --exclude-standard -z | xargs -0 -r du -cb 2>/dev/null | tail -1 | cut -f1)
fi
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
echo "wheels: $(ls "$G/dl/whl" | wc -l) files, $(mib "$(du -cb "$G"/dl/whl/* | tail -1 | cut -f1)") MiB;" \
  "te: $(mib "$(du -cb "$G"/dl/te/* | tail -1 | cut -f1)") MiB"
echo "bundle: $size B = $(mib "$size") MiB in $n parts; working tree that travels: $(mib "$tree") MiB"
over=0
for k in $(seq 1 "$n"); do
  b=$(du -cb "$G/c$k"/* | tail -1 | cut -f1)
  flag=ok; [ $((b + tree)) -lt $limit ] || { flag="OVER 64 MiB: lower PART_MIB"; over=1; }
  echo "  call $k carries $G/c$k: $(mib "$b") MiB (+ tree = $(mib $((b + tree))) MiB) $flag"
done
exit $over
