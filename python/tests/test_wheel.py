"""`pip wheel .` and the wheel installed into a fresh venv (docs/python.md): reel imports from the
venv alone (another folder, no PYTHONPATH), finds its own plugins and trains. The wheel takes the
binaries of the build under test (REEL_WHEEL_BUILD_DIR), so it costs a copy, not a build."""

import json
import os
import pathlib
import subprocess
import sys
import textwrap
import zipfile

import reel
from conftest import ROOT, SHARDS

BUILD = pathlib.Path(reel.__file__).resolve().parents[2]  # <build>/python/reel/__init__.py

PROGRAM = textwrap.dedent("""
    import json, sys
    import reel, reel.optuna
    r = reel.train({
        "data": {"name": "tfrecord", "options": {"files": sys.argv[1], "level": "video"}},
        "eval_data": {"name": "tfrecord", "options": {"files": sys.argv[2], "level": "video"}},
        "model": {"name": "logistic"},
        "optimizer": {"name": "sync", "options": {"rule": "adam"}},
        "trainer": {"steps": 3, "batch_size": 16, "num_classes": 3862,
                    "learning_rate": {"base": 0.005}}})
    print(json.dumps({"file": reel.__file__, "version": reel.__version__,
                      "plugins": {p["name"]: p["path"] for p in reel.plugins()},
                      "steps": r.steps, "videos": r.final_eval["videos"]}))
""")


def test_wheel_installs_into_a_venv_and_trains_from_elsewhere(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "REEL_PLUGIN_PATH", "PIP_USER")}
    env.update(REEL_WHEEL_BUILD_DIR=str(BUILD), PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps",
                    "-q", "-w", wheels, ROOT], env=env, check=True)
    [wheel] = wheels.glob("reel-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "reel/lib/libreel.so" in names and "reel/__init__.pyi" in names
    assert "reel/lib/reel/plugins/libreel_tfrecord.so" in names

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", venv],
                   check=True)
    python = venv / "bin" / "python"
    # The system's pip installs into the venv's interpreter (numpy comes from Debian).
    subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps",
                    wheel], env=env, check=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = subprocess.run([python, "-c", PROGRAM, SHARDS / "validate0000.tfrecord",
                          SHARDS / "validate0002.tfrecord"], cwd=elsewhere, env=env,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.splitlines()[-1])
    package = venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    assert got["file"] == str(package / "reel" / "__init__.py")
    assert got["version"] == reel.__version__
    assert {"tfrecord", "moe", "bilstm"} <= set(got["plugins"])
    for path in got["plugins"].values():
        assert path.startswith(str(package / "reel" / "lib" / "reel" / "plugins")), path
    assert got["steps"] == 3 and got["videos"] > 0
    assert not list(elsewhere.iterdir()), "the run wrote nothing where it ran"
