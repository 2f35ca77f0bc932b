#!/usr/bin/env bash
# The README's two commands on a machine where only the repository exists: builds a minimal Debian
# root with debootstrap (same mirror and suite as this host's apt sources), copies this working
# tree's tracked files into it as a clone under root's home (~/reel), and runs
# `bash scripts/demo.sh`, then `bash scripts/test.sh` there with chroot, in the README's order (the
# demo's build and ccache's ~/.cache beside the clone are what the tests then start from). Prints the time of each phase and the CTest summaries.
# Takes about an hour on 2 cores: too slow for every CI run, run it by hand (as root).
#
# usage: scripts/fresh-machine-check.sh [--reuse] [--only deps|demo|test|deb] [--deb] [--clean] [ROOT]
#   ROOT      where the root is built; default /var/tmp/reel-fresh-root. Must not exist, or be a
#             root made by this script (with --reuse).
#   --reuse   use an existing ROOT (skip debootstrap; the tree replaces the old one, whose build
#             directories stay): for rerunning a failed part without starting over.
#   --only P  run only the demo, the test or the deb phase (deb needs the demo's build: --reuse), or
#             the deps phase: the install steps the two commands begin with (install-deps.sh,
#             check-paths.sh, install-s3rver.sh), minutes instead of an hour, for a change to an
#             install step alone; the full run does them within demo and test.
#   --deb     after the other phases, the Debian package: `cpack -G DEB` of the demo's build, then
#             in a second fresh root (ROOT.deb, deleted at the end) `apt-get install` of the .deb
#             alone (its Depends from the mirror) and `reel demo` from /usr.
#   --install-deb FILE
#             (what --deb runs) no tree: in a fresh ROOT, install FILE with apt-get and run
#             `reel version`, `reel plugins` and `reel demo` from /usr.
#   --clean   delete ROOT at the end (kept by default, for --reuse and for looking around).
#
# The root trusts what this host trusts: its CA certificates, the files named by its TLS
# environment variables (passed in too), npm's cafile, its apt sources, keyrings and apt.conf.d
# (proxies, options), and /etc/resolv.conf. Mounts the root on itself, /proc, /sys (and the host's
# /sys/fs/cgroup), /dev, /dev/pts,
# /dev/shm and a tmpfs on /run (`ip netns` needs a mount point at / and a writable /run/netns);
# unmounts them on exit, also on failure.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
root=/var/tmp/reel-fresh-root reuse=0 only="" clean=0 deb=0 install_deb=""
while (($#)); do
  case $1 in
    --reuse) reuse=1 ;;
    --only) only=${2:?--only needs demo, test or deb}; shift ;;
    --deb) deb=1 ;;
    --install-deb) install_deb=$(realpath "${2:?--install-deb needs a .deb file}"); shift ;;
    --clean) clean=1 ;;
    -h | --help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fresh-machine-check: unknown option $1" >&2; exit 2 ;;
    *) root=$1 ;;
  esac
  shift
done
case $only in "" | deps | demo | test | deb) ;; *) echo "fresh-machine-check: --only takes deps, demo, test or deb, not '$only'" >&2; exit 2 ;; esac
[[ $only != deb ]] || deb=1
if [[ -n $install_deb && ! -f $install_deb ]]; then
  echo "fresh-machine-check: --install-deb $install_deb: no such file" >&2
  exit 2
fi
if ((EUID != 0)); then
  echo "fresh-machine-check: run as root (debootstrap, mount and chroot need it)" >&2
  exit 2
fi
command -v debootstrap >/dev/null || { echo "fresh-machine-check: needs debootstrap (apt-get install debootstrap)" >&2; exit 2; }
root=$(realpath -m "$root")
[[ $root != / ]] || { echo "fresh-machine-check: refusing ROOT=/" >&2; exit 2; }
marker=$root/.reel-fresh-root  # a root this script made: the only kind --reuse and --clean touch
if [[ -e $root ]] && { ((!reuse)) || [[ ! -e $marker ]]; }; then
  echo "fresh-machine-check: $root exists; pass --reuse for a root made by this script, or another ROOT" >&2
  exit 2
fi

