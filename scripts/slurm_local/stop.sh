#!/usr/bin/env bash
# Stop the local Slurm cluster that scripts/slurm_local/start.sh started: cancel the jobs left in the queue,
# then stop each daemon through its recorded PID file (never by name). The state folder, the database and the
# job history stay, so the next start is fast and job ids keep counting up.
#   SLURM_LOCAL_KEEP_JOBS=1   do not scancel first
#   SLURM_LOCAL_KEEP_MUNGE=1  leave munged running (other Slurm clients on this machine may use it)
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/slurm_local/lib.sh
source "$HERE/lib.sh"

if [ "${SLURM_LOCAL_KEEP_JOBS:-0}" != 1 ] && sl_alive "$SLD/run/slurmctld.pid" slurmctld; then
  ids=$(squeue -h -o %i 2>/dev/null || true)
  if [ -n "$ids" ]; then
    # shellcheck disable=SC2086
    scancel $ids 2>/dev/null || true
    for _ in $(seq 1 40); do
      [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
      sleep 0.25
    done
    sl_log "cancelled jobs $(echo "$ids" | tr '\n' ' ')"
  fi
fi

for f in "$SLD"/run/slurmd_*.pid; do [ -e "$f" ] && sl_stop "$f" slurmd; done
sl_stop "$SLD/run/slurmctld.pid" slurmctld
sl_stop "$SLD/run/slurmdbd.pid" slurmdbd
sl_stop "$SLD/run/mariadb.pid" mariadbd
[ "${SLURM_LOCAL_KEEP_MUNGE:-0}" = 1 ] || sl_stop /run/munge/munged.pid munged
exit 0
