#!/usr/bin/env bash
# Start a private PostgreSQL server for the `postgres` tests (history database), idempotently:
#   - installs Debian's `postgresql` package when no server binaries are found (needs root);
#   - creates a cluster in $MOE_SWEEP_PG_DIR (default /tmp/moe_sweep_pg) owned by `postgres` when run as root;
#   - starts it on 127.0.0.1:$MOE_SWEEP_PG_PORT (default 54329), password auth over TCP;
#   - creates user $MOE_SWEEP_PG_USER and database $MOE_SWEEP_PG_DB (default moe_sweep / moe_sweep).
# Prints the URL; the tests read MOE_SWEEP_PG_URL, whose default is that URL:
#   postgresql+psycopg://moe_sweep:moe_sweep@127.0.0.1:54329/moe_sweep
# Stop it with scripts/pg_local/stop.sh. Re-running while it is up only checks the database exists.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=env.sh
source "$here/env.sh"

if ! BIN=$(pg_find_bin); then
  if [ "$(id -u)" -ne 0 ]; then
    echo "PostgreSQL server binaries not found and this is not root: run 'apt-get install -y postgresql'" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends postgresql >/dev/null
  BIN=$(pg_find_bin)
fi
owner=$(id -un)
[ "$(id -u)" -eq 0 ] && owner=postgres
DATA="$MOE_SWEEP_PG_DIR/data"
mkdir -p "$MOE_SWEEP_PG_DIR"
chown "$owner" "$MOE_SWEEP_PG_DIR"
chmod 700 "$MOE_SWEEP_PG_DIR"

if [ ! -s "$DATA/PG_VERSION" ]; then
  pwfile="$MOE_SWEEP_PG_DIR/.pwfile"
  printf '%s\n' "$MOE_SWEEP_PG_PASSWORD" > "$pwfile"
  chown "$owner" "$pwfile"
  chmod 600 "$pwfile"
  pg_as_owner "$BIN/initdb" -D "$DATA" -U "$MOE_SWEEP_PG_USER" --pwfile="$pwfile" -E UTF8 --no-locale \
    --auth-local=trust --auth-host=scram-sha-256 > "$MOE_SWEEP_PG_DIR/initdb.log" 2>&1 \
    || { cat "$MOE_SWEEP_PG_DIR/initdb.log" >&2; rm -f "$pwfile"; exit 1; }
  rm -f "$pwfile"
fi

ready() { pg_as_owner "$BIN/pg_isready" -h 127.0.0.1 -p "$MOE_SWEEP_PG_PORT" -q; }
wait_ready() { local i; for i in $(seq 1 "$1"); do ready && return 0; sleep 1; done; return 1; }
if ! ready; then
  # A live server that is still recovering gets time to finish (pg_clear_zombie: see env.sh).
  if ! pg_clear_zombie "$DATA" && pg_as_owner "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
    wait_ready 30 || true
  fi
  if ! ready; then
    pg_as_owner "$BIN/pg_ctl" -D "$DATA" -l "$MOE_SWEEP_PG_DIR/server.log" -w -t 60 \
      -o "-p $MOE_SWEEP_PG_PORT -k $MOE_SWEEP_PG_DIR -c listen_addresses=127.0.0.1" start >/dev/null \
      || { tail -n 20 "$MOE_SWEEP_PG_DIR/server.log" >&2; exit 1; }
    wait_ready 60 || { echo "PostgreSQL started but does not accept connections:" >&2
                       tail -n 20 "$MOE_SWEEP_PG_DIR/server.log" >&2; exit 1; }
  fi
fi

psql_() { pg_as_owner "$BIN/psql" -h "$MOE_SWEEP_PG_DIR" -p "$MOE_SWEEP_PG_PORT" -U "$MOE_SWEEP_PG_USER" -v ON_ERROR_STOP=1 "$@"; }
if ! psql_ -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$MOE_SWEEP_PG_DB'" | grep -q 1; then
  psql_ -d postgres -qc "CREATE DATABASE \"$MOE_SWEEP_PG_DB\""
fi
echo "PostgreSQL up: MOE_SWEEP_PG_URL=${MOE_SWEEP_PG_URL//:$MOE_SWEEP_PG_PASSWORD@/:***@}"
