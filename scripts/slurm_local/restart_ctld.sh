#!/usr/bin/env bash
# Restart the local slurmctld (fault-injection tests, tests/e2e/test_faults.py): stop it by its PID file, stay down
# for ${1:-5} seconds, start it again. Jobs keep running under slurmd; slurmctld recovers them from its state folder.
set -euo pipefail
export PATH=/usr/sbin:/usr/bin:$PATH
# shellcheck disable=SC1091
source "$(dirname "$0")/lib.sh"
sl_stop "$SLD/run/slurmctld.pid" slurmctld
sleep "${1:-5}"
slurmctld
sl_wait_alive "$SLD/run/slurmctld.pid" slurmctld
sl_log "slurmctld restarted ($(cat "$SLD/run/slurmctld.pid"))"
