# Settings of the local PostgreSQL test server, sourced by start.sh and stop.sh. Override any of them in the
# environment. The `postgres` tests read MOE_SWEEP_PG_URL (default: the URL below).
MOE_SWEEP_PG_PORT=${MOE_SWEEP_PG_PORT:-54329}
MOE_SWEEP_PG_DIR=${MOE_SWEEP_PG_DIR:-/tmp/moe_sweep_pg}
MOE_SWEEP_PG_USER=${MOE_SWEEP_PG_USER:-moe_sweep}
MOE_SWEEP_PG_PASSWORD=${MOE_SWEEP_PG_PASSWORD:-moe_sweep}
MOE_SWEEP_PG_DB=${MOE_SWEEP_PG_DB:-moe_sweep}
MOE_SWEEP_PG_URL=${MOE_SWEEP_PG_URL:-postgresql+psycopg://${MOE_SWEEP_PG_USER}:${MOE_SWEEP_PG_PASSWORD}@127.0.0.1:${MOE_SWEEP_PG_PORT}/${MOE_SWEEP_PG_DB}}

pg_find_bin() {  # the newest installed server's bin folder (Debian keeps it out of PATH)
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then echo "$d"; return 0; fi
  done
  if command -v pg_ctl >/dev/null 2>&1; then dirname "$(readlink -f "$(command -v pg_ctl)")"; return 0; fi
  return 1
}

pg_as_owner() {  # PostgreSQL refuses to run as root: run as the `postgres` account then
  if [ "$(id -u)" -eq 0 ]; then (cd / && runuser -u postgres -- "$@"); else (cd / && "$@"); fi
}

pg_clear_zombie() {  # $1: data dir. A postmaster killed with -9 where PID 1 reaps nothing (containers) stays a
  # zombie that pg_ctl and postgres take for a running server: drop its lock files. Returns 0 when it did.
  local pid lock
  pid=$(head -n 1 "$1/postmaster.pid" 2>/dev/null || true)
  [ -n "$pid" ] && [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = "Z" ] || return 1
  rm -f "$1/postmaster.pid"
  lock="$MOE_SWEEP_PG_DIR/.s.PGSQL.$MOE_SWEEP_PG_PORT.lock"
  if [ "$(head -n 1 "$lock" 2>/dev/null)" = "$pid" ]; then rm -f "$lock"; fi
  return 0
}
