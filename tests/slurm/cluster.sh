#!/usr/bin/env bash
# A Slurm cluster on this machine, for tests: Debian's munged, slurmctld and slurmd, each slurmd
# in a simulated host of its own (tests/netns/netns.sh: a network namespace on a bridge, plus a
# UTS namespace so that its host name is its node name), all configured by a generated slurm.conf
# in WORK and sharing nothing with a system Slurm or munge.
#
#   cluster.sh up NAME WORK NODES   start munged, slurmctld on host "head" (10.77.0.1) and
#                                   slurmd on node01 .. nodeNN (10.77.0.2 ..), each with the CPUs
#                                   of this machine and ports 12000-12999 to reserve for steps
#                                   (MpiParams=ports); wait until every node is idle
#   cluster.sh down NAME WORK       stop the daemons and delete the namespaces (idempotent; trap it)
#   cluster.sh run NAME WORK CMD... run CMD (srun, sbatch, scancel ...) on "head" with SLURM_CONF
#
# Host names resolve on every simulated host through WORK/hosts, mounted over its /etc/hosts. Exit status 77: cannot run here (not root, no
# namespaces, Slurm or munge not installed).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
netns=$here/../netns/netns.sh
readonly kSkip=77

die() { echo "cluster.sh: $*" >&2; exit 1; }
skip() { echo "cluster.sh: cannot run Slurm here: $*" >&2; exit $kSkip; }

node_name() { printf 'node%02d' "$1"; }

write_config() {  # WORK NODES
  local work=$1 nodes=$2 cpus
  cpus=$(nproc)
  mkdir -p "$work/state" "$work/log"
  for ((i = 1; i <= nodes; i++)); do mkdir -p "$work/spool/$(node_name "$i")"; done
  cat >"$work/slurm.conf" <<CONF
ClusterName=reeltest
SlurmctldHost=head($("$netns" addr 0))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$work/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool/%n
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd-%n.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd-%n.log
PlugStackConfig=$work/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
MpiDefault=none
MpiParams=ports=12000-12999
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SwitchType=switch/none
ReturnToService=2
JobRequeue=1
KillWait=5
MinJobAge=600
SlurmctldTimeout=30
SlurmdTimeout=60
MessageTimeout=20
CONF
  for ((i = 1; i <= nodes; i++)); do
    echo "NodeName=$(node_name "$i") NodeAddr=$("$netns" addr "$i") CPUs=$cpus State=UNKNOWN" \
      >>"$work/slurm.conf"
  done
  echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >>"$work/slurm.conf"
  : >"$work/plugstack.conf"
}

hosts_file() {  # NAME NODES: the names of every simulated host, for their /etc/hosts
  echo "127.0.0.1 localhost"
  echo "$("$netns" addr 0) head"
  for ((i = 1; i <= $2; i++)); do echo "$("$netns" addr "$i") $(node_name "$i")"; done
}

