#!/usr/bin/env bash
# Installs the Debian bookworm packages reel needs to build, test and benchmark. Idempotent;
# run as root. Skips apt entirely when everything is already installed.
set -euo pipefail

packages=(
  # build
  build-essential cmake ninja-build pkg-config clang-format
  ccache  # scripts/ccache.sh: rebuilds of unchanged sources, in any clone, are cache look-ups
  libboost-dev libboost-filesystem-dev libeigen3-dev libdnnl-dev
  libprotobuf-dev protobuf-compiler libfmt-dev zlib1g-dev libcurl4-openssl-dev
  libopenmpi-dev openmpi-bin
  libssl-dev  # s3 plugin: SHA-256 of request payloads (OpenSSL EVP)
  pybind11-dev python3-dev python3-numpy python3-pandas  # the Python module (python/)
  # tests and benchmarks
  git  # scripts/check-paths.sh reads the tracked files
  iproute2  # tests/netns: ip netns, veth, bridge and tc tbf for simulated hosts
  slurmctld slurmd slurm-client munge  # tests/slurm: a Slurm cluster of simulated hosts
  debootstrap  # scripts/fresh-machine-check.sh builds an empty Debian root
  libgtest-dev libgmock-dev libbenchmark-dev
  libgloo-dev  # bench/allreduce: Gloo's TCP ring, the peer of reel tcp
  clang libclang-rt-14-dev  # libFuzzer targets (tests/fuzz/, scripts/fuzz.sh)
  python3 python3-torch libopenblas0-pthread python3-numpy
  python3-sklearn  # bench/tune: GridSearchCV, the peer of reel tune
  python3-pytest python3-optuna  # the Python module's tests (python/tests/, label python)
  awscli
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
# The S3 tests run s3rver (npm). Machines may carry a vendor Node.js that bundles npm; only when
# there is no npm at all do we take Debian's.
if ! command -v npm >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends nodejs npm
fi
