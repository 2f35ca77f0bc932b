#!/usr/bin/env bash
# Installs the Debian bookworm packages reel needs. Idempotent; run as root. Skips apt entirely
# when everything is already installed. One list, two parts:
#   scripts/install-deps.sh --build   what building and running reel needs (scripts/demo.sh)
#   scripts/install-deps.sh           that and what the tests and benchmarks add (scripts/test.sh)
set -euo pipefail

# What building and running reel needs: the library, the reel command and every plugin.
build_packages=(
  build-essential cmake ninja-build pkg-config
  ccache  # scripts/ccache.sh: rebuilds of unchanged sources, in any clone, are cache look-ups
  libboost-dev libboost-filesystem-dev libeigen3-dev libdnnl-dev
  libprotobuf-dev protobuf-compiler libfmt-dev zlib1g-dev libcurl4-openssl-dev
  libopenmpi-dev openmpi-bin
  libssl-dev  # s3 plugin: SHA-256 of request payloads; reel launch --nnodes: the rendezvous' HMAC
  pybind11-dev python3-dev python3-numpy python3-pandas  # the Python module (python/)
  libgtest-dev libgmock-dev  # `reel plugins check` runs the transport conformance suite
)
# What the tests and benchmarks add.
test_packages=(
  git  # scripts/check-paths.sh reads the tracked files
  clang-format shellcheck  # CTest check_format, check_shell (tests/repo)
  iproute2  # tests/netns: ip netns, veth, bridge and tc tbf for simulated hosts
  slurmctld slurmd slurm-client munge  # tests/slurm: a Slurm cluster of simulated hosts
  debootstrap  # scripts/fresh-machine-check.sh builds an empty Debian root
  libbenchmark-dev
  libgloo-dev  # bench/allreduce: Gloo's TCP ring, the peer of reel tcp
  # The ASan + UBSan build and the libFuzzer targets (tests/fuzz/, scripts/fuzz.sh) use clang;
  # clang's OpenMP is LLVM's (gcc brings its own libgomp).
  clang libclang-rt-14-dev libomp-dev
  python3 python3-torch libopenblas0-pthread python3-numpy
  python3-sklearn  # bench/tune: GridSearchCV, the peer of reel tune
  python3-pytest python3-optuna  # the Python module's tests (python/tests/, label python)
  python3-pip python3-setuptools python3-wheel python3-venv  # `pip install .` (docs/python.md), python_test_wheel
  mypy  # its stubtest compares python/reel/*.pyi with the module (python_test_stubs)
  awscli
)

case ${1:-} in
  --build) packages=("${build_packages[@]}") ;;
  "") packages=("${build_packages[@]}" "${test_packages[@]}") ;;
  *) echo "usage: scripts/install-deps.sh [--build]" >&2; exit 2 ;;
esac

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
if [[ ${1:-} != --build ]] && ! command -v npm >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends nodejs npm
fi
