#!/usr/bin/env bash
# A single-node SLURM cluster on this machine (the tests of the grid on a real scheduler, tests/test_slurm*.py):
#
#   scripts/slurm-local.sh start    writes /etc/slurm/slurm.conf from this machine's cores and memory, starts
#                                   munged, slurmctld and slurmd (each only if not running) and waits until
#                                   `sinfo` shows the node idle
#   scripts/slurm-local.sh stop     cancels the cluster's jobs and stops the daemons `start` started, no other
#   scripts/slurm-local.sh status   prints `running` (exit 0) or `stopped` (exit 3)
#
# Debian's slurmctld, slurmd, slurm-client and munge come from `scripts/install-system-packages.sh slurm`
# (`make setup` and `make test` run it); `start` installs nothing. Idempotent: `start` on a running cluster and
# `stop` on a stopped one do nothing. Needs root (or sudo) and no systemd. One cluster per machine: SLURM's
# ports (6817-6818) are fixed. No accounting (no slurmdbd): the profile's status command is squeue, which reads
# slurmctld, and MinJobAge keeps a finished job visible to it.
set -euo pipefail

HOST=$(hostname -s)
STATE=/run/cpdagthink-slurm        # which daemons `start` started (one name a line)
CONF=/etc/slurm/slurm.conf
MARK="# Written by cpdagthink's scripts/slurm-local.sh (a single-node test cluster)."
# snakemake-executor-plugin-slurm reads squeue only while MinJobAge >= 3 x its initial status-check interval
# (the profile's slurm-init-seconds-before-status-checks, 10 s; the plugin's default, 40 s): below that it
# falls back to sacct, which without accounting never sees the job end. 300 s covers both.
MIN_JOB_AGE=300
WAIT_S=60

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

die() { echo "slurm-local: $*" >&2; exit 1; }

require_packages() {
    local missing
    missing=$(bash "$(dirname "$0")/install-system-packages.sh" --check slurm 2>&1) \
        || die "$missing: run scripts/install-system-packages.sh slurm (make setup and make test do)"
}

# pid of a daemon from its pid file, if that process runs under that name
alive_pid() {
    local file=$1 name=$2 pid
    [ -r "$file" ] || return 1
    pid=$(cat "$file" 2>/dev/null) || return 1
    [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ] && echo "$pid"
}

write_config() {
    if [ -e "$CONF" ] && ! head -n 1 "$CONF" | grep -qxF "$MARK"; then
        die "$CONF was not written by this script (a real cluster's?); leaving it alone"
    fi
    local cpus memory
    cpus=$(nproc)
    # RealMemory below what slurmd detects (a node reporting less than its configuration is drained)
    memory=$(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')
    memory=$((memory * 9 / 10))
    $SUDO mkdir -p /etc/slurm /run/slurm /var/lib/slurm/slurmctld /var/lib/slurm/slurmd /var/log/slurm
    # pid files and the controller's state belong to the slurm user, which slurmctld runs as
    $SUDO chown slurm:slurm /run/slurm /var/lib/slurm/slurmctld /var/log/slurm
    $SUDO tee "$CONF.tmp" >/dev/null <<EOF
$MARK
ClusterName=cpdagthink
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=slurm
AuthType=auth/munge
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
# No cgroups (none without systemd here; slurmd 22.05 refuses CgroupPlugin=disabled, so no cgroup.conf)
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
# Memory is enforced without cgroups: slurmstepd samples each job's processes every second and kills a step
# whose memory is over the job's --mem ("exceeded memory limit" in its log; the job ends FAILED, exit code 0:9)
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
JobAcctGatherParams=OverMemoryKill
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
ReturnToService=2
MinJobAge=$MIN_JOB_AGE
# A job past its time limit is signalled, then killed 5 s later (the default waits 30 s)
KillWait=5
OverTimeLimit=0
InactiveLimit=0
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory State=UNKNOWN
PartitionName=local Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
    $SUDO mv "$CONF.tmp" "$CONF"
}

node_state() { sinfo -h -n "$HOST" -o %t 2>/dev/null | head -n 1; }

is_running() {
    alive_pid /run/slurm/slurmctld.pid slurmctld >/dev/null && alive_pid /run/slurm/slurmd.pid slurmd >/dev/null \
        || return 1
    case "$(node_state)" in idle|mix|alloc) return 0 ;; esac
    return 1
}

start() {
    require_packages
    write_config
    $SUDO mkdir -p "$STATE"
    if ! alive_pid /run/munge/munged.pid munged >/dev/null; then
        $SUDO mkdir -p /run/munge && $SUDO chown munge:munge /run/munge
        $SUDO runuser -u munge -- /usr/sbin/munged
        echo munged | $SUDO tee -a "$STATE/started" >/dev/null
    fi
    if ! alive_pid /run/slurm/slurmctld.pid slurmctld >/dev/null; then
        $SUDO slurmctld -c   # -c: no jobs recovered from an earlier cluster's state
        echo slurmctld | $SUDO tee -a "$STATE/started" >/dev/null
    fi
    if ! alive_pid /run/slurm/slurmd.pid slurmd >/dev/null; then
        $SUDO slurmd
        echo slurmd | $SUDO tee -a "$STATE/started" >/dev/null
    fi
    local deadline=$((SECONDS + WAIT_S)) state=""
    while [ $SECONDS -lt $deadline ]; do
        state=$(node_state)
        case "$state" in idle|mix|alloc) echo "slurm-local: node $HOST is $state"; return 0 ;; esac
        # a node left down or drained by an earlier configuration comes back
        case "$state" in down*|drain*) $SUDO scontrol update nodename="$HOST" state=resume 2>/dev/null || true ;; esac
        sleep 0.5
    done
    die "node $HOST not idle after ${WAIT_S} s (sinfo: '${state}'); see /var/log/slurm/"
}

stop_daemon() {
    local name=$1 file=$2 pid
    pid=$(alive_pid "$file" "$name") || return 0
    $SUDO kill -TERM "$pid"
    for _ in $(seq 100); do
        [ -d "/proc/$pid" ] || return 0
        sleep 0.1
    done
    $SUDO kill -KILL "$pid" 2>/dev/null || true
}

stop() {
    [ -r "$STATE/started" ] || { echo "slurm-local: nothing started by this script"; return 0; }
    local started
    started=$(cat "$STATE/started")
    if grep -qx slurmctld <<<"$started"; then
        # every job on the cluster we started is ours: none outlives it
        $SUDO scancel --full --state=PENDING,RUNNING 2>/dev/null || true
    fi
    grep -qx slurmd <<<"$started" && stop_daemon slurmd /run/slurm/slurmd.pid
    grep -qx slurmctld <<<"$started" && stop_daemon slurmctld /run/slurm/slurmctld.pid
    grep -qx munged <<<"$started" && stop_daemon munged /run/munge/munged.pid
    $SUDO rm -f "$STATE/started"
    echo "slurm-local: stopped $(tr '\n' ' ' <<<"$started")"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) if is_running; then echo running; else echo stopped; exit 3; fi ;;
    *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
