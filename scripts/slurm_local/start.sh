#!/usr/bin/env bash
# Start a real Slurm cluster on this machine, for tests, CI and demos (the `cluster=local_slurm` profile).
#
# Debian's slurm-wlm pieces (slurmctld, slurmd, slurm-client), munge, and slurmdbd backed by MariaDB, so that
# `sacct` is real: NeMo-Run reads job states only through sacct, and cancels a job after ~30 failed polls.
# No systemd: each daemon is started directly and recorded by its PID file under $SLURM_LOCAL_DIR/run.
# Idempotent: with everything running and the configuration unchanged it only checks and returns (~1 s);
# a changed configuration restarts what it concerns. Stop with scripts/slurm_local/stop.sh.
#
# Settings (environment):
#   SLURM_LOCAL_DIR       state, logs, PID files, database          (default /tmp/moe-sweep-slurm)
#   SLURM_LOCAL_NODES     emulated nodes n1..nN, one slurmd each     (default 1)
#   SLURM_LOCAL_GPUS      fake GPUs per node (mknod'ed GRES devices) (default 2, as conf/cluster/local_slurm.yaml)
#   SLURM_LOCAL_GPU_TYPE  GRES type of the fake GPUs                 (default h100)
#   SLURM_LOCAL_DB_PORT   TCP port of the private MariaDB            (default 3307)
#   SLURM_LOCAL_TIMEOUT   seconds to wait for the nodes to be idle   (default 120)
# Fake GPUs: jobs asking --gpus-per-node=N are accepted and get CUDA_VISIBLE_DEVICES; there is no GPU behind it.
# The configuration goes to /etc/slurm/ (where every Debian client looks), so no SLURM_CONF is needed.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/slurm_local/lib.sh
source "$HERE/lib.sh"

NNODES=${SLURM_LOCAL_NODES:-1}
GPUS=${SLURM_LOCAL_GPUS:-2}
GPU_TYPE=${SLURM_LOCAL_GPU_TYPE:-h100}
DB_PORT=${SLURM_LOCAL_DB_PORT:-3307}
TIMEOUT=${SLURM_LOCAL_TIMEOUT:-120}
CLUSTER=local
ACCOUNT=local   # conf/cluster/local_slurm.yaml: account
PARTITION=debug # conf/cluster/local_slurm.yaml: partition

die() { echo "slurm_local: $*" >&2; exit 1; }
for v in NNODES GPUS DB_PORT TIMEOUT; do
  [[ ${!v} =~ ^[0-9]+$ ]] || die "$v=${!v} is not a whole number"
done
[ "$NNODES" -ge 1 ] && [ "$NNODES" -le 16 ] || die "SLURM_LOCAL_NODES=$NNODES: use 1..16"
[[ $GPU_TYPE =~ ^[a-z0-9]+$ ]] || die "SLURM_LOCAL_GPU_TYPE=$GPU_TYPE: use lower-case letters and digits"
[ "$(id -u)" = 0 ] || die "must run as root (it installs packages, creates device nodes and runs the daemons)"

# ------------------------------------------------------------------------------------------------- packages
# binary -> Debian package (bookworm: slurm 22.05.8, munge 0.5.15, mariadb 10.11)
declare -A PKG=([munged]=munge [slurmctld]=slurmctld [slurmd]=slurmd [sbatch]=slurm-client
  [slurmdbd]=slurmdbd [mariadbd]=mariadb-server)
missing=()
for b in "${!PKG[@]}"; do
  command -v "$b" >/dev/null || [ -x "/usr/sbin/$b" ] || missing+=("${PKG[$b]}")
