#!/usr/bin/env python3
"""GAP with the gradient compressed on the wire (issue 52): 2 ranks on loopback train the same
config with `sync`'s compression none / bf16 / fp16, each with and without error feedback, for
several seeds, the settings alternated (their order rotates with the seed); every run from
scratch. Appends one JSON line per run (GAP@20, last logged loss, the setting, seed, CPU family
and model, load average, commit, command) to OUT.

  moe on the real shards (configs/moe.pbtxt, data/yt8m/):
    bench/compression/gap.py --build build --model moe --seeds 1 2 3
  bilstm_video on synthetic frame data (made once with `reel synth`, as bench/bf16/train_bf16.py
  makes it):
    bench/compression/gap.py --build build --model bilstm_video --synth --seeds 1 2 3

OUT defaults to bench/results/compression_gap_<UTC date>_<commit>.jsonl.
"""
import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "bench", "bf16"))
from run_bf16 import cpu_info  # noqa: E402

SETTINGS = {  # name: (compression, error_feedback)
    "none": ("none", "false"),
    "bf16": ("bf16", "false"),
    "bf16+ef": ("bf16", "true"),
    "fp16": ("fp16", "false"),
    "fp16+ef": ("fp16", "true"),
}


def commit():
    return subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()


def synth(reel, work, args):
    data = os.path.join(work, "data")
    subprocess.run([reel, "synth", "--out", data, "--videos", str(args.videos), "--test-videos",
                    str(args.test_videos), "--classes", str(args.classes), "--level", "frame",
                    "--shards", "4", "--min-frames", "30", "--max-frames", str(args.max_frames),
                    "--max-labels", "3", "--amplitude", "0.1", "--noise", "1.0", "--seed", "1"],
                   check=True, capture_output=True)
    return ["--set", f"data.options.files={data}/train/*.tfrecord",
            "--set", f"eval_data.options.files={data}/test/*.tfrecord",
            "--set", f"data.options.max_frames={args.max_frames}",
            "--set", f"eval_data.options.max_frames={args.max_frames}",
            "--set", f"trainer.num_classes={args.classes}",
            "--set", f"trainer.batch_size={args.batch}"]


def train(reel, args, extra, setting, seed, run_dir):
    compression, feedback = SETTINGS[setting]
    metrics = os.path.join(run_dir, "metrics.jsonl")
    cmd = [reel, "launch", "-n", str(args.ranks), "--", reel, "train", "--config",
           os.path.join(REPO, "configs", args.model + ".pbtxt"), *extra,
           "--set", f"trainer.seed={seed}", "--set", f"trainer.epochs={args.epochs}",
           "--set", "trainer.steps=0", "--set", "trainer.eval_every_steps=0",
           "--set", "trainer.checkpoint_every_steps=0",
           "--set", f"trainer.checkpoint_dir={run_dir}/ckpt", "--set", f"trainer.metrics_log={metrics}",
           "--set", f"trainer.tensorboard_dir={run_dir}/tb",
           "--set", f"optimizer.options.compression={compression}",
           "--set", f"optimizer.options.error_feedback={feedback}"]
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    seconds = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{setting} seed {seed}: reel train failed:\n{p.stdout[-1500:]}\n{p.stderr[-2500:]}")
    gap = re.search(r"eval: GAP@20 ([0-9.]+)", p.stdout)
    trained = re.search(r"trained (\d+) steps \((\d+) examples", p.stdout)
    losses = []
    with open(metrics) as f:
        for line in f:
            rec = json.loads(line)
            if "loss" in rec and "step" in rec and rec.get("kind", "train") == "train":
                losses.append([rec["step"], rec["loss"]])
    return {"model": args.model, "setting": setting, "compression": compression,
            "error_feedback": feedback == "true", "seed": seed, "gap": float(gap.group(1)),
            "loss": losses[-1][1] if losses else None, "loss_curve": losses,
            "steps": int(trained.group(1)) if trained else None,
            "examples": int(trained.group(2)) if trained else None,
            "seconds": seconds, "load_1min_before": load, "load_1min_after": os.getloadavg()[0]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--model", default="moe")
    ap.add_argument("--synth", action="store_true", help="train on synthetic frame data (reel synth)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=3, help="moe.pbtxt's own 3 by default")
    ap.add_argument("--videos", type=int, default=1500)
    ap.add_argument("--test-videos", type=int, default=500)
    ap.add_argument("--classes", type=int, default=16)
    ap.add_argument("--max-frames", type=int, default=60)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--out")
    args = ap.parse_args()
    reel = os.path.abspath(os.path.join(args.build, "bin", "reel"))
    rev = commit()
    out_path = args.out or os.path.join(
        REPO, "bench", "results",
        f"compression_gap_{datetime.datetime.utcnow():%Y%m%d}_{rev}.jsonl")
    work = tempfile.mkdtemp(prefix="reel-compression-")
    try:
        extra = synth(reel, work, args) if args.synth else []
        common = {"command": " ".join([os.path.relpath(sys.argv[0], REPO)] + sys.argv[1:]),
                  "commit": rev, "cpu": cpu_info(), "cores": os.cpu_count(), "ranks": args.ranks,
                  "epochs": args.epochs,
                  "data": ({k: getattr(args, k) for k in ("videos", "test_videos", "classes",
                                                        "max_frames", "batch")}
                           if args.synth else "configs/" + args.model + ".pbtxt's")}
        os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
        for i, seed in enumerate(args.seeds):
            k = i % len(args.settings)
            for setting in args.settings[k:] + args.settings[:k]:
                run_dir = os.path.join(work, f"run_{seed}_{setting}")
                r = train(reel, args, extra, setting, seed, run_dir)
                r.update(common)
                r["date"] = datetime.datetime.utcnow().isoformat(timespec="seconds") + "Z"
                with open(out_path, "a") as out:
                    out.write(json.dumps(r) + "\n")
                shutil.rmtree(run_dir, ignore_errors=True)
                print(f"{args.model} seed {seed} {setting}: GAP {r['gap']:.4f} loss {r['loss']} "
                      f"{r['seconds']:.0f} s (load {r['load_1min_before']:.2f})", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(out_path)


if __name__ == "__main__":
    main()
