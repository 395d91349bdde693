# shellcheck shell=bash
# Helpers shared by start.sh and stop.sh: settings, logging and PID-file handling.
# Daemons are only ever stopped through a PID file we (or the daemon, at our request) wrote, after checking
# that the process behind the PID still has the expected command name (PIDs get reused).

SLD=${SLURM_LOCAL_DIR:-/tmp/moe-sweep-slurm}
SL_T0=$(date +%s%N)

sl_log() { # message, prefixed with the seconds since the script started
  local now; now=$(date +%s%N)
  printf '[slurm_local %5d ms] %s\n' $(((now - SL_T0) / 1000000)) "$*"
}

# sl_alive PIDFILE NAME: the recorded process exists, is not a zombie and is called NAME.
# (PID 1 here reaps lazily, so an exited daemon may linger as a zombie; `kill -0` would still succeed.)
sl_alive() {
  [ -s "$1" ] || return 1
  local out
  out=$(ps -o stat=,comm= -p "$(cat "$1")" 2>/dev/null) || return 1
  [[ $out != Z* ]] && [ "${out##* }" = "$2" ]
}

# sl_stop PIDFILE NAME: SIGTERM the recorded daemon, wait up to 20 s, SIGKILL if still there; drop the file.
sl_stop() {
  local f=$1 name=$2 pid
  if ! sl_alive "$f" "$name"; then
    rm -f "$f"
    return 0
  fi
  pid=$(cat "$f")
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 80); do
    sl_alive "$f" "$name" || break
    sleep 0.25
  done
  if sl_alive "$f" "$name"; then
    kill -KILL "$pid" 2>/dev/null || true
    sl_log "$name ($pid) did not stop on SIGTERM: SIGKILLed"
  else
    sl_log "stopped $name ($pid)"
  fi
  rm -f "$f"
}

# sl_wait_alive PIDFILE NAME: a daemonizing process writes its PID file shortly after the fork.
sl_wait_alive() {
  for _ in $(seq 1 120); do
    sl_alive "$1" "$2" && return 0
    sleep 0.25
  done
  echo "slurm_local: $2 did not start (no live process in $1); see $SLD/log/" >&2
  return 1
}
