#!/usr/bin/env python3
"""BiLSTM training-step benchmark driver: reel vs PyTorch 1.13 vs dnnl_sgemm, in one run.

Every repetition runs dnnl_sgemm (2048^3, 2 threads) and then, per case (video/audio x every video
300 frames / lengths uniform in 150..300), every program once, in an order rotated from one
repetition to the next: reel's step with impl=gemm and impl=dnnl_rnn (2 OpenMP threads), PyTorch's
padded step and, for the variable lengths, its packed (exact) step, each with 2 threads and with 1
(on a shared 2-core machine its per-time-step barriers can make 2 threads slower than 1; the ratio
is taken against its faster setting). Each measurement is a fresh process that times steps for
at least --min-seconds (every program, and dnnl_sgemm, by the same rule) and reports their mean,
the time a training run pays per step over that window; /proc/loadavg is recorded beside each.
The summary gives min/median/max of the step times beside the ratios of the
medians, the reel gemm step's per-phase breakdown, and the fraction of the sgemm rate.

  bench/bilstm/run_bench.py --build build [--reps 3] [--out bench/out] [--shapes video,audio]

Writes <out>/bilstm_step.json and <out>/bilstm_step.md (--render re-renders from a json).
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
REEL_IMPLS = ("gemm", "dnnl_rnn")
PHASES = ("projections", "recurrence", "gates", "head", "update")


def model_flops(shape, lengths):
    """The convention of the targets: 3x the forward FLOPs, valid frames only."""
    d, h = SHAPES[shape]
    frames = sum(lengths)
    lstm = 2 * (2 * frames * 4 * h * (d + h))  # two directions
    head = 2 * len(lengths) * 2 * h * (CLASSES * (EXPERTS + 1) + CLASSES * EXPERTS)
    return 3 * (lstm + head)


def gemm_executed_flops(shape, lengths):
    """What impl=gemm actually computes for one layer: forward (input and recurrent products),
    dWx, dWh and the recurrent gradient; no gradient for the input features (none is needed)."""
    d, h = SHAPES[shape]
    frames = sum(lengths)
    lstm = 2 * (2 * frames * 4 * h * (2 * d + 3 * h))
    head = 2 * len(lengths) * 2 * h * (CLASSES * (EXPERTS + 1) + CLASSES * EXPERTS)
    return lstm + 3 * head


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def run(cmd, env, timeout):
    load = loadavg()
    try:
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"  timeout after {timeout}s: {' '.join(cmd[:4])} ...", flush=True)
        return {"timeout_s": timeout, "load_1min": load}
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stderr}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    r["load_1min"] = max(load, loadavg())
    return r


PROBE = """
import json, sys, time, torch
a, b = torch.randn(9600, 1024), torch.randn(1024, 1024)
a @ b
best = 0.0
for _ in range(5):
    t = time.perf_counter()
    a @ b
    best = max(best, 2 * 9600 * 1024 * 1024 / (time.perf_counter() - t) / 1e9)
