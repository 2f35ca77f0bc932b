# Sourced by build.sh and fuzz.sh (from the repository's root): compile through ccache, which
# scripts/install-deps.sh installs, so that rebuilding sources that did not change costs a cache
# look-up instead of a compile, in this clone or in any other clone of the same tree on the machine
# (a developer's worktrees; CI's fresh clone of a commit that was built here before). Objects are
# keyed by their preprocessed source and flags, so a changed header or flag recompiles as before.
# Sets ccache_args (cmake arguments); REEL_CCACHE=0 builds without it.
# shellcheck shell=bash disable=SC2034 # ccache_args: read by the scripts that source this file
if [[ "${REEL_CCACHE:-1}" != 0 ]] && command -v ccache >/dev/null 2>&1; then
  # Paths inside the clone, and the build directory itself, hash alike in every clone (the line
  # tables of a cached object may then name the clone that first compiled it).
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(pwd -P)}"
  export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
  # Room for every build test.sh makes (release, two sanitizers, fuzz) a few times over.
  export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-10G}"
  ccache_args=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
else
  ccache_args=(-DCMAKE_C_COMPILER_LAUNCHER= -DCMAKE_CXX_COMPILER_LAUNCHER=)
fi
