"""Fixtures of the Python module's tests: the build's `reel` command, the real shards and small
synthetic frame-level data made by `reel synth`. CTest runs these with PYTHONPATH=build/python
and REEL_BIN=build/bin/reel, from the repository root (python/CMakeLists.txt)."""

import json
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARDS = ROOT / "data" / "yt8m"


def reel_bin():
    return os.environ.get("REEL_BIN", str(ROOT / "build" / "bin" / "reel"))


def run_reel(*args, cwd=ROOT, check=True):
    p = subprocess.run([reel_bin(), *map(str, args)], cwd=cwd, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise AssertionError(f"reel {' '.join(map(str, args))}: {p.returncode}\n{p.stderr}")
    return p


def inspect_json(pattern):
    files = sorted(str(p) for p in pathlib.Path(pattern).parent.glob(pathlib.Path(pattern).name))
    out = run_reel("inspect", *files, "--json", "--limit", "100000").stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


@pytest.fixture(scope="session")
def frame_data(tmp_path_factory):
    """40 train and 16 test videos of 8 classes, frame level (rgb 1024, audio 128 bytes a frame)."""
    root = tmp_path_factory.mktemp("synth")
    run_reel("synth", "--out", root / "train", "--videos", 40, "--classes", 8, "--level", "frame",
             "--shards", 2, "--seed", 1, "--min-frames", 5, "--max-frames", 20)
    run_reel("synth", "--out", root / "test", "--videos", 16, "--classes", 8, "--level", "frame",
             "--shards", 1, "--seed", 2, "--min-frames", 5, "--max-frames", 20)
    return root


def moe_config(train, test, workdir, level="video", classes=3862, steps=12, features=None,
               model="logistic", checkpoints=True):
    """A small run of the moe plugin's `logistic` (or `moe`) model, the shape of
    configs/logistic.pbtxt, as a dict for reel.train; checkpoints in workdir/checkpoints (a
    logistic model's on 3862 classes is 53 MB: tests that need none write none)."""
    data = {"name": "tfrecord", "options": {"files": str(train), "level": level}}
    eval_data = {"name": "tfrecord", "options": {"files": str(test), "level": level}}
    model = {"name": model, "options": {"experts": 2} if model == "moe" else {}}
    if features:
        model["options"]["features"] = features
    return {
        "data": data, "eval_data": eval_data, "model": model,
        "optimizer": {"name": "sync", "options": {"rule": "adam"}},
        "trainer": {"steps": steps, "batch_size": 16, "seed": 1, "num_classes": classes,
                    "learning_rate": {"base": 0.005}, "log_every_steps": 4,
                    "checkpoint_dir": str(workdir / "checkpoints") if checkpoints else ""},
    }
