#!/usr/bin/env bash
# Starts or stops a local s3rver (installed by scripts/install-s3rver.sh) on a free port of
# loopback, or of the address REEL_S3RVER_ADDRESS (a simulated host's, bench/plan/validate.sh).
#   scripts/s3rver.sh start STATE_DIR BUCKET   # prints the endpoint, e.g. http://127.0.0.1:41234
#   scripts/s3rver.sh stop STATE_DIR [keep]    # kills it and removes STATE_DIR (keep: its objects
#                                              # stay for the next start on STATE_DIR)
# Credentials are s3rver's built-in S3RVER / S3RVER. Used by bench/s3/run_s3_read.sh.
set -euo pipefail
address=${REEL_S3RVER_ADDRESS:-127.0.0.1}

dir_s3rver="${REEL_S3RVER_DIR:-$HOME/.cache/reel/s3rver}"
entry="$dir_s3rver/node_modules/s3rver/bin/s3rver.js"

case "${1:-}" in
  start)
    state="$2" bucket="$3"
    [[ -f "$entry" ]] || { echo "s3rver.sh: $entry missing; run scripts/install-s3rver.sh" >&2; exit 1; }
    mkdir -p "$state/data"
    # s3rver's continuation tokens use DES, which OpenSSL 3 keeps in its legacy provider.
    node --openssl-legacy-provider "$entry" -d "$state/data" -a "$address" -p 0 --silent \
      --configure-bucket "$bucket" >"$state/log" 2>&1 &
    echo $! >"$state/pid"
    for _ in $(seq 1 600); do
      if port=$(grep -o "listening on $address:[0-9]*" "$state/log" 2>/dev/null | sed 's/.*://'); then
        echo "http://$address:$port"
        exit 0
      fi
      kill -0 "$(cat "$state/pid")" 2>/dev/null || { cat "$state/log" >&2; exit 1; }
      sleep 0.05
    done
    echo "s3rver.sh: no answer within 30 s" >&2
    exit 1
    ;;
  stop)
    state="$2"
    if [[ -f "$state/pid" ]]; then
      pid=$(cat "$state/pid")
      kill "$pid" 2>/dev/null || true
      while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
    fi
    if [[ ${3:-} == keep ]]; then rm -f "$state/pid" "$state/log"; else rm -rf "$state"; fi
    ;;
  *)
    echo "usage: $0 start STATE_DIR BUCKET | stop STATE_DIR [keep]" >&2
    exit 2
    ;;
esac
