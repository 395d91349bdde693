#!/usr/bin/env bash
# Stop the sshd that scripts/sshd_local/start.sh started, through its saved PID file (never by name), and remove
# the ssh client drop-in it wrote. The keys stay in $SSHD_LOCAL_DIR, so the next start reuses them.
#   SSHD_LOCAL_DIR   state folder (default /tmp/moe-sweep-sshd)
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/slurm_local/lib.sh
source "$HERE/../slurm_local/lib.sh" # sl_alive, sl_stop
sl_log() { printf '[sshd_local] %s\n' "$*"; }
DIR=${SSHD_LOCAL_DIR:-/tmp/moe-sweep-sshd}
sl_stop "$DIR/sshd.pid" sshd
rm -f /etc/ssh/ssh_config.d/moe-sweep-sshd-local.conf
exit 0
