#!/usr/bin/env bash
# usage: check_headers_test.sh SOURCE_DIR
# scripts/check-headers.sh on small git repositories, one rule per case: an include guard that
# does not follow the header's path (a file moved without its guard), a #define or closing #endif
# that names another guard, an SDK header without a file comment or with an undocumented
# declaration each fail the check naming file and line; documented headers pass, and so does
# this repository.
set -euo pipefail
src=$1
check="$src/scripts/check-headers.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
. "$(dirname "$0")/repo_fixtures.sh"  # new_repo, put, expect_flagged, expect_clean

# header GUARD [BODY...]: a header with a file comment, guarded by GUARD, around BODY's lines.
header() {
  local guard=$1
  shift
  printf '// What this header is for.\n#ifndef %s\n#define %s\n' "$guard" "$guard"
  printf '%s\n' "$@"
  printf '#endif  // %s' "$guard"
}

# A plugin header moved into src/ that kept its old guard.
r=$(new_repo repo); put "$r" plugins/x/src/wire.h "$(header REEL_PLUGINS_X_WIRE_H_)"
expect_flagged "$r" plugins/x/src/wire.h:2
# A public header's guard comes from its include path (reel/...), not the repository path.
r=$(new_repo repo); put "$r" sdk/include/reel/x.h "$(header REEL_SDK_INCLUDE_REEL_X_H_)"
expect_flagged "$r" sdk/include/reel/x.h:2
# The #define and the closing #endif must name the same guard.
r=$(new_repo repo)
put "$r" core/a.h "$(printf '// a\n#ifndef REEL_CORE_A_H_\n#define REEL_CORE_B_H_\n#endif  // REEL_CORE_A_H_')"
expect_flagged "$r" core/a.h:3
r=$(new_repo repo)
put "$r" core/a.h "$(printf '// a\n#ifndef REEL_CORE_A_H_\n#define REEL_CORE_A_H_\n#endif  // REEL_CORE_OLD_H_')"
expect_flagged "$r" core/a.h:4
r=$(new_repo repo); put "$r" core/a.h "// no guard at all"
expect_flagged "$r" core/a.h:1
# An SDK header without a file comment, and one with an undocumented class.
r=$(new_repo repo)
put "$r" sdk/include/reel/a.h "$(printf '#ifndef REEL_A_H_\n#define REEL_A_H_\n#endif  // REEL_A_H_')"
expect_flagged "$r" sdk/include/reel/a.h:1
r=$(new_repo repo)
put "$r" sdk/include/reel/a.h "$(header REEL_A_H_ 'namespace reel {' '' '// Documented.' \
  'struct A {};' '' 'class B {' ' public:' '  void F();' '};' '' '}  // namespace reel')"
expect_flagged "$r" sdk/include/reel/a.h:9

# Clean: one comment over a block of declarations, a trailing comment, members and out-of-line
# definitions (documented where declared), template specialisations under one comment, macros
# continued over lines; headers outside sdk/include/reel need no declaration comments.
r=$(new_repo repo)
put "$r" sdk/include/reel/a.h "$(header REEL_A_H_ 'namespace reel {' '' '// The errors.' \
  'inline int A() { return 1; }' 'inline int B() { return 2; }' '' \
  'struct C { int x; };  // a value' '' '// A class.' 'class D {' ' public:' '  int F();' \
  '  int G() { return 0; }' '};' '' 'inline int D::F() { return 1; }' '' \
  '// Factory types by kind.' 'template <typename T> struct K;' \
  'template <> struct K<int> { using type = int; };' '' '}  // namespace reel' '' \
  '// A macro.' '#define REEL_M(x) \' '  do {      \' '    (x);    \' '  } while (0)')"
put "$r" core/src/b.h "$(header REEL_CORE_SRC_B_H_ 'struct Undocumented {};')"
put "$r" libs/l/include/reel/l/c.h "$(header REEL_L_C_H_)"
expect_clean "$r" "documented SDK header, guards from include root and repository path"

# The real tree.
expect_clean "$src" "this repository"

if ((failures)); then
  echo "$failures case(s) failed"
  exit 1
fi
