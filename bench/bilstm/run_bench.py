#!/usr/bin/env python3
"""BiLSTM training-step benchmark driver: reel vs PyTorch 1.13 vs dnnl_sgemm, in one run.

Alternates, within each repetition, dnnl_sgemm (2048^3), reel's step and PyTorch's step for each
case (video/audio x every video 300 frames / lengths uniform in 150..300), each measurement in a
fresh process (reel_bilstm_step, torch_step.py), and reports per case the median over the
repetitions of each process's median step time. PyTorch runs with 2 threads (the spec) and also
with 1 thread: on a shared 2-core machine its per-time-step thread barriers can make 2 threads
much slower than 1, so the ratio is taken against its faster setting (the conservative one).

  bench/bilstm/run_bench.py --build build-models [--reps 3] [--out bench/results]

Writes <out>/bilstm_step.json and <out>/bilstm_step.md.
"""
import argparse
import datetime
import json
import os
import platform
import random
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CLASSES, EXPERTS, BATCH = 3862, 2, 32
SHAPES = {"video": (1024, 256), "audio": (128, 128)}


def model_flops(shape, lengths):
    """Useful FLOPs of one training step (3x forward), padding frames not counted."""
    d, h = SHAPES[shape]
    frames = sum(lengths)
    lstm = 2 * (2 * frames * 4 * h * (d + h))  # two directions
    head = 2 * len(lengths) * 2 * h * (CLASSES * (EXPERTS + 1) + CLASSES * EXPERTS)
    return 3 * (lstm + head)


def run(cmd, env, timeout):
    try:
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"  timeout after {timeout}s: {' '.join(cmd[:4])} ...", flush=True)
        return {"timeout_s": timeout}
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(HERE, "..", "results"))
    ap.add_argument("--python", default="/usr/bin/python3", help="interpreter with torch")
    ap.add_argument("--timeout", type=int, default=150,
                    help="per measurement process; a timed-out PyTorch run counts as slower than this")
    ap.add_argument("--shapes", default="video,audio")
    ap.add_argument("--torch-warmup", default="1",
                    help="untimed PyTorch steps first (0 saves minutes when its steps take tens of s)")
    ap.add_argument("--render", help="only re-render the summary from this bilstm_step.json")
    args = ap.parse_args()
    if args.render:
        with open(args.render) as f:
            saved = json.load(f)
        render(saved["meta"], saved["samples"], args.out)
        return
    reel_bin = os.path.join(args.build, "bin", "reel_bilstm_step")
    env2 = dict(os.environ, OMP_NUM_THREADS="2")
    env1 = dict(os.environ, OMP_NUM_THREADS="1")
    rng = random.Random(1)
    uniform = [rng.randint(150, 300) for _ in range(BATCH)]
    cases = []
    for shape in args.shapes.split(","):
        cases.append((shape, "full", [300] * BATCH, "padded"))
        cases.append((shape, "uniform", uniform, "packed"))
    samples = {"sgemm": []}
    for rep in range(args.reps):
        print(f"rep {rep + 1}/{args.reps}", flush=True)
        samples["sgemm"].append(run([reel_bin, "--sgemm", "--steps", "5"], env2, args.timeout))
        for shape, kind, lengths, mode in cases:
            lens = ",".join(map(str, lengths))
            steps = "2" if shape == "video" else "3"
            key = f"{shape}_{kind}"
            r = run([reel_bin, "--shape", shape, "--lengths", lens, "--steps", steps, "--warmup", "1"],
                    env2, args.timeout)
            samples.setdefault(key + "/reel", []).append(r)
            for threads, env in (("2", env2), ("1", env1)):
                t = run([args.python, os.path.join(HERE, "torch_step.py"), "--shape", shape,
                         "--lengths", lens, "--mode", mode, "--steps", "1",
                         "--warmup", args.torch_warmup, "--threads", threads], env, args.timeout)
                samples.setdefault(f"{key}/torch_{mode}_{threads}t", []).append(t)
            print(f"  {key}: reel {r.get('median_s')} s, torch {samples[f'{key}/torch_{mode}_2t'][-1].get('median_s')} s (2t), "
                  f"{t.get('median_s')} s (1t)", flush=True)

    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    meta = {
        "command": " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:]),
        "date": datetime.datetime.utcnow().isoformat(timespec="seconds") + "Z",
        "cpu": cpu, "cores": os.cpu_count(), "load_average_at_end": load, "reps": args.reps,
        "threads": 2, "python": platform.python_version(), "timeout_s": args.timeout,
        "uniform_lengths": uniform, "cases": cases,
    }
    render(meta, samples, args.out)