start_all=$SECONDS phase_start=$SECONDS
declare -a timings=()
phase() {  # phase NAME: starts NAME's clock
  current_phase=$1
  echo "== [$(date +%T)] $1"
  phase_start=$SECONDS
}
phase_done() {  # phase_done NAME STATUS
  local s=$((SECONDS - phase_start))
  timings+=("$(printf '%-12s %3dm%02ds  %s' "$1" $((s / 60)) $((s % 60)) "$2")")
}

# --- summary --------------------------------------------------------------------------------------
summary_printed=0
summary() {
  summary_printed=1
  echo
  echo "== fresh-machine-check summary: ${commit:-}, ${suite:-}, $(date -u +%FT%TZ)"
  printf '  %s\n' "${timings[@]}"
  local t=$((SECONDS - start_all))
  echo "  total        $((t / 60))m$(printf %02d $((t % 60)))s"
  if [[ -f ${log_dir:-/nonexistent}/test.log && ${only:-test} == test ]]; then
    echo "  CTest:"
    grep -E "tests passed|tests failed out of|Total Test time|The following tests FAILED|^\[[0-9:]+\][[:space:]]+[0-9]+ - " \
      "$log_dir/test.log" | sed 's/^/    /' || true
  fi
  echo "  packages in scripts/install-deps.sh (both parts) at this run:"
  sed -n '/^[a-z_]*packages=(/,/^)/p' "$repo/scripts/install-deps.sh" | grep -v '^[a-z_]*packages=(\|^)' |
    sed 's/#.*//' | tr -s ' \n' ' ' | sed 's/^ //' | fold -s -w 90 | sed 's/^/    /'
  echo
}
# --- mounts, removed on any exit ------------------------------------------------------------------
mounted=()
# shellcheck disable=SC2317 # run by the EXIT trap below
cleanup() {
  local rc=$?
  if ((rc != 0 && !summary_printed)); then
    timings+=("(interrupted or failed in: ${current_phase:-setup})")
    summary
  fi
  # Processes still running inside the root (a test's server, a hung run) were started by this
  # script: end them by id so the mounts can go.
  local proc
  for proc in /proc/[0-9]*; do
    if [[ $(readlink "$proc/root" 2>/dev/null) == "$root" ]]; then kill -9 "${proc#/proc/}" 2>/dev/null || true; fi
  done
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    umount -R "${mounted[i]}" 2>/dev/null || umount -R -l "${mounted[i]}" 2>/dev/null ||
      echo "fresh-machine-check: could not unmount ${mounted[i]}" >&2
  done
  if ((clean)) && [[ -e $marker ]] && ! findmnt -rn -o TARGET | grep -q "^$root/"; then
    rm -rf --one-file-system "$root"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mount_in() {  # mount_in TARGET MOUNT-ARGS...: mounts under the root and remembers it
  mkdir -p "$root$1"
  mount "${@:2}" "$root$1"
  mounted+=("$root$1")
  # Where / is shared (systemd), a bind joins the host mount's peer group and unmounting the copy
  # could unmount the host's own /dev/pts: receive from the host, never send back.
  mount --make-rslave "$root$1"
}

# --- the host's apt sources: mirror and suite for debootstrap -------------------------------------
host_sources=$(ls /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
# First "deb" entry of the distribution itself (a suite without "-updates"/"-security").
read -r mirror suite < <(
  for f in $host_sources; do
    if [[ $f == *.sources ]]; then
      awk 'BEGIN{RS=""; FS="\n"} {t=u=s=""; for(i=1;i<=NF;i++){ if($i ~ /^[ \t]*#/) continue;
             if($i ~ /^Types:/) t=$i; if($i ~ /^URIs:/) u=$i; if($i ~ /^Suites:/) s=$i; }
           if (t ~ /(^|[ \t])deb([ \t]|$)/ && u != "" && s != "") {
             sub(/^URIs:[ \t]*/, "", u); sub(/^Suites:[ \t]*/, "", s);
             split(u, us, /[ \t]+/); n = split(s, ss, /[ \t]+/);
             for (j=1;j<=n;j++) if (ss[j] !~ /-/) print us[1], ss[j] } }' "$f"
    else
      awk '$1=="deb" { i=2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
                       if ($(i+1) !~ /-/) print $i, $(i+1) }' "$f"
    fi
  done | head -n 1
)
if [[ -z ${mirror:-} || -z ${suite:-} ]]; then
  echo "fresh-machine-check: no Debian 'deb' source found in $host_sources" >&2
  exit 2