# CMD in simulated host I, named HOST, with the cluster's configuration: in the host's network
# namespace (nsenter, not `ip netns exec`, which would remount /sys and hide the cgroup hierarchy
# slurmd needs), with a UTS and a mount namespace of its own for its name and /etc/hosts.
# Each host has a /tmp of its own (WORK/tmp/HOST), as real nodes do: Slurm's PMIx plugin keeps
# per-step directories there that would collide. So WORK itself must not be under /tmp, and the
# checkout and the build (which may be, e.g. a clone in /tmp) are carried into the host's /tmp at
# their own paths: bound aside first, then back in place once /tmp is the host's.
# shellcheck disable=SC2016 # the single-quoted parts are expanded by the inner sh
in_host() {  # NAME WORK I HOST CMD...
  local name=$1 work=$2 i=$3 host=$4
  shift 4
  mkdir -p "$work/tmp/$host" && chmod 1777 "$work/tmp/$host"
  local keep=() k n=0 script='mount --bind "$0" /etc/hosts'
  for k in "$(realpath "$here/../..")" ${REEL_SLURM_BUILD:+"$(realpath "$REEL_SLURM_BUILD")"}; do
    [[ $k == /tmp/* ]] || continue
    mkdir -p "$work/keep/$host/$n"
    keep+=("$k")
    script+=" && mount --bind '$k' '$work/keep/$host/$n'"
    n=$((n + 1))
  done
  script+=' && mount --bind "$1" /tmp'
  for ((k = 0; k < n; k++)); do
    script+=" && mkdir -p '${keep[k]}' && mount --bind '$work/keep/$host/$k' '${keep[k]}'"
  done
  script+=' && hostname "$2" && shift 2 && exec "$@"'
  SLURM_CONF=$work/slurm.conf nsenter --net="/run/netns/$name-r$i" unshare --mount --uts \
    sh -c "$script" "$work/hosts" "$work/tmp/$host" "$host" "$@"
}

up() {
  local name=$1 work=$2 nodes=$3
  ((EUID == 0)) || skip "not root"
  for tool in munged slurmctld slurmd srun sbatch scontrol unshare nsenter; do
    command -v "$tool" >/dev/null || skip "$tool is not installed (scripts/install-deps.sh)"
  done
  mkdir -p "$work" && chmod 700 "$work"
  # Each host binds the cluster's names over /etc/hosts. A machine with none (a debootstrap root)
  # gets an empty one: glibc resolves through an empty file as through a missing one.
  [[ -e /etc/hosts ]] || : >/etc/hosts
  [[ "$(realpath "$work")" != /tmp/* ]] || die "WORK '$work' is under /tmp, which every host has its own of"
  local status=0
  "$netns" up "$name" $((nodes + 1)) >/dev/null || status=$?
  ((status == kSkip)) && skip "no network namespaces"
  ((status == 0)) || die "netns.sh up failed"
  hosts_file "$name" "$nodes" >"$work/hosts"
  write_config "$work" "$nodes"
  mkdir -p "$work/munge" && chmod 700 "$work/munge"
  dd if=/dev/urandom of="$work/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$work/munge/munge.key"
  munged --force --socket="$work/munge/munge.socket" --key-file="$work/munge/munge.key" \
    --pid-file="$work/munge/munged.pid" --log-file="$work/log/munged.log" \
    --seed-file="$work/munge/munged.seed" || die "munged did not start ($work/log/munged.log)"
  in_host "$name" "$work" 0 head slurmctld -i >/dev/null 2>&1 ||
    die "slurmctld did not start: $(tail -5 "$work/log/slurmctld.log")"
  for ((i = 1; i <= nodes; i++)); do
    in_host "$name" "$work" "$i" "$(node_name "$i")" slurmd -N "$(node_name "$i")" >/dev/null 2>&1 ||
      die "slurmd on $(node_name "$i") did not start: $(tail -5 "$work/log/slurmd-$(node_name "$i").log")"
  done
  for ((t = 0; t < 60; t++)); do
    local idle
    idle=$(run "$name" "$work" sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l)
    ((idle == nodes)) && { echo "cluster.sh: $nodes node(s) idle"; return 0; }
    sleep 1
  done
  run "$name" "$work" sinfo -N -l >&2 || true
  die "the nodes did not become idle in 60 s (logs in $work/log)"
}

# Daemons by their pid files, then the namespaces; leaves the logs in WORK.
down() {
  local name=$1 work=$2 f
  for f in "$work"/slurmd-*.pid "$work/slurmctld.pid" "$work/munge/munged.pid"; do
    if [[ -f "$f" ]]; then kill "$(cat "$f")" 2>/dev/null || true; fi
  done
  sleep 1
  for f in "$work"/slurmd-*.pid "$work/slurmctld.pid" "$work/munge/munged.pid"; do
    if [[ -f "$f" ]]; then kill -9 "$(cat "$f")" 2>/dev/null || true; fi
  done
  # Tasks a slurmstepd left behind run in the nodes' namespaces.
  local ns pid
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${name}-r[0-9]+$" || true); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
  done
  "$netns" down "$name"
}

run() {
  local name=$1 work=$2
  shift 2
  in_host "$name" "$work" 0 head "$@"
}

cmd=${1:-}
shift || true
case "$cmd" in
  up) (($# == 3)) || die "usage: cluster.sh up NAME WORK NODES"; up "$@" ;;
  down) (($# == 2)) || die "usage: cluster.sh down NAME WORK"; down "$@" ;;
  run) (($# >= 3)) || die "usage: cluster.sh run NAME WORK CMD..."; run "$@" ;;
  *) die "usage: cluster.sh up NAME WORK NODES | down NAME WORK | run NAME WORK CMD..." ;;
esac
