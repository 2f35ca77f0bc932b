#!/usr/bin/env bash
# usage: check_deb.sh BUILD_DIR
# `cpack -G DEB` makes a Debian package of the build: it holds the reel command, libreel, the
# plugins, the SDK and the templates under /usr; its Depends come from dpkg-shlibdeps; and the
# command unpacked from it runs and loads every plugin it carries, none rejected. (Installing it
# with apt-get on a clean bookworm root is scripts/fresh-machine-check.sh --deb.)
set -euo pipefail
build=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$build" && cpack -G DEB -B "$work/out" >"$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; exit 1; }
deb=$(ls "$work"/out/reel_*.deb)
echo "$(basename "$deb"): $(du -h "$deb" | cut -f1)"
info=$(dpkg-deb -I "$deb")
grep -E "^ (Package|Version|Depends):" <<<"$info"
grep -q "^ Package: reel$" <<<"$info"
grep -q "^ Depends: .*libprotobuf" <<<"$info"  # found by dpkg-shlibdeps in libreel
contents=$(dpkg-deb -c "$deb" | awk '{print $6}')
for f in ./usr/bin/reel ./usr/lib/libreel.so ./usr/include/reel/plugin.h \
         ./usr/lib/cmake/reel/reelConfig.cmake ./usr/lib/cmake/reel/reelConfigVersion.cmake \
         ./usr/lib/pkgconfig/reel.pc; do
  grep -qx "$f" <<<"$contents" || { echo "the package lacks $f" >&2; exit 1; }
done
plugins=$(grep -c '^./usr/lib/reel/plugins/libreel_.*\.so$' <<<"$contents" || true)
built=$(ls "$build"/lib/reel/plugins/libreel_*.so | wc -l)
test "$plugins" -eq "$built" || { echo "the package has $plugins plugins, the build $built" >&2; exit 1; }
dpkg-deb -x "$deb" "$work/root"
out=$("$work/root/usr/bin/reel" plugins)
if grep -q "rejected files" <<<"$out"; then echo "$out" >&2; exit 1; fi
grep -q "plugins ($built):" <<<"$out"
grep -q "$work/root/usr/lib/reel/plugins" <<<"$out"
"$work/root/usr/bin/reel" version
# The Python module (REEL_PYTHON): in the system Python's path, importable from the unpacked
# package, loading the package's libreel and plugins.
if ls "$build"/python/reel/_reel*.so >/dev/null 2>&1; then
  site=$(grep -o '^./usr/lib/python3[^/]*/dist-packages/reel/__init__.py$' <<<"$contents" | head -1)
  test -n "$site" || { echo "the package lacks the Python module reel" >&2; exit 1; }
  site=$work/root/${site#./}
  site=${site%/reel/__init__.py}
  found=$(cd "$work" && PYTHONPATH=$site /usr/bin/python3 -c \
    'import reel; print(reel.__file__); [print(p["path"]) for p in reel.plugins()]')
  grep -q "^$site/reel/__init__.py$" <<<"$found"
  test "$(grep -c "^$work/root/usr/lib/reel/plugins/" <<<"$found")" -eq "$built" ||
    { echo "import reel from the package loaded: $found" >&2; exit 1; }
  echo "the package's Python module imports and loads the same $built plugins"
fi
echo "the package's reel loads its $built plugins from its own /usr/lib/reel/plugins"
