#!/usr/bin/env bash
# A throwaway single-node Slurm (Debian slurmctld + slurmd + munge) on this machine, for testing
# `pdctl launch --executor slurm --submit`. Needs root and the packages (scripts/system-deps.sh installs
# slurmctld slurmd slurm-client munge when run as root). Usage:
#   scripts/slurm/single-node.sh start    # idempotent: a running cluster is left as it is
#   scripts/slurm/single-node.sh stop     # cancels every job, stops the daemons, waits until they are gone
#   scripts/slurm/single-node.sh status   # exit 0 iff the node is idle/mixed/allocated
# State lives under /tmp/pdctl-slurm; each daemon is tracked by its own pid file (nothing killed by name).
set -euo pipefail
DIR=/tmp/pdctl-slurm
HOST=$(hostname -s)
CPUS=$(nproc)
MEM=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2 ))
MUNGE_PID=/run/munge/munged.pid
WAIT_S=${PDCTL_SLURM_WAIT_S:-60}
# GPUs the node declares as GRES (gpu:N), so that jobs ask for --gres=gpu:N as on a GPU cluster. Slurm 22.05
# drops a GPU without a device file from its GRES list ("Removing file-less GPU") and refuses regular files, so
# each "GPU" is a character device node under $DIR/dev with /dev/null's numbers (1,3): nothing real is bound
# (TaskPlugin=task/none constrains no devices), Slurm only counts them and sets CUDA_VISIBLE_DEVICES.
GPUS=${PDCTL_SLURM_GPUS:-4}

alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

node_up() { sinfo -h -o %T 2>/dev/null | grep -Eq '^(idle|mixed|allocated)'; }

has_gres() { sinfo -h -o %G 2>/dev/null | grep -q "gpu:$GPUS"; }

write_conf() {
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
GresTypes=gpu
NodeName=$HOST CPUs=$CPUS RealMemory=$MEM Gres=gpu:$GPUS State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
  mkdir -p "$DIR/dev"
  for i in $(seq 0 $((GPUS - 1))); do
    [ -c "$DIR/dev/gpu$i" ] || mknod "$DIR/dev/gpu$i" c 1 3
  done
  cat > /etc/slurm/gres.conf <<CONF
AutoDetect=off
NodeName=$HOST Name=gpu File=$DIR/dev/gpu[0-$((GPUS - 1))]
CONF
}

start_munge() {
  alive "$MUNGE_PID" && return 0
  mkdir -p /etc/munge /run/munge /var/log/munge /var/lib/munge
  if [ ! -s /etc/munge/munge.key ]; then
    dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
  fi
  chown -R munge:munge /etc/munge /run/munge /var/log/munge /var/lib/munge 2>/dev/null || true
  chmod 400 /etc/munge/munge.key
  # --force: start even if a stale socket of an earlier (killed) munged is left in /run/munge
  runuser -u munge -- /usr/sbin/munged --force 2>/dev/null || /usr/sbin/munged --force
  for _ in $(seq 1 50); do alive "$MUNGE_PID" && return 0; sleep 0.1; done
  echo "munged did not start" >&2
  return 1
}

start() {
  mkdir -p "$DIR"/{spool,state,log} /etc/slurm
  if alive "$DIR/slurmctld.pid" && alive "$DIR/slurmd.pid" && alive "$MUNGE_PID" && node_up; then
    if has_gres; then echo "slurm already up on $HOST"; return 0; fi
    echo "slurm is up without gres gpu:$GPUS (an older configuration): restarting it"
    stop
  fi
  start_munge
  write_conf
  alive "$DIR/slurmctld.pid" || /usr/sbin/slurmctld
  alive "$DIR/slurmd.pid" || /usr/sbin/slurmd
  for _ in $(seq 1 "$WAIT_S"); do
    if node_up; then echo "slurm up on $HOST"; return 0; fi
    # a node drained by an earlier configuration (e.g. one without this gres) stays drained in the saved
    # state: this cluster is throwaway, so put it back into service
    if sinfo -h -o %T 2>/dev/null | grep -Eq '^drain'; then
      scontrol update NodeName="$HOST" State=RESUME 2>/dev/null || true
    fi
    sleep 1
  done
  echo "slurm did not come up within ${WAIT_S}s; see $DIR/log" >&2
  return 1
}

# stop_pidfile FILE: SIGTERM the daemon of FILE, SIGKILL it after 15 s, wait until it is gone.
stop_pidfile() {
  alive "$1" || { rm -f "$1"; return 0; }
  local pid; pid=$(cat "$1")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || { rm -f "$1"; return 0; }; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || { rm -f "$1"; return 0; }; sleep 0.1; done
  echo "could not stop pid $pid ($1)" >&2
  return 1
}

stop() {
  if alive "$DIR/slurmctld.pid"; then  # every job of this throwaway cluster, so that no job step outlives it
    scancel --full --quiet --partition=debug 2>/dev/null || true
    for _ in $(seq 1 30); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 1; done
  fi
  local rc=0
  stop_pidfile "$DIR/slurmd.pid" || rc=1
  stop_pidfile "$DIR/slurmctld.pid" || rc=1
  stop_pidfile "$MUNGE_PID" || rc=1
  [ "$rc" = 0 ] && echo "slurm stopped"
  return "$rc"
}

status() { node_up && sinfo; }

case "${1:-start}" in
  start | stop | status) "${1:-start}" ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
