#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, everything under one directory (config, keys,
# sockets, state, logs), for tests/workflow/test_slurm.py and for trying the SLURM profile by hand:
#
#   tests/helpers/slurm_cluster.sh install        # apt-get: slurm-wlm and munge (root)
#   tests/helpers/slurm_cluster.sh start DIR      # munged, slurmctld, slurmd; waits for `sinfo`
#   export SLURM_CONF=DIR/slurm.conf              # what sbatch, squeue, scancel, sinfo then read
#   tests/helpers/slurm_cluster.sh stop DIR       # the three daemons, by their pid files
#
# The node is this machine (its short hostname) with CPUS CPUs (default 2; more than the machine
# has are accepted: SlurmdParameters=config_overrides), MEM_MB MB (default 4000) and GPUS GPUs
# (default 0) in partition `debug`; no accounting (no slurmdbd: `sacct` fails, as on many small
# clusters), no cgroups (proctrack/linuxproc, task/none). Daemons run as the caller (root in CI).
# GPUS=N advertises N GPUs (gres gpu) with no GPU behind them. Slurm 22.05 drops a GPU that
# gres.conf gives no device file ("Removing file-less GPU": a count-only gres.conf leaves the node
# invalid), and a job granted a GPU whose File is a plain file gets no CUDA_VISIBLE_DEVICES; so
# each is a character device DIR/dev/nvidiaI with /dev/null's numbers (mknod: root). A job granted
# one then gets what it gets on a GPU node (CUDA_VISIBLE_DEVICES=0, SLURM_JOB_GPUS=0, and
# SLURM_STEP_GPUS=0 in its steps) while torch finds no CUDA device.
# Ports are picked free, so the cluster does not clash with a real one. One file lives outside DIR:
# /etc/slurm/slurm.conf, a link to DIR/slurm.conf, because `srun` inside a job (the executor
# plugin's job step) drops SLURM_CONF and reads the default path; `start` refuses a slurm.conf
# there that is not such a link, and `stop` removes the link.
set -euo pipefail

die() { echo "slurm_cluster.sh: $*" >&2; exit 2; }

install() {
    command -v sbatch >/dev/null && [ -x /usr/sbin/munged ] && [ -x /usr/sbin/slurmd ] && return 0
    [ "$(id -u)" = 0 ] || die "installing slurm-wlm and munge needs root (apt-get)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        slurm-wlm munge >/dev/null
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() {
    local dir=$1 cpus=${CPUS:-2} mem=${MEM_MB:-4000} gpus=${GPUS:-0} node user i
    local gres="" node_gres=""
    for tool in munged slurmctld slurmd sinfo; do
        command -v "$tool" >/dev/null || [ -x "/usr/sbin/$tool" ] \
            || die "$tool not found: run \`$0 install\` (Debian: slurm-wlm, munge)"
    done
    mkdir -p "$dir"/{state,spool,log,run}
    dir=$(cd "$dir" && pwd)
    chmod 700 "$dir"
    node=$(hostname -s)
    user=$(id -un)
    case $gpus in ''|*[!0-9]*) die "GPUS=$gpus: give a whole number" ;; esac
    rm -f "$dir/gres.conf"
    if [ "$gpus" -gt 0 ]; then
        mkdir -p "$dir/dev"
        printf 'AutoDetect=off\n' >"$dir/gres.conf"
        for i in $(seq 0 $((gpus - 1))); do
            rm -f "$dir/dev/nvidia$i"
            mknod "$dir/dev/nvidia$i" c 1 3 || die "mknod $dir/dev/nvidia$i (GPUS=$gpus) needs root"
            printf 'Name=gpu File=%s\n' "$dir/dev/nvidia$i" >>"$dir/gres.conf"
        done
        gres=$'GresTypes=gpu\n'
        node_gres=" Gres=gpu:$gpus"
    fi
    # munge: its own key and socket (it refuses group- or world-writable directories).
    dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 status=none
    chmod 600 "$dir/munge.key"
    /usr/sbin/munged --force --key-file="$dir/munge.key" --socket="$dir/run/munge.sock" \
        --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" \
        --seed-file="$dir/run/munged.seed" 2>>"$dir/log/munged.log" \
        || die "munged did not start: $(tail -n 3 "$dir/log/munged.log")"
    cat >"$dir/slurm.conf" <<EOF
ClusterName=wscat-test
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/run/munge.sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
SchedulerParameters=sched_interval=1
SlurmctldTimeout=30
SlurmdTimeout=30
MinJobAge=300
SlurmdParameters=config_overrides
${gres}NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem$node_gres State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
    export SLURM_CONF=$dir/slurm.conf
    if [ -e /etc/slurm/slurm.conf ] && ! [ -L /etc/slurm/slurm.conf ]; then
        stop "$dir"
        die "/etc/slurm/slurm.conf exists (a real cluster's?); not replaced: use a machine without one"
    fi
    if [ -L /etc/slurm/slurm.conf ] && [ -e /etc/slurm/slurm.conf ]; then
        stop "$dir"
        die "/etc/slurm/slurm.conf links to $(readlink /etc/slurm/slurm.conf): stop that cluster first"
    fi
    mkdir -p /etc/slurm
    ln -sfn "$dir/slurm.conf" /etc/slurm/slurm.conf
    /usr/sbin/slurmctld -f "$dir/slurm.conf" -i \
        || die "slurmctld did not start: $(tail -n 3 "$dir/log/slurmctld.log")"
    /usr/sbin/slurmd -f "$dir/slurm.conf" -N "$node" \
        || die "slurmd did not start: $(tail -n 3 "$dir/log/slurmd.log")"
    for i in $(seq 60); do
        if [ "$(sinfo -h -n "$node" -o %t 2>/dev/null)" = idle ]; then
            echo "SLURM_CONF=$dir/slurm.conf"
            return 0
        fi
        sleep 1
    done
    die "node $node not idle after 60 s: $(sinfo 2>&1 | tail -n 2); see $dir/log/"
}

stop() {
    local dir name pid i
    dir=$(cd "$1" && pwd) || die "no cluster folder $1"
    # Jobs first: a job step outlives slurmd (a test cut short by its time limit left one running).
    if [ -f "$dir/run/slurmctld.pid" ] && command -v scancel >/dev/null; then
        SLURM_CONF="$dir/slurm.conf" scancel --full --quiet --user "$(id -un)" 2>/dev/null || true
        for i in $(seq 25); do
            [ -z "$(SLURM_CONF="$dir/slurm.conf" squeue --noheader 2>/dev/null)" ] && break
            sleep 0.2
        done
    fi
    for name in slurmd slurmctld munged; do
        [ -f "$dir/run/$name.pid" ] || continue
        pid=$(cat "$dir/run/$name.pid")
        kill "$pid" 2>/dev/null || continue
        for i in $(seq 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.2
        done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
        rm -f "$dir/run/$name.pid"
    done
    if [ "$(readlink /etc/slurm/slurm.conf 2>/dev/null)" = "$dir/slurm.conf" ]; then
        rm -f /etc/slurm/slurm.conf
    fi
    return 0
}

case "${1:-}" in
    install) install ;;
    start) [ $# = 2 ] || die "usage: $0 start DIR"; start "$2" ;;
    stop) [ $# = 2 ] || die "usage: $0 stop DIR"; stop "$2" ;;
    *) die "usage: $0 install | start DIR | stop DIR" ;;
esac
