#!/usr/bin/env bash
# Simulated hosts: one network namespace per rank, joined through veth pairs to a bridge that
# lives in a namespace of its own, each link limited with tc's token bucket filter (tbf). Nothing
# is created in the caller's namespace, so parallel runs with different NAMEs cannot collide and
# the addresses (10.77.0.0/24) exist only inside these namespaces.
#
#   netns.sh up NAME N [RATE]   create NAME-sw (the bridge) and NAME-r0 .. NAME-r{N-1};
#                               RATE is a tc rate such as 1gbit or 200mbit (default: no limit)
#   netns.sh down NAME          delete every namespace NAME-* (idempotent; use it in a trap)
#   netns.sh addr I             print rank I's address (10.77.0.I+1)
#   netns.sh rate NAME I RATE   limit rank I's link (both ways) to RATE instead
#   netns.sh exec NAME I CMD... run CMD in rank I's namespace (same as ip netns exec NAME-rI CMD)
#   netns.sh check              exit 0 if namespaces, veth, bridges and tbf can be created here
#
# Exit status 77 means "cannot create namespaces here" (not root, no iproute2, a kernel without
# veth/bridge/tbf): callers skip with the printed reason (CTest: SKIP_RETURN_CODE 77).
#
# Example (what tests/netns/tcp_train_netns.sh does):
#   name=reel$$; trap 'tests/netns/netns.sh down $name' EXIT
#   tests/netns/netns.sh up $name 3 1gbit
#   ip netns exec $name-r1 reel train ...      # reaches rank 0 at $(tests/netns/netns.sh addr 0)
set -euo pipefail

readonly kSubnet=10.77.0
readonly kSkip=77

die() { echo "netns.sh: $*" >&2; exit 1; }
skip() { echo "netns.sh: cannot create network namespaces here: $*" >&2; exit $kSkip; }

addr() { echo "$kSubnet.$(($1 + 1))"; }

# The token bucket must hold at least one GSO super-packet (64 KiB) and a timer tick's worth of
# bytes at the rate, or tbf drops what it should delay. It refills while the link is idle, so a
# message after a pause passes its first BURST bytes at the veth's speed: REEL_NETNS_BURST (a tc
# size, default 1mb: 8 ms at 1 Gbit/s, 80 ms at 100 Mbit/s) makes it smaller.
tbf() {  # NS DEV RATE
  ip -n "$1" link set "$2" up
  [[ -z "$3" ]] && return 0
  tc -n "$1" qdisc replace dev "$2" root tbf rate "$3" burst "${REEL_NETNS_BURST:-1mb}" \
    latency 100ms
}

up() {
  local name=$1 n=$2 rate=${3:-}
  [[ "$name" =~ ^[A-Za-z0-9_.-]{1,40}$ ]] || die "NAME '$name': letters, digits, . _ - only"
  [[ "$n" =~ ^[0-9]+$ ]] && ((n >= 1 && n <= 200)) || die "N '$n': a number of ranks in [1, 200]"
  ((EUID == 0)) || skip "not root"
  command -v ip >/dev/null && command -v tc >/dev/null || skip "iproute2 (ip, tc) is missing"
  local sw=$name-sw
  ip netns add "$sw" 2>/dev/null || skip "'ip netns add $sw' failed"
  ip -n "$sw" link set lo up
  ip -n "$sw" link add br0 type bridge 2>/dev/null || { down "$name"; skip "no bridge support"; }
  ip -n "$sw" link set br0 up
  for ((i = 0; i < n; i++)); do
    local ns=$name-r$i
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    # Both ends are created directly inside their namespaces: no name in the caller's namespace.
    ip link add eth0 netns "$ns" type veth peer name "p$i" netns "$sw" 2>/dev/null ||
      { down "$name"; skip "no veth support"; }
    ip -n "$ns" addr add "$(addr "$i")/24" dev eth0
    ip -n "$sw" link set "p$i" master br0
    # Each direction of the link is shaped where it leaves a device: the rank's uploads on eth0,
    # its downloads on the bridge port.
    tbf "$ns" eth0 "$rate" && tbf "$sw" "p$i" "$rate" ||
      { down "$name"; skip "tc tbf qdisc refused (rate '$rate')"; }
  done
  echo "netns.sh: $n namespaces $name-r0..$name-r$((n - 1)) on $kSubnet.0/24 via $sw${rate:+, links limited to $rate}"
}

rate() {  # NAME I RATE
  tbf "$1-r$2" eth0 "$3" && tbf "$1-sw" "p$2" "$3"
}

down() {
  local name=$1 ns
  [[ -n "$name" ]] || die "down needs NAME"
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${name}-(sw|r[0-9]+)$" || true); do
    ip netns del "$ns" 2>/dev/null || true
  done
}

check() {
  check_name=reel-netns-check-$$
  trap 'down "$check_name"' EXIT
  up "$check_name" 1 100mbit >/dev/null
}

cmd=${1:-}
shift || true
case "$cmd" in
  up) (($# >= 2)) || die "usage: netns.sh up NAME N [RATE]"; up "$@" ;;
  down) (($# == 1)) || die "usage: netns.sh down NAME"; down "$1" ;;
  addr) (($# == 1)) || die "usage: netns.sh addr I"; addr "$1" ;;
  rate) (($# == 3)) || die "usage: netns.sh rate NAME I RATE"; rate "$@" ;;
  exec) (($# >= 3)) || die "usage: netns.sh exec NAME I CMD..."; ns="$1-r$2"; shift 2
        exec ip netns exec "$ns" "$@" ;;
  check) check ;;
  *) die "usage: netns.sh up NAME N [RATE] | down NAME | addr I | rate NAME I RATE | exec NAME I CMD... | check" ;;
esac
