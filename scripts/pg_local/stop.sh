#!/usr/bin/env bash
# Stop the private PostgreSQL server started by start.sh (its data stay in $MOE_SWEEP_PG_DIR).
# Pass --purge to delete the cluster's folder as well.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=env.sh
source "$here/env.sh"
DATA="$MOE_SWEEP_PG_DIR/data"
if pg_clear_zombie "$DATA"; then
  echo "PostgreSQL was already dead (cleared its stale lock files in $DATA)"
elif BIN=$(pg_find_bin) && [ -s "$DATA/PG_VERSION" ] && pg_as_owner "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
  pg_as_owner "$BIN/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null
  echo "PostgreSQL stopped ($DATA)"
else
  echo "PostgreSQL not running ($DATA)"
fi
if [ "${1:-}" = "--purge" ]; then rm -rf "$MOE_SWEEP_PG_DIR"; echo "removed $MOE_SWEEP_PG_DIR"; fi