fi

commit=$(git -C "$repo" rev-parse --short HEAD)
git -C "$repo" diff --quiet HEAD -- 2>/dev/null || commit+=" + uncommitted changes"
echo "fresh-machine-check: $repo ($commit) in $root; $suite from $mirror; $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"

# --- 1. debootstrap -------------------------------------------------------------------------------
if [[ -e $marker ]]; then
  echo "== reusing $root (made $(cat "$marker"))"
else
  phase "debootstrap --variant=minbase $suite"
  mkdir -p "$root"
  debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$root.debootstrap.log" 2>&1 || {
    tail -n 30 "$root.debootstrap.log" >&2
    echo "fresh-machine-check: debootstrap failed, log in $root.debootstrap.log" >&2
    exit 1
  }
  date -u +%FT%TZ >"$marker"
  phase_done debootstrap ok
fi

# --- 2. what the host trusts, and the tree --------------------------------------------------------
phase "prepare: trust, apt configuration, the tree"
# apt: the host's sources (only what apt reads), the keyrings they name, its configuration.
rm -f "$root/etc/apt/sources.list"
for f in $host_sources; do cp -L "$f" "$root$f"; done
# shellcheck disable=SC2086 # host_sources: the file names ls gave, one a word
while IFS= read -r k; do
  [[ ! -f $k ]] || install -D -m 644 "$k" "$root$k"
