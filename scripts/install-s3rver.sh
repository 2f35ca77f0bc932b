#!/usr/bin/env bash
# Installs s3rver (a local S3-compatible server from the npm registry) for the S3 plugin's tests
# and benchmark. Idempotent: does nothing when the pinned version is already there.
#   scripts/install-s3rver.sh            # into $REEL_S3RVER_DIR or ~/.cache/reel/s3rver
# The tests find it through $REEL_S3RVER_DIR (same default), so nothing lands in the repository.
# Then applies scripts/s3rver-fixes.js (two bugs of s3rver against S3's read-after-write
# guarantees; see that file), also to an install made before the fixes existed.
set -euo pipefail

version=3.7.1
dir="${REEL_S3RVER_DIR:-$HOME/.cache/reel/s3rver}"
entry="$dir/node_modules/s3rver/bin/s3rver.js"

if [[ -f "$entry" ]] &&
   [[ "$(node -p "require('$dir/node_modules/s3rver/package.json').version" 2>/dev/null)" == "$version" ]]; then
  echo "install-s3rver: s3rver $version already in $dir"
else
  command -v npm >/dev/null ||
    { echo "install-s3rver: npm not found (run scripts/install-deps.sh)" >&2; exit 1; }
  mkdir -p "$dir"
  [[ -f "$dir/package.json" ]] || echo '{"name":"reel-s3rver","private":true}' >"$dir/package.json"
  npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "s3rver@$version"
  echo "install-s3rver: installed $entry"
fi
node "$(dirname "$0")/s3rver-fixes.js" "$dir/node_modules/s3rver"