done
if [ ${#missing[@]} -gt 0 ]; then
  sl_log "installing ${missing[*]} (apt; 'policy-rc.d denied' below is expected: nothing starts by itself)"
  export DEBIAN_FRONTEND=noninteractive
  aptlog=$(mktemp)
  if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >"$aptlog" 2>&1; then
    apt-get update -qq >>"$aptlog" 2>&1 || true
    apt-get install -y -q --no-install-recommends "${missing[@]}" >>"$aptlog" 2>&1 ||
      { tail -30 "$aptlog" >&2; die "apt-get install ${missing[*]} failed (log: $aptlog)"; }
  fi
  rm -f "$aptlog"
  sl_log "installed"
fi
export PATH=/usr/sbin:/usr/bin:$PATH

# ------------------------------------------------------------------------------------------------- hardware
mkdir -p "$SLD"/{run,log,state/ctld,dev,etc}
# `slurmd -C` takes about a second; cache its answer for this machine's CPU count and memory.
hwkey="$(nproc) $(awk '/MemTotal/ {print $2}' /proc/meminfo)"
if [ ! -s "$SLD/etc/hw" ] || [ "$(head -1 "$SLD/etc/hw")" != "$hwkey" ]; then
  printf '%s\n%s\n' "$hwkey" "$(slurmd -C | head -1)" >"$SLD/etc/hw"
fi
HW=$(sed -n 2p "$SLD/etc/hw") # NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=24105
hw() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<<"$HW"; }
CPUS=$(hw CPUs) SOCKETS=$(hw SocketsPerBoard) CORES=$(hw CoresPerSocket) THREADS=$(hw ThreadsPerCore)
# The node drains when the configured RealMemory is above what slurmd finds: claim 90 %, split over the nodes.
MEM=$(($(hw RealMemory) * 9 / 10 / NNODES))
HOST=$(hostname -s)
NODES="n[1-$NNODES]"
NODE_NAMES=$(seq -f 'n%g' 1 "$NNODES")

# ------------------------------------------------------------------------------------------------- config
GRES_TYPES="" NODE_GRES=""
if [ "$GPUS" -gt 0 ]; then
  # Slurm 22.05 accepts a gpu GRES only on character devices: clone /dev/null (1,3) once per fake GPU.
  for ((i = 0; i < GPUS; i++)); do
    [ -c "$SLD/dev/nvidia$i" ] || mknod "$SLD/dev/nvidia$i" c 1 3
  done
  GRES_TYPES="GresTypes=gpu
AccountingStorageTRES=gres/gpu"
  NODE_GRES="Gres=gpu:$GPU_TYPE:$GPUS"
  echo "NodeName=$NODES Name=gpu Type=$GPU_TYPE File=$SLD/dev/nvidia[0-$((GPUS - 1))]" >"$SLD/etc/gres.conf"
else
  : >"$SLD/etc/gres.conf"
fi

cat >"$SLD/etc/slurm.conf" <<EOF
# Written by scripts/slurm_local/start.sh; rewritten on every start.
ClusterName=$CLUSTER
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
SlurmctldPort=6817
StateSaveLocation=$SLD/state/ctld
SlurmdSpoolDir=$SLD/state/d_%n
SlurmctldPidFile=$SLD/run/slurmctld.pid
SlurmdPidFile=$SLD/run/slurmd_%n.pid
SlurmctldLogFile=$SLD/log/slurmctld.log
SlurmdLogFile=$SLD/log/slurmd_%n.log
# No cgroups in this sandbox: track processes by parent PID, no task confinement.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# Start jobs at once instead of on the next scheduler tick (~2 s saved per job).
SchedulerParameters=sched_min_interval=0,batch_sched_delay=0
# Impossible requests (too many CPUs, unknown GRES) fail at submit instead of pending forever.
EnforcePartLimits=ALL
ReturnToService=2
# Time-limit tests: SIGKILL 5 s after SIGTERM instead of the default 30 s.
KillWait=5
# Every emulated node claims the whole machine (oversubscribed on purpose).
SlurmdParameters=config_overrides
AccountingStorageType=accounting_storage/slurmdbd
# Like a real cluster, an account without an association (e.g. a typo) is refused at submit.
AccountingStorageEnforce=associations
AccountingStorageHost=localhost
AccountingStoragePort=6819
JobAcctGatherType=jobacct_gather/linux
JobCompType=jobcomp/filetxt
JobCompLoc=$SLD/log/jobcomp.txt
$GRES_TYPES
NodeName=$NODES NodeHostname=$HOST NodeAddr=127.0.0.1 Port=[17001-$((17000 + NNODES))] CPUs=$CPUS Sockets=$SOCKETS CoresPerSocket=$CORES ThreadsPerCore=$THREADS RealMemory=$MEM $NODE_GRES State=UNKNOWN
PartitionName=$PARTITION Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF

# The database password is made once per state folder, kept mode 600 and only written to slurmdbd.conf.
[ -s "$SLD/etc/dbpass" ] || (umask 077 && od -An -N12 -tx1 /dev/urandom | tr -d ' \n' >"$SLD/etc/dbpass")
(
  umask 077
  cat >"$SLD/etc/slurmdbd.conf" <<EOF
AuthType=auth/munge
DbdHost=localhost
DbdPort=6819
SlurmUser=root
LogFile=$SLD/log/slurmdbd.log
PidFile=$SLD/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$(cat "$SLD/etc/dbpass")
StorageLoc=slurm_acct_db
EOF
)

# install_conf NEW DEST MODE: replace DEST when it differs; prints "changed" when it did.
install_conf() {  # $1 generated file, $2 system path, $3 mode. A file of the machine's own is kept once as
  # $2.before-moe-sweep before it is first replaced or removed (restore it with: mv $2.before-moe-sweep $2)
  if [ -e "$2" ] && [ ! -e "$2.before-moe-sweep" ] && ! cmp -s "$1" "$2"; then
    cp -p "$2" "$2.before-moe-sweep"
    sl_log "kept the machine's $2 as $2.before-moe-sweep (this script replaces it)" >&2
  fi
  if [ -s "$1" ]; then
    cmp -s "$1" "$2" && return 0
    install -D -m "$3" "$1" "$2"
  else
    [ -e "$2" ] || return 0
    rm -f "$2"
  fi
  echo changed
}
ctl_changed=$(install_conf "$SLD/etc/slurm.conf" /etc/slurm/slurm.conf 644)
ctl_changed+=$(install_conf "$SLD/etc/gres.conf" /etc/slurm/gres.conf 644)
dbd_changed=$(install_conf "$SLD/etc/slurmdbd.conf" /etc/slurm/slurmdbd.conf 600)
[ -n "$ctl_changed$dbd_changed" ] &&
  sl_log "wrote /etc/slurm ($NODES, $CPUS CPUs, ${MEM} MB, $GPUS x gpu:$GPU_TYPE per node)"

# ------------------------------------------------------------------------------------------------- node names
# Each emulated node's name resolves to a loopback address of its own (n<i> -> 127.0.100.<i>), as distinct hosts
# would: a job's processes on node n<i> can bind there (the fabric probe's gloo groups do), so traffic between two
# emulated nodes has its nodes' addresses and a test can shape one node's links (tc on lo). Slurm itself keeps
# NodeAddr=127.0.0.1. The block between the markers is rewritten on every start; nothing else in /etc/hosts changes.
hosts_block=$(for i in $(seq 1 "$NNODES"); do printf '127.0.100.%d n%d\n' "$i" "$i"; done)
hosts_new=$(awk '/^# moe-sweep slurm_local nodes begin/{skip=1} !skip{print} /^# moe-sweep slurm_local nodes end/{skip=0}' /etc/hosts)
hosts_new+=$'\n'"# moe-sweep slurm_local nodes begin"$'\n'"$hosts_block"$'\n'"# moe-sweep slurm_local nodes end"
if [ "$hosts_new" != "$(cat /etc/hosts)" ]; then
  printf '%s\n' "$hosts_new" >/etc/hosts.moe-sweep.tmp && cat /etc/hosts.moe-sweep.tmp >/etc/hosts  # in place: a bind mount
  rm -f /etc/hosts.moe-sweep.tmp
fi

# ------------------------------------------------------------------------------------------------- munge
if [ ! -s /etc/munge/munge.key ]; then
  install -d -o munge -g munge -m 700 /etc/munge
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
  chown munge:munge /etc/munge/munge.key
  chmod 400 /etc/munge/munge.key
fi
install -d -o munge -g munge /run/munge /var/lib/munge /var/log/munge # /run is a tmpfs: every boot
if ! sl_alive /run/munge/munged.pid munged; then
  runuser -u munge -- /usr/sbin/munged
  sl_wait_alive /run/munge/munged.pid munged
  sl_log "munged started ($(cat /run/munge/munged.pid))"
fi
munge -n | unmunge >/dev/null || die "munge self-test (munge -n | unmunge) failed"

# ------------------------------------------------------------------------------------------------- MariaDB
DB_SOCK=$SLD/run/mysqld.sock
sql() { mariadb --socket="$DB_SOCK" -uroot "$@"; }
if [ ! -d "$SLD/mysql/mysql" ]; then
  install -d -o mysql -g mysql "$SLD/mysql"
  mariadb-install-db --user=mysql --datadir="$SLD/mysql" --auth-root-authentication-method=socket \
    >"$SLD/log/mariadb-install.log" 2>&1 || { tail "$SLD/log/mariadb-install.log" >&2; die "mariadb-install-db failed"; }
fi
chown mysql:mysql "$SLD/run" 2>/dev/null || true
if ! sl_alive "$SLD/run/mariadb.pid" mariadbd; then
  nohup /usr/sbin/mariadbd --user=mysql --datadir="$SLD/mysql" --socket="$DB_SOCK" \
    --pid-file="$SLD/run/mysqld-own.pid" --bind-address=127.0.0.1 --port="$DB_PORT" \
    --innodb-buffer-pool-size=64M --innodb-lock-wait-timeout=900 --skip-log-bin \
    >>"$SLD/log/mariadb.log" 2>&1 </dev/null &
  echo $! >"$SLD/run/mariadb.pid"
  for _ in $(seq 1 160); do sql -e 'select 1' >/dev/null 2>&1 && break; sleep 0.25; done
  sql -e 'select 1' >/dev/null || { tail "$SLD/log/mariadb.log" >&2; die "mariadbd did not come up"; }
  sl_log "mariadbd started ($(cat "$SLD/run/mariadb.pid"), port $DB_PORT)"
  sql -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
    CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$(cat "$SLD/etc/dbpass")';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; FLUSH PRIVILEGES;"
fi

# ------------------------------------------------------------------------------------------------- slurmdbd
[ -n "$dbd_changed" ] && sl_stop "$SLD/run/slurmdbd.pid" slurmdbd
if ! sl_alive "$SLD/run/slurmdbd.pid" slurmdbd; then
  slurmdbd
  sl_wait_alive "$SLD/run/slurmdbd.pid" slurmdbd
  for _ in $(seq 1 120); do sacctmgr -n show cluster >/dev/null 2>&1 && break; sleep 0.25; done
  sl_log "slurmdbd started ($(cat "$SLD/run/slurmdbd.pid"))"
fi
# cluster, account and user association (what --account=local and sacct's Account column need)
if [ ! -e "$SLD/mysql/.moe-sweep-assoc" ]; then
  sacctmgr -n -P show cluster format=cluster | grep -qx "$CLUSTER" || sacctmgr -i add cluster "$CLUSTER" >/dev/null
  sacctmgr -n -P show account format=account | grep -qx "$ACCOUNT" ||
    sacctmgr -i add account "$ACCOUNT" cluster="$CLUSTER" description=tests organization=tests >/dev/null
  sacctmgr -n -P show assoc user=root account="$ACCOUNT" format=user | grep -qx root ||
    sacctmgr -i add user root account="$ACCOUNT" cluster="$CLUSTER" >/dev/null
  touch "$SLD/mysql/.moe-sweep-assoc"
fi

# ------------------------------------------------------------------------------------------------- slurmctld, slurmd
if [ -n "$ctl_changed" ]; then
  for f in "$SLD"/run/slurmd_*.pid; do [ -e "$f" ] && sl_stop "$f" slurmd; done
  sl_stop "$SLD/run/slurmctld.pid" slurmctld
fi
if ! sl_alive "$SLD/run/slurmctld.pid" slurmctld; then
  slurmctld
  sl_wait_alive "$SLD/run/slurmctld.pid" slurmctld
  sl_log "slurmctld started ($(cat "$SLD/run/slurmctld.pid"))"
fi
for n in $NODE_NAMES; do
  mkdir -p "$SLD/state/d_$n"
  if ! sl_alive "$SLD/run/slurmd_$n.pid" slurmd; then
    slurmd -N "$n"
    sl_wait_alive "$SLD/run/slurmd_$n.pid" slurmd
    sl_log "slurmd $n started ($(cat "$SLD/run/slurmd_$n.pid"))"
  fi
done

# ------------------------------------------------------------------------------------------------- ready?
resumed=0
deadline=$(($(date +%s) + TIMEOUT))
while :; do
  # %t: compact state; '*' marks a node that does not respond, '~'/'#' power states
  states=$(sinfo -h -N -p "$PARTITION" -o '%N %t' 2>/dev/null | sort -u || true)
  ready=$(grep -cE ' (idle|mix|alloc)$' <<<"$states" || true)
  [ "$ready" -eq "$NNODES" ] && break
  bad=$(awk '$2 ~ /^(drain|drng|down|inval|fail)/ {print $1}' <<<"$states" | sort -u)
  if [ -n "$bad" ] && [ $resumed = 0 ]; then
    sl_log "resuming $(echo "$bad" | tr '\n' ' ')(state left over from an earlier configuration)"
    for n in $bad; do scontrol update nodename="$n" state=resume 2>/dev/null || true; done
    resumed=1
  fi
  if [ "$(date +%s)" -ge $deadline ]; then
    echo "$states" >&2
    tail -n 15 "$SLD"/log/slurm*.log >&2 || true
    die "nodes not idle after ${TIMEOUT}s ($ready/$NNODES ready); logs in $SLD/log"
  fi
  sleep 0.25
done
sl_log "ready: $NNODES node(s) x $CPUS CPUs, $GPUS gpu:$GPU_TYPE each; partition $PARTITION, account $ACCOUNT; logs $SLD/log"
