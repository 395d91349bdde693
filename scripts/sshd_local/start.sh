#!/usr/bin/env bash
# Start a private OpenSSH server on 127.0.0.1, for the tests of the SSH tunnel path (cluster.tunnel.kind=ssh):
# a laptop submitting to the local Slurm cluster (scripts/slurm_local/start.sh) through NeMo-Run's SSHTunnel.
#
# Debian's openssh-server, started directly (no systemd) with its own config, host key, PID file and log in
# $SSHD_LOCAL_DIR; it listens on 127.0.0.1 only and accepts one client key only, generated here too
# (AuthorizedKeysFile points into the state folder: ~/.ssh is never touched). Idempotent: with sshd running and
# its configuration unchanged it only checks a login and returns; a changed configuration restarts it.
# Stop with scripts/sshd_local/stop.sh (by the saved PID).
#
# So that ssh/rsync (NeMo-Run copies the job folder with `rsync -e ssh`, strict host keys) know the host key without
# writing to ~/.ssh/known_hosts, one client drop-in is written: /etc/ssh/ssh_config.d/moe-sweep-sshd-local.conf
# (only for 127.0.0.1 on this port; removed by stop.sh).
#
# Settings (environment):
#   SSHD_LOCAL_DIR   state: keys, sshd_config, PID file, log          (default /tmp/moe-sweep-sshd)
#   SSHD_LOCAL_PORT  TCP port on 127.0.0.1                             (default 2222)
# The tests (tests/e2e/test_sweep_ssh.py) read MOE_SWEEP_SSH_PORT (default $SSHD_LOCAL_PORT or 2222),
# MOE_SWEEP_SSH_KEY (default $SSHD_LOCAL_DIR/client_ed25519) and MOE_SWEEP_SSH_USER (default: the current user).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/slurm_local/lib.sh
source "$HERE/../slurm_local/lib.sh" # sl_alive, sl_stop (PID-file handling)

DIR=${SSHD_LOCAL_DIR:-/tmp/moe-sweep-sshd}
PORT=${SSHD_LOCAL_PORT:-2222}
DROPIN=/etc/ssh/ssh_config.d/moe-sweep-sshd-local.conf
USER_NAME=$(id -un)

sl_log() { printf '[sshd_local] %s\n' "$*"; }
die() { echo "sshd_local: $*" >&2; exit 1; }
[[ $PORT =~ ^[0-9]+$ ]] && [ "$PORT" -ge 1 ] && [ "$PORT" -le 65535 ] || die "SSHD_LOCAL_PORT=$PORT is not a TCP port"
[[ $DIR =~ ^/[A-Za-z0-9_./-]+$ ]] || die "SSHD_LOCAL_DIR=$DIR: use an absolute path of letters, digits and ._-/"
[ "$(id -u)" = 0 ] || die "must run as root (it may install openssh-server and writes $DROPIN)"

# ------------------------------------------------------------------------------------------------- packages
if [ ! -x /usr/sbin/sshd ] || ! command -v ssh >/dev/null || ! command -v rsync >/dev/null; then
  sl_log "installing openssh-server openssh-client rsync (apt; nothing starts by itself without systemd)"
  export DEBIAN_FRONTEND=noninteractive
  aptlog=$(mktemp)
  if ! apt-get install -y -q --no-install-recommends openssh-server openssh-client rsync >"$aptlog" 2>&1; then
    apt-get update -qq >>"$aptlog" 2>&1 || true
    apt-get install -y -q --no-install-recommends openssh-server openssh-client rsync >>"$aptlog" 2>&1 ||
      { tail -30 "$aptlog" >&2; die "apt-get install openssh-server failed (log: $aptlog)"; }
  fi
  rm -f "$aptlog"
fi

# ------------------------------------------------------------------------------------------------- keys, config
(umask 077 && mkdir -p "$DIR")
[ -s "$DIR/ssh_host_ed25519_key" ] ||
  ssh-keygen -q -t ed25519 -N '' -C moe-sweep-sshd-local-host -f "$DIR/ssh_host_ed25519_key"
[ -s "$DIR/client_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C moe-sweep-test-client -f "$DIR/client_ed25519"
(umask 077 && cp "$DIR/client_ed25519.pub" "$DIR/authorized_keys")
echo "[127.0.0.1]:$PORT $(cut -d' ' -f1,2 "$DIR/ssh_host_ed25519_key.pub")" >"$DIR/known_hosts"

cat >"$DIR/sshd_config.new" <<CONF
# Written by scripts/sshd_local/start.sh; rewritten on every start.
Port $PORT
ListenAddress 127.0.0.1
HostKey $DIR/ssh_host_ed25519_key
PidFile $DIR/sshd.pid
AuthorizedKeysFile $DIR/authorized_keys
AllowUsers $USER_NAME
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
# the state folder may sit under /tmp (world-writable), which StrictModes would refuse for AuthorizedKeysFile
StrictModes no
X11Forwarding no
AllowTcpForwarding no
Subsystem sftp internal-sftp
LogLevel VERBOSE
CONF
config_changed=0
cmp -s "$DIR/sshd_config.new" "$DIR/sshd_config" || config_changed=1
mv "$DIR/sshd_config.new" "$DIR/sshd_config"

cat >"$DIR/ssh_client.conf" <<CONF
# Written by scripts/sshd_local/start.sh (removed by scripts/sshd_local/stop.sh): the host key of the local test
# sshd ($DIR) for 127.0.0.1 port $PORT only, so that ssh and rsync never write to ~/.ssh/known_hosts.
Match host 127.0.0.1 exec "test %p = $PORT"
    UserKnownHostsFile $DIR/known_hosts
CONF
cmp -s "$DIR/ssh_client.conf" "$DROPIN" || install -D -m 644 "$DIR/ssh_client.conf" "$DROPIN"

# ------------------------------------------------------------------------------------------------- sshd
mkdir -p /run/sshd # privilege separation folder (/run is a tmpfs: every boot)
/usr/sbin/sshd -t -f "$DIR/sshd_config" || die "sshd -t rejected $DIR/sshd_config"
[ $config_changed = 1 ] && sl_stop "$DIR/sshd.pid" sshd
if ! sl_alive "$DIR/sshd.pid" sshd; then
  /usr/sbin/sshd -f "$DIR/sshd_config" -E "$DIR/sshd.log"
  for _ in $(seq 1 40); do sl_alive "$DIR/sshd.pid" sshd && break; sleep 0.25; done
  sl_alive "$DIR/sshd.pid" sshd || { tail "$DIR/sshd.log" >&2; die "sshd did not start; log $DIR/sshd.log"; }
  sl_log "sshd started ($(cat "$DIR/sshd.pid"), 127.0.0.1:$PORT)"
fi

# ------------------------------------------------------------------------------------------------- ready?
ssh -o BatchMode=yes -o ConnectTimeout=10 -i "$DIR/client_ed25519" -p "$PORT" "$USER_NAME@127.0.0.1" true ||
  { tail "$DIR/sshd.log" >&2; die "key login to $USER_NAME@127.0.0.1:$PORT failed; log $DIR/sshd.log"; }
sl_log "ready: $USER_NAME@127.0.0.1:$PORT, key $DIR/client_ed25519"
