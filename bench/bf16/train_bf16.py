#!/usr/bin/env python3
"""Whole `reel train` jobs in fp32 and bf16, alternated (issue 53): examples/s from the
command's start to its exit, the held-out GAP, and the loss curves overlaid in an SVG plot.

Makes synthetic frame-level data once (`reel synth`, a held-out split of the same planted
signal), then per repetition trains `configs/<model>.pbtxt` on it in each precision (the order
rotating), each from scratch with the same seed. One JSON line per run after a first line
describing the machine; the plot beside the output (OUT with .svg).

  bench/bf16/train_bf16.py --build build --model bilstm_video --reps 3 --out bench/out/bf16_train.jsonl
  bench/bf16/train_bf16.py --plot-only bench/results/bf16_train_....jsonl   # redraw the plot
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
sys.path.insert(0, HERE)
from run_bf16 import cpu_info  # noqa: E402

COLORS = {"fp32": "#1f77b4", "bf16": "#d62728"}


def train(reel, model, data, run_dir, precision, args):
    metrics = os.path.join(run_dir, "metrics.jsonl")
    cmd = [reel, "train", "--config", os.path.join(REPO, "configs", model + ".pbtxt"),
           "--set", f"data.options.files={data}/train/*.tfrecord",
           "--set", f"eval_data.options.files={data}/test/*.tfrecord",
           "--set", f"data.options.max_frames={args.max_frames}",
           "--set", f"eval_data.options.max_frames={args.max_frames}",
           "--set", "trainer.steps=0", "--set", f"trainer.epochs={args.epochs}",
           "--set", f"trainer.batch_size={args.batch}", "--set", f"trainer.num_classes={args.classes}",
           "--set", "trainer.eval_every_steps=0", "--set", "trainer.checkpoint_every_steps=0",
           "--set", f"trainer.log_every_steps={args.log_every}",
           "--set", f"trainer.checkpoint_dir={run_dir}/ckpt", "--set", f"trainer.metrics_log={metrics}",
           "--set", f"trainer.tensorboard_dir={run_dir}/tb", "--set", f"trainer.precision={precision}"]
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="2"))
    seconds = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{precision}: reel train failed:\n{p.stderr[-2000:]}")
    trained = re.search(r"trained (\d+) steps \((\d+) examples", p.stdout)
    gap = re.search(r"eval: GAP@20 ([0-9.]+)", p.stdout)
    curve = []
    with open(metrics) as f:
        for line in f:
            rec = json.loads(line)
            if "loss" in rec and "step" in rec and rec.get("kind", "train") == "train":
                curve.append([rec["step"], rec["loss"]])
    examples = int(trained.group(2))
    return {"precision": precision, "seconds": seconds, "steps": int(trained.group(1)),
            "examples": examples, "examples_per_s": examples / seconds,
            "gap": float(gap.group(1)), "loss_curve": curve, "load_1min": load,
            "time_line": next((l for l in p.stdout.splitlines() if l.startswith("time of")), "")}


def plot(path_jsonl):
    lines = [json.loads(l) for l in open(path_jsonl) if l.strip()]
    meta, runs = lines[0], [r for r in lines[1:] if "loss_curve" in r]
    w, h, pad = 720, 420, 60
    pts = [p for r in runs for p in r["loss_curve"]]
    x0, x1 = 0, max(p[0] for p in pts)
    y0, y1 = min(p[1] for p in pts), max(p[1] for p in pts)
    sx = lambda x: pad + (w - 2 * pad) * (x - x0) / max(x1 - x0, 1)  # noqa: E731
    sy = lambda y: h - pad - (h - 2 * pad) * (y - y0) / max(y1 - y0, 1e-9)  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="black"/>',
           f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="black"/>',
           f'<text x="{w / 2}" y="{h - 20}" text-anchor="middle">step</text>',
           f'<text x="15" y="{h / 2}" transform="rotate(-90 15 {h / 2})" text-anchor="middle">training loss</text>',
           f'<text x="{w / 2}" y="25" text-anchor="middle">{meta["model"]}: loss in fp32 and bf16 '
           f'({meta["cpu"].get("model name", "?")}, family {meta["cpu"].get("cpu family")} model {meta["cpu"].get("model")})</text>']
    for v in (y0, (y0 + y1) / 2, y1):
        out.append(f'<text x="{pad - 5}" y="{sy(v) + 4:.1f}" text-anchor="end">{v:.3g}</text>')
    for v in (x0, x1 // 2, x1):
        out.append(f'<text x="{sx(v):.1f}" y="{h - pad + 15}" text-anchor="middle">{v}</text>')
    for r in runs:
        poly = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in r["loss_curve"])
        dash = ' stroke-dasharray="5,3"' if r["precision"] == "bf16" else ""
        out.append(f'<polyline fill="none" stroke="{COLORS[r["precision"]]}" stroke-width="1.2" '
                   f'stroke-opacity="0.8"{dash} points="{poly}"/>')
    for i, prec in enumerate(("fp32", "bf16")):
        gaps = [r["gap"] for r in runs if r["precision"] == prec]
        y = pad + 15 + 18 * i
        out.append(f'<line x1="{w - 250}" y1="{y}" x2="{w - 220}" y2="{y}" stroke="{COLORS[prec]}" stroke-width="2"/>')
        out.append(f'<text x="{w - 215}" y="{y + 4}">{prec}: {len(gaps)} runs, GAP {min(gaps):.3f}-{max(gaps):.3f}</text>')
    out.append("</svg>")
    svg = os.path.splitext(path_jsonl)[0] + ".svg"
    with open(svg, "w") as f:
        f.write("\n".join(out) + "\n")
    return svg


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--model", default="bilstm_video")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--videos", type=int, default=3000)
    ap.add_argument("--test-videos", type=int, default=600)
    ap.add_argument("--classes", type=int, default=16)
    ap.add_argument("--min-frames", type=int, default=30)
    ap.add_argument("--max-frames", type=int, default=120)
    ap.add_argument("--amplitude", default="0.1", help="reel synth's planted signal (the demo's)")
    ap.add_argument("--noise", default="1.0")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--log-every", type=int, default=5)
    ap.add_argument("--out")
    ap.add_argument("--plot-only")
    args = ap.parse_args()
    if args.plot_only:
        print(plot(args.plot_only))
        return
    if not args.out:
        ap.error("--out is required")
    reel = os.path.join(args.build, "bin", "reel")
    work = tempfile.mkdtemp(prefix="reel-bf16-")
    try:
        data = os.path.join(work, "data")
        subprocess.run([reel, "synth", "--out", data, "--videos", str(args.videos), "--test-videos",
                        str(args.test_videos), "--classes", str(args.classes), "--level", "frame",
                        "--shards", "4", "--min-frames", str(args.min_frames), "--max-frames",
                        str(args.max_frames), "--max-labels", "3", "--amplitude", args.amplitude, "--noise",
                        args.noise, "--seed", "1"], check=True, capture_output=True)
        rev = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True).stdout.strip()
        meta = {"meta": True, "command": " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:]),
                "date": datetime.datetime.utcnow().isoformat(timespec="seconds") + "Z", "commit": rev,
                "cpu": cpu_info(), "cores": os.cpu_count(), "model": args.model,
                "data": {k: getattr(args, k) for k in ("videos", "test_videos", "classes", "min_frames", "max_frames",
                                                     "amplitude", "noise")},
                "epochs": args.epochs, "batch": args.batch}
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as out:
            out.write(json.dumps(meta) + "\n")
            for rep in range(args.reps):
                order = ("fp32", "bf16") if rep % 2 == 0 else ("bf16", "fp32")
                for prec in order:
                    run_dir = os.path.join(work, f"run_{rep}_{prec}")
                    r = train(reel, args.model, data, run_dir, prec, args)
                    r["rep"] = rep
                    out.write(json.dumps(r) + "\n")
                    out.flush()
                    shutil.rmtree(run_dir, ignore_errors=True)
                    print(f"rep {rep + 1} {prec}: {r['examples_per_s']:.1f} ex/s, GAP {r['gap']:.4f}, "
                          f"{r['seconds']:.1f} s (load {r['load_1min']:.2f})", flush=True)
        print(plot(args.out))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
