# Sourced by the netns tests that run three hosts (tcp_link_cut_netns.sh, tcp_survives_netns.sh):
# one `reel launch` of one rank of `reel train` per namespace $name-r0..2, rank 0's address as the
# coordinator. The caller sets reel, here, name, work (holding config.pbtxt), coordinator and an
# array pids (killed by its cleanup), and may set an array launch_flags (e.g. --keep-going) for
# every launch; functions only, nothing runs on sourcing.
# shellcheck shell=bash disable=SC2154 # the caller sets reel, here, name, work, coordinator

# start_nodes LOG EXTRA...: one `reel launch` per namespace (rank r's output in $work/LOG$r.log),
# each running `reel train --config $work/config.pbtxt EXTRA...`, under `timeout 180` (only a hang
# reaches it).
start_nodes() {
  local log=$1 r
  shift
  # One job identity per start, shared by its three launches (reel launch requires one across
  # nodes); a later start (a resume) is a new job.
  local job_id="netns-$$-$log-$RANDOM"
  for r in 0 1 2; do
    REEL_JOB_ID=$job_id timeout 180 ip netns exec "$name-r$r" "$reel" launch -n 1 --nnodes 3 --node-rank "$r" \
      --coordinator "$coordinator" --grace-seconds 10 ${launch_flags[@]+"${launch_flags[@]}"} -- \
      reel train --config "$work/config.pbtxt" "$@" >"$work/$log$r.log" 2>&1 &
    pids+=($!)
  done
}
# wait_nodes: waits for every launch; their exit statuses in codes[0..2].
wait_nodes() {
  local r code
  codes=()
  for r in 0 1 2; do
    code=0
    wait "${pids[$r]}" || code=$?
    codes+=("$code")
  done
  pids=()
}
show_logs() {
  local r
  for r in 0 1 2; do
    echo "---- node $r (namespace $name-r$r, $("$here/netns.sh" addr "$r"))"
    cat "$work/node$r.log"
  done
}
fail() { echo "FAIL: $*"; show_logs; exit 1; }
# nodes_alive WHAT: fails naming the first launch that has ended before WHAT.
nodes_alive() {
  local r
  for r in 0 1 2; do kill -0 "${pids[$r]}" 2>/dev/null || fail "node $r ended before $1"; done
}
