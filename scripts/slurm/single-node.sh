#!/usr/bin/env bash
# A throwaway single-node Slurm (Debian slurmctld + slurmd + munge) on this machine, for testing
# `pdctl launch --executor slurm --submit`. Needs root. Usage:
#   scripts/slurm/single-node.sh start   # installs nothing; apt-get install slurmctld slurmd slurm-client munge first
#   scripts/slurm/single-node.sh stop
# State lives under /tmp/pdctl-slurm; daemons run in the foreground-less mode and are stopped by pid file.
set -euo pipefail
DIR=/tmp/pdctl-slurm
HOST=$(hostname -s)
CPUS=$(nproc)
MEM=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2 ))

start() {
  mkdir -p "$DIR"/{spool,state,log} /etc/slurm /run/munge /var/log/munge /var/lib/munge /etc/munge
  chown -R munge:munge /run/munge /var/log/munge /var/lib/munge /etc/munge 2>/dev/null || true
  if [ ! -s /etc/munge/munge.key ]; then
    dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
    chown munge:munge /etc/munge/munge.key 2>/dev/null || true
    chmod 400 /etc/munge/munge.key
  fi
  pgrep -x munged >/dev/null || runuser -u munge -- /usr/sbin/munged --force 2>/dev/null || /usr/sbin/munged --force
  cat > /etc/slurm/slurm.conf <<CONF
ClusterName=pdctl
SlurmctldHost=$HOST
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
NodeName=$HOST CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
  /usr/sbin/slurmctld
  /usr/sbin/slurmd
  for _ in $(seq 1 30); do
    if sinfo -h -o %T 2>/dev/null | grep -q idle; then echo "slurm up on $HOST"; return 0; fi
    sleep 1
  done
  echo "slurm did not come up; see $DIR/log" >&2
  return 1
}

stop() {
  for pidfile in "$DIR/slurmd.pid" "$DIR/slurmctld.pid"; do
    [ -f "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null || true
  done
  [ -f /run/munge/munged.pid ] && kill "$(cat /run/munge/munged.pid)" 2>/dev/null || true
  echo "slurm stopped"
}

"${1:-start}"