done < <(grep -h -o -E 'signed-by[=:][[:space:]]*[^] ]+' -i $host_sources 2>/dev/null | sed -E 's/^[^=:]*[=:][[:space:]]*//')
cp -a /etc/apt/trusted.gpg.d/. "$root/etc/apt/trusted.gpg.d/" 2>/dev/null || true
cp -a /etc/apt/apt.conf.d/. "$root/etc/apt/apt.conf.d/"
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
# CA certificates: the bundle and hashed links, and the local CAs (update-ca-certificates, run
# when ca-certificates is installed in the root, keeps /usr/local ones in the bundle).
mkdir -p "$root/etc/ssl" "$root/usr/local/share/ca-certificates"
cp -a -L /etc/ssl/certs "$root/etc/ssl/" 2>/dev/null || cp -a /etc/ssl/certs "$root/etc/ssl/"
cp -a /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/"
# TLS environment variables that name a file or folder: copy it, pass the variable in.
pass_env=()
while IFS='=' read -r name value; do
  [[ $name =~ (^|_)(SSL|CA|CAS|CERT|CERTS|CAINFO|CAFILE|CAPATH|BUNDLE|ROOTS)(_|$) ]] || continue
  [[ $value == /* && -e $value ]] || continue
  if [[ -d $value ]]; then
    mkdir -p "$root$value"
    cp -a -L "$value/." "$root$value/" 2>/dev/null || true
  else
    install -D -m 644 "$value" "$root$value"
  fi
  pass_env+=("$name=$value")
done < <(env)
for name in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
  [[ -n ${!name:-} ]] && pass_env+=("$name=${!name}")
done
# npm's cafile (npm comes from Debian inside the root; the variable reaches any npm).
if command -v npm >/dev/null && cafile=$(npm config get cafile 2>/dev/null) && [[ $cafile == /* && -f $cafile ]]; then
  install -D -m 644 "$cafile" "$root$cafile"
  pass_env+=("npm_config_cafile=$cafile")
fi
[[ -n ${REEL_JOBS:-} ]] && pass_env+=("REEL_JOBS=$REEL_JOBS")
# The tracked files of the working tree (uncommitted edits included; no build or other untracked
# directories), indexed in a new git repository as a clone would be (check-paths reads the index),
# under root's home as a newcomer's clone would be.
home=/root clone=$home/reel
mkdir -p "$root$clone"
if [[ -n $install_deb ]]; then  # only the package goes in
  mkdir -p "$root/reel-pkg" && cp "$install_deb" "$root/reel-pkg/"
else
files=$(mktemp)
git -C "$repo" ls-files -z | (cd "$repo" && while IFS= read -r -d '' f; do
  [[ -e $f || -L $f ]] && printf '%s\0' "$f"; done) >"$files"
# A reused root keeps only its build directories (for an incremental build): files that the
# tree has moved or deleted since must not linger beside the new ones.
find "$root$clone" -mindepth 1 -maxdepth 1 ! -name 'build*' -exec rm -rf {} +
# --touch: every file gets the time of the copy, not the tree's, so that a reused root's build
# (whose outputs may be newer than an edit made while it ran) rebuilds whatever changed.
tar -C "$repo" --null -T "$files" -cf - | tar -C "$root$clone" --touch -xf -
rm -rf "$root$clone/.git"
git -C "$root$clone" init -q
git -C "$root$clone" add --pathspec-from-file="$files" --pathspec-file-nul
rm -f "$files"
fi
# The root is a mount point of its own: `ip netns exec` remounts / as a slave in a new mount
# namespace, which fails ("Invalid argument") when the chroot's / is a plain directory.
mount_in "" --bind "$root"
mount_in /proc -t proc proc
mount_in /sys -t sysfs sysfs
# A booted machine has its cgroups under /sys/fs/cgroup (systemd mounts them; slurmd's cgroup
# plugin, tests/slurm, needs them); a fresh sysfs has none: the host's, as they are.
if mountpoint -q /sys/fs/cgroup; then mount_in /sys/fs/cgroup --rbind /sys/fs/cgroup; fi
mount_in /dev --bind /dev
mount_in /dev/pts --bind /dev/pts
mount_in /dev/shm --bind /dev/shm
mount_in /run -t tmpfs -o mode=755 tmpfs
mkdir -p "$root/run/netns" "$root/run/lock"
phase_done prepare ok

# --- 3. the README's commands ---------------------------------------------------------------------
log_dir=$root/var/log/reel-fresh-check
mkdir -p "$log_dir"
run_in_root() {  # run_in_root NAME COMMAND: in the clone as a fresh root login would, timed lines
  chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=$home LANG=C.UTF-8 TERM=dumb "${pass_env[@]}" \
    /bin/bash -c "cd $clone && $2" 2>&1 |
    while IFS= read -r line; do printf '[%s] %s\n' "$(date +%T)" "$line"; done | tee "$log_dir/$1.log" &
  # In the background so a TERM to this script runs the cleanup at once (a foreground pipeline
  # would delay the trap until it ends); with pipefail this is the command's status.
  wait $!
}
status=0
declare -A result=()
phases=(demo test)
((deb)) && phases+=(deb)
[[ $only != deps ]] || phases=(deps)
[[ -z $install_deb ]] || phases=(install) only=""
pkg=/var/tmp/reel-deb  # where the deb phase leaves the package, inside the root
for p in "${phases[@]}"; do
  [[ -z $only || $only == "$p" ]] || continue
  phase "$p (log: $log_dir/$p.log)"
  rc=0
  case $p in
    demo | test) run_in_root "$p" "bash scripts/$p.sh" || rc=$? ;;
    deps)  # as test.sh begins, then the s3rver it installed must start (it refuses an unfixed one)
      run_in_root deps "scripts/install-deps.sh && scripts/check-paths.sh &&
        export REEL_S3RVER_DIR=\$HOME/.cache/reel/s3rver && scripts/install-s3rver.sh &&
        grep -rl 'reel: scripts/s3rver-fixes.js applied' \$REEL_S3RVER_DIR --include=*.js | head -3" || rc=$?
      ;;
    deb)
      run_in_root deb "cd build && rm -rf $pkg && cpack -G DEB -B $pkg >/dev/null && ls -l $pkg/*.deb" || rc=$?
      if ((rc == 0)); then
        debs=("$root$pkg"/reel_*.deb)
        bash "$repo/scripts/fresh-machine-check.sh" --install-deb "${debs[0]}" --clean "$root.deb" 2>&1 |
          sed 's/^/  [deb root] /' || rc=$?
      fi
      ;;
    install)
      run_in_root install "apt-get update -qq && apt-get install -y -qq /reel-pkg/$(basename "$install_deb") &&
        cd /tmp && command -v reel && reel version && reel plugins && reel demo --workdir /tmp/reel-demo" || rc=$?
      ;;
  esac
  if ((rc == 0)); then result[$p]=ok; else result[$p]="FAILED (exit $rc)" status=1; fi
  phase_done "$p" "${result[$p]}"
done

summary
exit "$status"