def render(meta, samples, out_dir):
    """Summarises the samples into <out_dir>/bilstm_step.{json,md}."""
    timeout = meta["timeout_s"]

    def med(key):
        """Median step seconds; a timed-out run counts as `timeout` (a lower bound)."""
        vals = [s.get("median_s", timeout) for s in samples[key]]
        return statistics.median(vals), any("median_s" not in s for s in samples[key])

    sgemm_gflops = statistics.median(s["gflops"] for s in samples["sgemm"])
    meta["sgemm_gflops"] = sgemm_gflops
    results = []
    for shape, kind, lengths, mode in meta["cases"]:
        key = f"{shape}_{kind}"
        flops = model_flops(shape, lengths)
        frames = sum(lengths)
        reel_s, _ = med(key + "/reel")
        (t2, t2_lb), (t1, t1_lb) = med(f"{key}/torch_{mode}_2t"), med(f"{key}/torch_{mode}_1t")
        best = min(t2, t1)
        results.append({
            "case": f"bilstm_{shape}_step", "lengths": kind, "torch_path": mode, "frames": frames,
            "gflop_per_step": flops / 1e9, "reel_s": reel_s,
            "torch_2t_s": t2, "torch_2t_timed_out": t2_lb, "torch_1t_s": t1, "torch_1t_timed_out": t1_lb,
            "reel_frames_per_s": frames / reel_s, "reel_gflops": flops / reel_s / 1e9,
            "torch_best_frames_per_s": frames / best, "speedup_vs_torch_best": best / reel_s,
            "speedup_vs_torch_2t": t2 / reel_s, "fraction_of_sgemm": flops / reel_s / 1e9 / sgemm_gflops,
            "reel_breakdown_s": {k: statistics.median(s[k] for s in samples[key + "/reel"])
                                 for k in ("forward_loss_s", "backward_s", "adam_s")},
        })
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "bilstm_step.json"), "w") as f:
        json.dump({"meta": meta, "results": results, "samples": samples}, f, indent=1)
    secs = lambda v, lb: (">" if lb else "") + f"{v:.3f}"
    ratio = lambda v, lb: (">" if lb else "") + f"{v:.2f}x"
    lines = [
        "# BiLSTM training step: reel vs PyTorch 1.13 vs dnnl_sgemm", "",
        f"Command: `{meta['command']}` ({meta['date']}, {meta['cpu']}, {meta['cores']} cores, load "
        f"average at end {' '.join(meta['load_average_at_end'])}; median of {meta['reps']} repetitions, "
        "each measurement a fresh process, all in one run).", "",
        f"dnnl_sgemm 2048x2048 in the same run: **{sgemm_gflops:.1f} GFLOP/s** (2 threads).", "",
        "| case | lengths | reel s/step | reel frames/s | reel GFLOP/s | % of sgemm | torch path | "
        "torch 2 threads s | torch 1 thread s | reel / torch 2 threads | reel / best torch |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['case']} | {r['lengths']} | {r['reel_s']:.3f} | {r['reel_frames_per_s']:.0f} | "
            f"{r['reel_gflops']:.1f} | {100 * r['fraction_of_sgemm']:.0f}% | {r['torch_path']} | "
            f"{secs(r['torch_2t_s'], r['torch_2t_timed_out'])} | {secs(r['torch_1t_s'], r['torch_1t_timed_out'])} | "
            f"{ratio(r['speedup_vs_torch_2t'], r['torch_2t_timed_out'])} | "
            f"{ratio(r['speedup_vs_torch_best'], r['torch_2t_timed_out'] and r['torch_1t_timed_out'])} |")
    lines += ["", f"'>' marks a PyTorch run stopped at the {timeout} s timeout (its time is at least that). "
              "Targets: reel >= 3x PyTorch's step rate and >= 70% of the sgemm rate. FLOPs count valid "
              "frames only: 3x the forward (LSTM: 2 directions x 2 frames 4H(D+H); plus the MoE head).", ""]
    with open(os.path.join(out_dir, "bilstm_step.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
