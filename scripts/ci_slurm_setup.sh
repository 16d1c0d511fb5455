#!/usr/bin/env bash
# Bring up a single-node SLURM cluster on a Debian 12 machine (root, no systemd): munge, slurmctld and slurmd
# from Debian's packages (slurm-wlm 22.05), one node `localhost` with this machine's real CPUs and memory, one
# partition `debug`, no accounting. Idempotent: with the daemons up and the node idle it only checks (~0.1 s);
# a daemon that is not running is started again (tests call it to restart a cluster they changed).
#
#   sudo scripts/ci_slurm_setup.sh
#
# proctrack/linuxproc and task/none: no cgroup plugin (containers here have no delegated cgroup tree).
# Daemon logs, pids and state are under $STATE; the config is /etc/slurm/slurm.conf (ours is marked, a config
# someone else wrote is never replaced).
set -euo pipefail
STATE=${STATE:-/var/lib/hermes-slurm}
CONF=/etc/slurm/slurm.conf
MARK="# written by hermes-runner scripts/ci_slurm_setup.sh"
say() { echo "[slurm-setup] $*"; }
t0=$SECONDS

need=()
for pkg in slurm-wlm munge; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  say "installed ${need[*]} ($((SECONDS - t0)) s)"
fi

mkdir -p "$STATE/ctld" "$STATE/d" /run/munge /var/log/munge
chown munge:munge /run/munge /var/log/munge 2>/dev/null || true
if [ ! -s /etc/munge/munge.key ]; then
  mungekey --create --keyfile /etc/munge/munge.key 2>/dev/null ||
    dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
  chown munge:munge /etc/munge/munge.key
  chmod 400 /etc/munge/munge.key
fi

# The node as slurmd sees it (CPUs, memory less 5% for the system), written once.
if [ ! -e "$CONF" ] || grep -qF "$MARK" "$CONF"; then
  read -r cpus mem < <(slurmd -C | awk '/^NodeName/ {for (i=1;i<=NF;i++) {split($i,kv,"="); v[kv[1]]=kv[2]}
                                        print v["CPUs"], int(v["RealMemory"]*0.95)}')
  new=$(cat <<EOF
$MARK
ClusterName=hermes
SlurmctldHost=localhost
SlurmUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
SchedulerType=sched/backfill
ReturnToService=2
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdLogFile=$STATE/slurmd.log
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
SchedulerParameters=sched_interval=2
MinJobAge=300
KillWait=5
NodeName=localhost CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
)
  if [ ! -e "$CONF" ] || [ "$new" != "$(cat "$CONF")" ]; then
    echo "$new" >"$CONF"
    say "wrote $CONF (localhost: $cpus CPUs, $mem MB)"
    for d in slurmd slurmctld; do  # a changed config: restart what runs with the old one
      [ -s "$STATE/$d.pid" ] && kill "$(cat "$STATE/$d.pid")" 2>/dev/null || true
    done
    sleep 1
  fi
fi

running() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
if ! pgrep -x munged >/dev/null; then
  runuser -u munge -- /usr/sbin/munged
  say "started munged"
fi
if ! running "$STATE/slurmctld.pid"; then
  /usr/sbin/slurmctld
  say "started slurmctld"
fi
if ! running "$STATE/slurmd.pid"; then
  /usr/sbin/slurmd -N localhost
  say "started slurmd"
fi

# Wait for the node to take jobs (a node left DOWN by an earlier crash is resumed).
for _ in $(seq 60); do
  state=$(sinfo -h -n localhost -o %T 2>/dev/null || true)
  case "$state" in
    idle* | mixed* | allocated* | completing*) say "localhost is $state ($((SECONDS - t0)) s)"; exit 0 ;;
    down* | drain*) scontrol update NodeName=localhost State=RESUME 2>/dev/null || true ;;
  esac
  sleep 0.5
done
say "the node did not come up: sinfo says '${state:-nothing}'; logs in $STATE" >&2
exit 1
