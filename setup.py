"""Builds the wheel of the Python module reel with the project's CMake (docs/python.md).

The package holds the extension reel/_reel*.so (RUNPATH $ORIGIN/lib), libreel.so in reel/lib/
and the plugins in reel/lib/reel/plugins/: where libreel looks for them, <dir of libreel.so>/reel/
plugins (python/host.cc), as the command finds <exe>/../lib/reel/plugins. The shared libraries
they need (Boost, protobuf, oneDNN, ...) are Debian's: the wheel is for the system it is built on.

REEL_WHEEL_BUILD_DIR: an already configured build tree to take the binaries from (its targets
are brought up to date, it is not configured again); default build-wheel/, configured as
scripts/build.sh configures build/ (through ccache, so unchanged sources cost a cache look-up).
CMAKE_BUILD_PARALLEL_LEVEL: compile jobs (default: the cores).
"""

import glob
import os
import pathlib
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent
BUILD_DIR = pathlib.Path(os.environ.get("REEL_WHEEL_BUILD_DIR") or ROOT / "build-wheel")


(BUILD_DIR / "python-wheel").mkdir(parents=True, exist_ok=True)


def version():
    text = (ROOT / "CMakeLists.txt").read_text()
    return re.search(r"project\(reel VERSION (\S+)", text).group(1)


class CMakeBuild(build_ext):
    """Builds reel_installables (libreel, the command, the extension, the plugins) with CMake and
    lays them out in the package."""

    def run(self):
        build_dir = BUILD_DIR
        env = dict(os.environ, REEL_BUILD_TARGETS="reel_installables",
                   REEL_BUILD_DIR=str(build_dir))
        if os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL"):
            env["REEL_JOBS"] = os.environ["CMAKE_BUILD_PARALLEL_LEVEL"]
        if (build_dir / "CMakeCache.txt").exists() and os.environ.get("REEL_WHEEL_BUILD_DIR"):
            jobs = ["-j", env["REEL_JOBS"]] if "REEL_JOBS" in env else []
            self._run(["cmake", "--build", str(build_dir), *jobs, "--target", "reel_installables"],
                      env)
        else:
            self._run(["bash", str(ROOT / "scripts" / "build.sh"), "-DREEL_BUILD_TESTS=OFF",
                       "-DREEL_BUILD_BENCH=OFF", "-DREEL_PYTHON=ON",
                       f"-DPython_EXECUTABLE={sys.executable}"], env)
        self._lay_out(build_dir, pathlib.Path(self.build_lib) / "reel")
        if self.inplace:
            raise SystemExit("setup.py: no in-place build; use PYTHONPATH=build/python instead")

    def _run(self, cmd, env):
        print("setup.py:", " ".join(cmd), flush=True)
        subprocess.run(cmd, cwd=ROOT, env=env, check=True)

    def _lay_out(self, build_dir, package):
        lib = package / "lib"
        plugins = lib / "reel" / "plugins"
        plugins.mkdir(parents=True, exist_ok=True)
        extension = glob.glob(str(build_dir / "python" / "reel" / "_reel*.so"))
        if len(extension) != 1:
            raise SystemExit(f"setup.py: expected one reel/_reel*.so in {build_dir}/python, "
                             f"found {extension} (is REEL_PYTHON on in that build?)")
        files = [(pathlib.Path(extension[0]), package, "$ORIGIN/lib"),
                 (build_dir / "lib" / "libreel.so", lib, "")]
        files += [(pathlib.Path(p), plugins, "")
                  for p in sorted(glob.glob(str(build_dir / "lib" / "reel" / "plugins" / "*.so")))]
        for src, folder, rpath in files:
            dst = folder / src.name
            shutil.copyfile(src, dst)
            # The build tree's RUNPATH names the build folder; the package's is relative.
            self._run(["cmake", f"-DFILE={dst}", f"-DRPATH={rpath}", "-P",
                       str(ROOT / "cmake" / "SetRpath.cmake")], os.environ)
            subprocess.run(["strip", "--strip-debug", str(dst)], check=True)

    def get_outputs(self):
        return []


setup(
    version=version(),
    packages=["reel"],
    package_dir={"reel": "python/reel"},
    package_data={"reel": ["*.pyi", "py.typed"]},
    # A placeholder: CMakeBuild builds it, and it makes the wheel platform-specific.
    ext_modules=[Extension("reel._reel", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    # setuptools' own scratch files in the CMake build tree too, not in the sources.
    options={"build": {"build_base": str(BUILD_DIR / "python-wheel")},
             "egg_info": {"egg_base": str(BUILD_DIR / "python-wheel")}},
    zip_safe=False,
)