print(json.dumps({"gflops": best}))
"""
OPENBLAS_CORES = ("detected", "SkylakeX", "Cooperlake", "Haswell")


def pick_openblas_core(python, choice):
    """PyTorch from Debian multiplies through OpenBLAS, which picks its kernels from the CPU model.
    In a VM that hides the model (as here: "Intel(R) Xeon(R) Processor") it falls back to its
    SSE3 "Prescott" kernels, 5-8x below the machine's AVX-512 rate, and PyTorch would be measured
    crippled. Give the peer its best: time one projection-sized product under each core type
    (OPENBLAS_CORETYPE) and keep the fastest. Returns (env additions, record for the json)."""
    candidates = OPENBLAS_CORES if choice == "auto" else (choice,)
    probes = {}
    for core in candidates:
        env = dict(os.environ, OPENBLAS_VERBOSE="2")
        if core != "detected":
            env["OPENBLAS_CORETYPE"] = core
        out = subprocess.run([python, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            sys.exit(f"PyTorch probe failed under OPENBLAS_CORETYPE={core}:\n{out.stderr}")
        used = next((l.split(":", 1)[1].strip() for l in out.stdout.splitlines() + out.stderr.splitlines()
                     if l.startswith("Core:")), "?")
        probes[core] = {"openblas_core": used, "gflops": json.loads(out.stdout.strip().splitlines()[-1])["gflops"]}
        print(f"  torch probe OPENBLAS_CORETYPE={core}: core {used}, {probes[core]['gflops']:.1f} GFLOP/s",
              flush=True)
    best = max(probes, key=lambda c: probes[c]["gflops"])
    extra = {} if best == "detected" else {"OPENBLAS_CORETYPE": best}
    return extra, {"chosen": best, "probes": probes}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(HERE, "..", "out"))
    ap.add_argument("--python", default="/usr/bin/python3", help="interpreter with torch")
    ap.add_argument("--timeout", type=int, default=150,
                    help="per measurement process; a timed-out PyTorch run counts as this (a lower bound)")
    ap.add_argument("--shapes", default="video,audio")
    ap.add_argument("--torch-warmup", default="1",
                    help="untimed PyTorch steps first (0 saves minutes when its steps take tens of s)")
    ap.add_argument("--torch-packed-warmup", default="0",
                    help="untimed PyTorch steps before a packed one (its steps take 10-40 s, so the "
                         "first step's setup is a small part of them)")
    ap.add_argument("--reel-impls", default=",".join(REEL_IMPLS), help="reel LSTM implementations to run")
    ap.add_argument("--reel-steps", default="2", help="timed reel steps per process (after 1 warmup), at least")
    ap.add_argument("--min-seconds", default="2",
                    help="every measurement process (reel, PyTorch, dnnl_sgemm) keeps timing steps until "
                         "they add up to this many seconds and reports their mean: this VM's speed changes "
                         "in stretches of a fraction of a second to seconds, and two 60 ms steps sampled a "
                         "moment of it")
    ap.add_argument("--torch-flush-denormal", action=argparse.BooleanOptionalAction, default=True,
                    help="run PyTorch with torch.set_flush_denormal(True), as reel flushes denormals "
                         "in its LSTM (the conservative peer: without it PyTorch's backward slows down)")
    ap.add_argument("--torch-openblas-core", default="auto",
                    help="OPENBLAS_CORETYPE for PyTorch: auto (probe each and keep the fastest), "
                         "detected (OpenBLAS's own choice) or a core name")
    ap.add_argument("--render", help="only re-render the summary from this bilstm_step.json")
    args = ap.parse_args()
    if args.render:
        with open(args.render) as f:
            saved = json.load(f)
        render(saved["meta"], saved["samples"], args.out)
        return
    reel_bin = os.path.join(args.build, "bin", "reel_bilstm_step")
    env = {t: dict(os.environ, OMP_NUM_THREADS=t) for t in ("1", "2")}
    torch_extra, torch_blas = pick_openblas_core(args.python, args.torch_openblas_core)
    torch_env = {t: dict(e, **torch_extra) for t, e in env.items()}
    rng = random.Random(1)
    uniform = [rng.randint(150, 300) for _ in range(BATCH)]
    cases = []
    for shape in args.shapes.split(","):
        cases.append((shape, "full", [300] * BATCH))
        cases.append((shape, "uniform", uniform))
    samples = {"sgemm": []}
    for rep in range(args.reps):
        print(f"rep {rep + 1}/{args.reps}", flush=True)
        samples["sgemm"].append(run([reel_bin, "--sgemm", "--steps", "5", "--min-seconds",
                                       args.min_seconds], env["2"], args.timeout))
        samples.setdefault("stream", []).append(run([reel_bin, "--stream", "--steps", "5"], env["2"], args.timeout))
        for shape, kind, lengths in cases:
            lens = ",".join(map(str, lengths))
            key = f"{shape}_{kind}"
            programs = []
            for impl in args.reel_impls.split(","):
                programs.append((f"reel_{impl}", [reel_bin, "--shape", shape, "--lengths", lens,
                                                  "--steps", args.reel_steps, "--warmup", "1", "--impl", impl,
                                                  "--min-seconds", args.min_seconds], "2"))
            for mode in ("padded", "packed") if kind == "uniform" else ("padded",):
                for threads in ("2", "1"):
                    programs.append((f"torch_{mode}_{threads}t",
                                     [args.python, os.path.join(HERE, "torch_step.py"), "--shape", shape,
                                      "--lengths", lens, "--mode", mode, "--steps", "1",
                                      "--warmup", args.torch_packed_warmup if mode == "packed" else args.torch_warmup,
                                      "--threads", threads, "--min-seconds", args.min_seconds]
                                     + (["--flush-denormal"] if args.torch_flush_denormal else []), threads))
            envs = {name: (torch_env if name.startswith("torch") else env) for name, _, _ in programs}
            shift = rep % len(programs)
            for name, cmd, threads in programs[shift:] + programs[:shift]:
                r = run(cmd, envs[name][threads], args.timeout)
                samples.setdefault(f"{key}/{name}", []).append(r)
                print(f"  {key} {name}: {r.get('mean_s', r.get('median_s', '>timeout'))} s (load {r['load_1min']})", flush=True)

    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    meta = {
        "command": " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:]),
        "date": datetime.datetime.utcnow().isoformat(timespec="seconds") + "Z",
        "cpu": cpu, "cores": os.cpu_count(), "reps": args.reps, "threads": 2,
        "python": platform.python_version(), "timeout_s": args.timeout,
        "uniform_lengths": uniform, "cases": cases, "torch_flush_denormal": args.torch_flush_denormal,
        "torch_openblas": torch_blas, "min_seconds": float(args.min_seconds),
    }
    render(meta, samples, args.out)


def stats(vals):
    return {"min": min(vals), "median": statistics.median(vals), "max": max(vals)}


def render(meta, samples, out_dir):
    """Summarises the samples into <out_dir>/bilstm_step.{json,md}."""
    timeout = meta["timeout_s"]

    def times(key):
        # A process's figure: the mean over its timed window (older runs: the median step).
        return [s.get("mean_s", s.get("median_s", timeout)) for s in samples.get(key, [])]

    def timed_out(key):
        return any("median_s" not in s for s in samples.get(key, []))

    sgemm = stats([s["gflops"] for s in samples["sgemm"]])
    meta["sgemm_gflops"] = sgemm
    stream = stats([s["gbps"] for s in samples["stream"]]) if samples.get("stream") else None
    meta["stream_gbps"] = stream
    loads = [s["load_1min"] for v in samples.values() for s in v if "load_1min" in s]
    meta["load_1min_range"] = [min(loads), max(loads)] if loads else []
    results = []
    for shape, kind, lengths in meta["cases"]:
        key = f"{shape}_{kind}"
        r = {"case": f"bilstm_{shape}_step", "lengths": kind, "frames": sum(lengths),
             "gflop_per_step": model_flops(shape, lengths) / 1e9,
             "gemm_executed_gflop_per_step": gemm_executed_flops(shape, lengths) / 1e9, "programs": {}}
        for prog in [k.split("/", 1)[1] for k in samples if k.startswith(key + "/")]:
            r["programs"][prog] = dict(stats(times(f"{key}/{prog}")), timed_out=timed_out(f"{key}/{prog}"),
                                       load_1min=[s["load_1min"] for s in samples[f"{key}/{prog}"]])
        reel = r["programs"]["reel_gemm"]["median"]
        r["reel_gemm_gflops"] = model_flops(shape, lengths) / reel / 1e9
        r["fraction_of_sgemm"] = r["reel_gemm_gflops"] / sgemm["median"]
        r["executed_fraction_of_sgemm"] = gemm_executed_flops(shape, lengths) / reel / 1e9 / sgemm["median"]
        if "reel_dnnl_rnn" in r["programs"]:
            r["gemm_vs_dnnl_rnn"] = r["programs"]["reel_dnnl_rnn"]["median"] / reel
        # The pairings docs/benchmarks.md prescribes: padded against reel at full length (both
        # compute every frame), packed against reel at uniform lengths (both the exact work);
        # padded against a variable-length batch would credit reel with PyTorch's padding.
        for mode in ("padded",) if kind == "full" else ("packed",):
            cands = [(r["programs"][f"torch_{mode}_{t}t"]["median"], t) for t in ("2", "1")
                     if f"torch_{mode}_{t}t" in r["programs"]]
            if cands:
                best, t = min(cands)
                r[f"torch_{mode}_best"] = {"threads": int(t), "median_s": best, "speedup": best / reel}
        phase_samples = [s["phases_s"] for s in samples[f"{key}/reel_gemm"] if "phases_s" in s]
        r["reel_gemm_phases_s"] = {p: statistics.median(s[p] for s in phase_samples) for p in PHASES}
        # Each direction's products on its own thread: rate per thread against half the 2-thread
        # sgemm rate (its own bound).
        d, h = SHAPES[shape]
        n, b = sum(lengths), len(lengths)
        per_thread = sgemm["median"] / 2
        for phase, flops in (("projections", 2 * n * 4 * h * (2 * d + h)),
                             ("recurrence", 2 * (n - b) * 4 * h * 2 * h)):
            t = r["reel_gemm_phases_s"][phase]
            r[f"{phase}_gflops_per_thread"] = flops / t / 1e9 if t > 0 else 0
            r[f"{phase}_fraction_of_bound"] = r[f"{phase}_gflops_per_thread"] / per_thread
        if stream:
            # Memory-bound phases against the streaming rate: at batch 32 the head reads its
            # weights twice (forward, dx) and writes their gradient once; Adam reads parameters,
            # gradients and both moments and writes back parameters and moments (28 bytes each).
            head_w = 2 * h * CLASSES * (2 * EXPERTS + 1)
            params = statistics.median(s["params"] for s in samples[f"{key}/reel_gemm"] if "params" in s)
            for phase, nbytes in (("head", 3 * 4 * head_w), ("update", 28 * params)):
                bound = nbytes / (stream["median"] * 1e9)
                t = r["reel_gemm_phases_s"][phase]
                r[f"{phase}_memory_bound_s"] = bound
                r[f"{phase}_fraction_of_bound"] = bound / t if t > 0 else 0
        r["reel_gemm_cpu_s"] = statistics.median(s.get("cpu_s", 0) for s in samples[f"{key}/reel_gemm"])
        results.append(r)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "bilstm_step.json"), "w") as f:
        json.dump({"meta": meta, "results": results, "samples": samples}, f, indent=1)
    write_md(meta, results, sgemm, timeout, out_dir)


def write_md(meta, results, sgemm, timeout, out_dir):
    f3 = lambda v: f"{v:.3f}"
    lo, hi = meta["load_1min_range"]
    window = (f" timing steps for at least {meta['min_seconds']:g} s and reporting their mean step"
              if meta.get("min_seconds") else "")
    lines = [
        "# BiLSTM training step: reel vs PyTorch 1.13 vs dnnl_sgemm", "",
        f"Command: `{meta['command']}` ({meta['date']}, {meta['cpu']}, {meta['cores']} cores; "
        f"{meta['reps']} repetitions, programs alternated in rotated order, each measurement a fresh "
        f"process{window}). **The machine was shared: 1-minute load average {lo:.1f}–{hi:.1f} during the "
        "run** (recorded beside every sample in the json); absolute numbers are lower than on an idle "
        "machine and the ratios carry that noise. PyTorch ran with "
        f"torch.set_flush_denormal({meta.get('torch_flush_denormal', False)}) (reel's LSTM flushes "
        "denormals too).", "",
    ]
    blas = meta.get("torch_openblas")
    if blas:
        probes = ", ".join(f"{c} → {p['openblas_core']} {p['gflops']:.0f}" for c, p in blas["probes"].items())
        lines += [f"PyTorch multiplies through OpenBLAS; its kernels were chosen by probing a "
                  f"[9600x1024]x[1024x1024] product under each OPENBLAS_CORETYPE (GFLOP/s: {probes}) and "
                  f"keeping the fastest, **{blas['chosen']}**, for every PyTorch run.", ""]
    lines += [
        f"dnnl_sgemm 2048x2048, 2 threads, min/median/max over the repetitions (each its window's rate): "
        f"{sgemm['min']:.1f} / **{sgemm['median']:.1f}** / {sgemm['max']:.1f} GFLOP/s.", "",
        "## Step times (s): min / median / max", "",
        "| case | lengths | program | min | median | max | load (1 min) |", "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        for prog, p in r["programs"].items():
            gt = ">" if p["timed_out"] else ""
            lines.append(f"| {r['case']} | {r['lengths']} | {prog} | {gt}{f3(p['min'])} | {gt}{f3(p['median'])} | "
                         f"{gt}{f3(p['max'])} | {min(p['load_1min']):.1f}–{max(p['load_1min']):.1f} |")
    lines += ["", "## Ratios (of the medians) and targets", "",
              "| case | lengths | reel gemm GFLOP/s | % of sgemm (3x fwd) | % of sgemm (executed) | gemm vs dnnl_rnn | "
              "vs best torch padded | vs best torch packed |", "|---|---|---|---|---|---|---|---|"]
    for r in results:
        tp = r.get("torch_padded_best")
        tk = r.get("torch_packed_best")
        fmt = lambda t: f"{t['speedup']:.2f}x ({t['threads']} thr)" if t else "—"
        lines.append(f"| {r['case']} | {r['lengths']} | {r['reel_gemm_gflops']:.1f} | {100 * r['fraction_of_sgemm']:.0f}% | "
                     f"{100 * r['executed_fraction_of_sgemm']:.0f}% | "
                     + (f"{r['gemm_vs_dnnl_rnn']:.2f}x" if "gemm_vs_dnnl_rnn" in r else "not run")
                     + f" | {fmt(tp)} | {fmt(tk)} |")
    lines += ["", "## reel gemm step per phase (s, median)", "",
              "| case | lengths | step | " + " | ".join(PHASES) + " | rest | process CPU s |",
              "|---" * (len(PHASES) + 5) + "|"]
    for r in results:
        ph = r["reel_gemm_phases_s"]
        step = r["programs"]["reel_gemm"]["median"]
        lines.append(f"| {r['case']} | {r['lengths']} | {f3(step)} | " + " | ".join(f3(ph[p]) for p in PHASES) +
                     f" | {f3(step - sum(ph.values()))} | {f3(r['reel_gemm_cpu_s'])} |")
    lines += ["", "Products against their own bound (per direction on one thread, vs half the 2-thread sgemm rate):", "",
              "| case | lengths | projections GFLOP/s/thread | of bound | recurrence GFLOP/s/thread | of bound |",
              "|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['case']} | {r['lengths']} | {r['projections_gflops_per_thread']:.1f} | "
                     f"{100 * r['projections_fraction_of_bound']:.0f}% | {r['recurrence_gflops_per_thread']:.1f} | "
                     f"{100 * r['recurrence_fraction_of_bound']:.0f}% |")
    if meta.get("stream_gbps"):
        st = meta["stream_gbps"]
        lines += ["", f"Phases that stream their data once, against the time to stream the same bytes at the "
                  f"rate `--stream` measures (a += s*b over 2 x 128 MiB on 2 threads, min/median/max "
                  f"{st['min']:.1f} / **{st['median']:.1f}** / {st['max']:.1f} GB/s). The head at batch 32 "
                  "moves its weights three times (read for the forward and for dx, gradient written); Adam "
                  "moves 28 bytes per parameter. A phase whose data stay in the last-level cache can beat "
                  "this rate (above 100%):", "",
                  "| case | lengths | head s | streaming s | of it | update s | streaming s | of it |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in results:
            ph = r["reel_gemm_phases_s"]
            lines.append(f"| {r['case']} | {r['lengths']} | {f3(ph['head'])} | {f3(r['head_memory_bound_s'])} | "
                         f"{100 * r['head_fraction_of_bound']:.0f}% | {f3(ph['update'])} | "
                         f"{f3(r['update_memory_bound_s'])} | {100 * r['update_fraction_of_bound']:.0f}% |")
    lines += ["",
              "FLOPs count valid frames only. \"3x fwd\" is the targets' convention: 3x the forward FLOPs "
              "(LSTM: 2 directions x 2 x frames x 4H(D+H); plus the MoE head). \"executed\" counts what impl=gemm "
              "computes: forward, dWx, dWh and the recurrent gradient, but no gradient for the input features, "
              "which the first layer does not need (PyTorch skips it too). Phases: projections = the large "
              "products (input projections, dWx, dWh), recurrence = the per-step products, gates = the fused "
              "passes (with the per-step bookkeeping), each averaged over the two directions, which run "
              "concurrently on one thread each; head = MoE forward + backward; update = Adam; rest = packing, "
              "pooling, loss. Process CPU s: CPU time of all the process's threads during the step; on an idle "
              "machine close to 2x the step for the concurrent parts, less when the load took the cores. '>' marks a PyTorch run stopped at the "
              f"{timeout} s timeout.", ""]
    with open(os.path.join(out_dir, "bilstm_step.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
