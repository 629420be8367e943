#!/usr/bin/env bash
# A single-node SLURM cluster in a directory, for tests: munged, slurmctld
# and slurmd started as root in the foreground-less daemon mode with every
# file (key, sockets, state, spool, logs) under DIR, so nothing in /etc or
# /run is touched and a second cluster can run beside it.
#   cluster.sh start DIR [CPUS]   writes DIR/slurm.conf, starts the daemons,
#                                 waits until the node is idle
#   cluster.sh stop DIR           stops the daemons it started, by their PIDs
# Clients find the cluster through SLURM_CONF=DIR/slurm.conf.
set -euo pipefail
cmd="${1:?usage: cluster.sh start|stop DIR [CPUS]}"
dir="$(realpath -m "${2:?usage: cluster.sh start|stop DIR [CPUS]}")"
cpus="${3:-8}"

stop() {
  for d in slurmd slurmctld munged; do
    local f="$dir/$d.pid"
    [[ -s "$f" ]] || continue
    local pid
    pid="$(cat "$f")"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$f"
  done
}

start() {
  for exe in munged slurmctld slurmd sinfo; do
    command -v "$exe" >/dev/null || { echo "cluster.sh: $exe not found (install slurm-wlm and munge)" >&2; exit 1; }
  done
  mkdir -p "$dir"/{munge,state,spool,log,tmp}
  chmod 0700 "$dir/munge"
  chmod 0755 "$dir" "$dir"/{state,spool,log}
  chmod 1777 "$dir/tmp"  # TmpFS: PMIx's per-step directories, which a killed step can leave behind
  # A fresh random key for this cluster only.
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 0400 "$dir/munge/munge.key"
  munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
    --pid-file="$dir/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed"
  local host port
  host="$(hostname -s)"
  # Ports from the directory name's hash, so clusters in different
  # directories do not collide with each other or with a real slurm.
  port=$((20000 + $(cksum <<<"$dir" | cut -d' ' -f1) % 20000))
  local mem
  mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2 ))
  cat > "$dir/slurm.conf" <<CONF
ClusterName=gpttest
SlurmctldHost=$host
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket,cred_expire=10
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
TmpFS=$dir/tmp
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
MailProg=/bin/true
ReturnToService=2
SlurmdParameters=config_overrides
SchedulerType=sched/backfill
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
InactiveLimit=0
KillWait=5
MinJobAge=300
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
  export SLURM_CONF="$dir/slurm.conf"
  slurmctld -f "$SLURM_CONF"
  slurmd -f "$SLURM_CONF"
  for _ in $(seq 150); do
    if sinfo -h -o %T 2>/dev/null | grep -qx idle; then
      echo "cluster up: SLURM_CONF=$SLURM_CONF"
      return 0
    fi
    sleep 0.2
  done
  echo "cluster.sh: node did not become idle; logs in $dir/log" >&2
  sinfo -N -l >&2 || true
  tail -n 20 "$dir"/log/*.log >&2 || true
  stop
  exit 1
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  *) echo "cluster.sh: unknown command '$cmd' (start|stop)" >&2; exit 2 ;;
esac
