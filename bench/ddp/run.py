#!/usr/bin/env python3
"""Whole-job training speed of `reel train` (1 rank, and 2 under `reel launch -n 2`, transport
tcp) against PyTorch DistributedDataParallel (gloo) under torchrun (bench/ddp/torchrun.py,
bench/ddp/torch_ddp.py), 1 and 2 processes on this host, or one on each of 2 simulated hosts.

  bench/ddp/run.py [--model moe|bilstm_video|two_stream] [--build build] [--reps 3] [--ranks 1,2]
      [--out FILE] [--hosts 2 [--rate 1gbit]] [--reel-set NAME:KEY=VALUE ...]
      moe:    [--epochs 5]            on the YouTube-8M video-level shards in data/yt8m
      BiLSTMs: [--videos 4096] [--torch-steps 0] [--torch-seconds 0]
              [--torch-threads 0,1]
              on frame-level shards `reel synth` writes (once) to bench/out/ddp_frames_<videos>:
              frames 150-300, 1024 rgb + 128 audio, 3862 classes

Every case is the whole command, timed from its start to its exit: startup, reading, training
batch 32 per rank, Adam. moe: `--epochs` epochs, reel reading the shards each epoch, PyTorch once
into memory. BiLSTMs: reel one epoch over all videos; PyTorch, streaming its share, by default the same
(equal work, docs/benchmarks.md); `--torch-steps` (per rank) and `--torch-seconds` (none begun
after) cap it, and then the ratios of the whole job are left out as unequal work.
Examples are those all ranks trained (reel: as its last line counts them; PyTorch: whole
batches, steps x 32 x ranks); PyTorch also reports its loop alone (examples over the training
loop's seconds) and the loop's reading and steps. Repetitions alternate the programs; medians,
minima and maxima of examples/s over the runs. PyTorch gets the host's cores over its processes
as threads (torch.set_num_threads), as reel's ranks narrow themselves to theirs, and, as a
program of its own, one thread per process (its padded LSTM runs faster on one than on two
here): the ratios take its faster setting. It also gets its fastest OpenBLAS kernels
(OPENBLAS_CORETYPE, probed as bench/bilstm/run_bench.py does: this VM hides its CPU model).
`--reel-set NAME:KEY=VALUE` (repeatable) makes reel settings programs of their own, "reel_NAME",
in place of plain reel, alternated with the others and each with its ratios against PyTorch
(e.g. `--reel-set overlap:optimizer.options.bucket_mb=4 --reel-set
after:optimizer.options.bucket_mb=0`); `--torch-threads none` leaves PyTorch out (no ratios).
`--torch-bucket-cap-mb 25,100` runs DDP at each bucket size as a program of its own (DDP always
with gradient_as_bucket_view), the ratios against the fastest; `--torch-comm-hook none,fp16` the
same for DDP's fp16 compression hook (gloo has no bf16 sums, so PyTorch's bf16 hook cannot run).
"""
import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PYTHON = "/usr/bin/python3"  # Debian's, which has python3-torch
NETNS = os.path.join(ROOT, "tests", "netns", "netns.sh")
PORT = 29517
HOSTS = None  # the namespaces' name with --hosts 2

sys.path.insert(0, os.path.join(ROOT, "bench", "bilstm"))
from run_bench import pick_openblas_core  # noqa: E402


def frame_data(build, videos):
    """Frame-level shards of `videos` videos at the standard shapes, written once."""
    out = os.path.join(ROOT, "bench", "out", f"ddp_frames_{videos}")
    if not glob.glob(os.path.join(out, "*.tfrecord")):
        subprocess.run([os.path.join(build, "bin", "reel"), "synth", "--out", out, "--videos",
                        str(videos), "--classes", "3862", "--level", "frame", "--shards", "4",
                        "--min-frames", "150", "--max-frames", "300", "--seed", "1"], check=True)
    return sorted(glob.glob(os.path.join(out, "*.tfrecord")))


def run_hosts(commands, env):
    """Runs commands[i] in simulated host i at once; (seconds until all ended, outputs)."""
    start = time.time()
    procs = [subprocess.Popen(["ip", "netns", "exec", f"{HOSTS}-r{i}", "env"] +
                              [f"{k}={v}" for k, v in env.items()] + c, cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for i, c in enumerate(commands)]
    outs = [p.communicate(timeout=1800)[0] for p in procs]
    seconds = time.time() - start
    for c, p, o in zip(commands, procs, outs):
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(c)}: {o[-2000:]}")
    return seconds, outs


def run_local(cmd, env=None):
    start = time.time()
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                       env=dict(os.environ, **(env or {})))
    seconds = time.time() - start
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {p.stderr[-2000:]}")
    return seconds, p.stdout + p.stderr


def run_reel(args, ranks, sets=()):
    """`sets`: the extra --set KEY=VALUE of a reel program (--reel-set)."""
    reel = os.path.join(args.build, "bin", "reel")
    # The build's own libreel.so: a copied build's binaries keep the RUNPATH of the tree they were
    # built in, whose library a rebuild there replaces (with another ABI) under a running benchmark.
    env = {"LD_LIBRARY_PATH": os.path.join(args.build, "lib")}
    train = [reel, "train", "--config", os.path.join(ROOT, "bench", "ddp", f"{args.model}.pbtxt"),
             "--set", f"trainer.epochs={args.epochs}"]
    if args.files:
        train += ["--set", "data.options.files=" + os.path.join(os.path.dirname(args.files[0]),
                                                                "*.tfrecord")]
    for setting in sets:
        train += ["--set", setting]
    if HOSTS:  # one rank on each simulated host
        a0 = subprocess.check_output([NETNS, "addr", "0"], text=True).strip()
        seconds, outs = run_hosts(
            [[reel, "launch", "-n", "1", "--nnodes", str(ranks), "--node-rank", str(i),
              "--coordinator", f"{a0}:{PORT}", "--"] + train for i in range(ranks)],
            # A job identity of its own per run (reel launch asks for one across nodes).
            dict(env, REEL_SECRET="ddp-bench", OMP_NUM_THREADS="1",
                 REEL_JOB_ID=f"ddp-bench-{os.getpid()}-{time.time_ns()}"))
        out = outs[0]
    else:
        seconds, out = run_local(train if ranks == 1 else
                                 [reel, "launch", "-n", str(ranks), "--"] + train, env)
    # "trained N steps (X examples, ...)": X counts every rank's examples (each epoch's last,
    # partial batch too).
    done = re.search(r"trained (\d+) steps \((\d+) examples", out)
    if not done:
        raise RuntimeError(f"no 'trained N steps (X examples' line: {out[-2000:]}")
    # Where the rank's time went (docs/training.md, "Where the time goes"): the first rank's.
    time_line = re.search(r"time of this rank: (.*)", out)
    return {"seconds": seconds, "steps": int(done.group(1)), "examples": int(done.group(2)),
            "time": time_line.group(1) if time_line else None}


def run_torch(args, ranks, threads, bucket_mb, hook="none"):
    script = [os.path.join(ROOT, "bench", "ddp", "torch_ddp.py"), "--model", args.model,
              "--bucket-cap-mb", str(bucket_mb), "--gradient-as-bucket-view", "--comm-hook", hook]
    if args.model == "moe":
        script += ["--files", ",".join(os.path.join(ROOT, "data", "yt8m",
                                                    f"validate000{i}.tfrecord") for i in (0, 1)),
                   "--epochs", str(args.epochs)]
    else:
        script += ["--files", ",".join(args.files), "--steps", str(args.torch_steps),
                   "--max-seconds", str(args.torch_seconds)]
    if threads:
        script += ["--threads", str(threads)]
    torchrun = [PYTHON, os.path.join(ROOT, "bench", "ddp", "torchrun.py")]
    if HOSTS:  # one process on each simulated host, gloo on the namespace's link
        a0 = subprocess.check_output([NETNS, "addr", "0"], text=True).strip()
        seconds, outs = run_hosts(
            [torchrun + ["--nnodes", str(ranks), "--node_rank", str(i), "--nproc_per_node", "1",
                         "--master_addr", a0, "--master_port", str(PORT + 1)] + script +
             ([] if threads else ["--threads", "1"]) for i in range(ranks)],
            dict(args.torch_env, GLOO_SOCKET_IFNAME="eth0", OMP_NUM_THREADS="1"))
        out = outs[0]
    else:
        seconds, out = run_local(torchrun + ["--nproc_per_node", str(ranks)] + script,
                                 args.torch_env)
    lines = [l for l in out.splitlines() if l.startswith("{")]
    if not lines:
        raise RuntimeError(f"no JSON line from PyTorch: {out[-2000:]}")
    inner = json.loads(lines[-1])
    return {"seconds": seconds, "examples": inner["examples"], "inner": inner}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=["moe", "bilstm_video", "two_stream"], default="moe")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=0, help="0: 5 for moe, 1 for the BiLSTMs")
    ap.add_argument("--videos", type=int, default=4096, help="BiLSTMs: frame-level videos")
    # Equal work by default (issue 50): PyTorch trains its whole share, as reel does; a cap makes
    # the whole-job ratio compare unequal work, and the ratios then say so instead.
    ap.add_argument("--torch-steps", type=int, default=0,
                    help="BiLSTMs: PyTorch's steps per rank, at most (0: its whole share)")
    ap.add_argument("--torch-seconds", type=float, default=0,
                    help="BiLSTMs: PyTorch stops after the step that ends this many seconds into "
                    "its loop (a setting whose steps take tens of seconds)")
    ap.add_argument("--torch-threads", default="0,1",
                    help="PyTorch's threads per process, each a program of its own (0: the "
                    "cores over the local ranks; 1: one each, which the padded LSTM can run faster "
                    "than two, bench/journal/bilstm_step.md); the ratios take the fastest")
    ap.add_argument("--torch-openblas-core", default="auto",
                    help="OPENBLAS_CORETYPE for PyTorch: auto (probe, keep the fastest), "
                    "detected (OpenBLAS's own choice) or a core name")
    ap.add_argument("--torch-bucket-cap-mb", default="25",
                    help="DDP's bucket_cap_mb, a list: each value is a program of its own "
                    "(torch_ddp..._b<MB>, beside its default 25); the ratios take the fastest. "
                    "DDP always runs with gradient_as_bucket_view")
    ap.add_argument("--ranks", default="1,2")
    ap.add_argument("--out", default=None, help="default bench/out/ddp_<model>.json")
    ap.add_argument("--hosts", type=int, default=1,
                    help="2: each rank on a simulated host of its own (network namespaces, "
                    "tests/netns/netns.sh), links limited to --rate, one thread per process")
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--torch-comm-hook", default="none",
                    help="DDP's communication hook, a list: each value a program of its own "
                    "(none; fp16: PyTorch's fp16_compress_hook, gradients in fp16 on the wire)")
    ap.add_argument("--reel-set", action="append", default=[], metavar="NAME:KEY=VALUE",
                    help="a reel program of its own, reel_NAME, with this --set (repeatable; "
                    "several for one NAME add up); given, they replace plain reel, and each "
                    "gets its ratios against PyTorch")
    args = ap.parse_args()
    args.reel_programs = {}
    for item in args.reel_set:
        name, _, setting = item.partition(":")
        if not name or "=" not in setting:
            ap.error(f"--reel-set {item!r}: expected NAME:KEY=VALUE")
        args.reel_programs.setdefault(f"reel_{name}", []).append(setting)
    args.epochs = args.epochs or (5 if args.model == "moe" else 1)
    args.out = args.out or os.path.join(ROOT, "bench", "out", f"ddp_{args.model}.json")
    args.build = os.path.abspath(args.build)
    args.files = None if args.model == "moe" else frame_data(args.build, args.videos)
    args.torch_env, args.torch_blas = ({}, None) if args.torch_threads == "none" else \
        pick_openblas_core(PYTHON, args.torch_openblas_core)
    ranks = [int(r) for r in args.ranks.split(",")]
    if args.hosts > 1:
        global HOSTS
        HOSTS = f"reelddp{os.getpid()}"
        ranks = [args.hosts]
        subprocess.run([NETNS, "up", HOSTS, str(args.hosts), args.rate], check=True)
    try:
        run_all(args, ranks)
    finally:
        if HOSTS:
            subprocess.run([NETNS, "down", HOSTS])


def run_all(args, ranks):
    # PyTorch's thread settings: "torch_ddp" (the cores over its processes) and "torch_ddp_<T>t";
    # an explicit setting that equals the default on a case is left out.
    def torch_programs(n):
        cores = 1 if HOSTS else max(1, len(os.sched_getaffinity(0)) // n)
        out = []
        if args.torch_threads == "none":
            return out
        for t in (int(v) for v in args.torch_threads.split(",")):
            if t == 0 or t != cores:
                for mb in (float(v) for v in args.torch_bucket_cap_mb.split(",")):
                    for hook in args.torch_comm_hook.split(","):
                        name = "torch_ddp" if t == 0 else f"torch_ddp_{t}t"
                        name += ("" if mb == 25 else f"_b{mb:g}") + \
                            ("" if hook == "none" else f"_{hook}")
                        out.append((name, (t, mb, hook)))
        return out

    reels = args.reel_programs or {"reel": []}  # program -> its --set settings

    runs = {}
    for rep in range(args.reps):
        for n in ranks:
            programs = [(p, None) for p in reels] + torch_programs(n)
            shift = rep % len(programs)  # alternate which program runs first
            for program, threads in programs[shift:] + programs[:shift]:
                r = (run_reel(args, n, reels[program]) if program in reels else
                     run_torch(args, n, *threads))
                r["examples_per_sec"] = r["examples"] / r["seconds"]
                runs.setdefault(f"{program}/{n}", []).append(r)
                print(f"rep {rep} {program} {n} rank(s): {r['examples_per_sec']:.2f} examples/s "
                      f"({r['examples']} in {r['seconds']:.1f} s)", file=sys.stderr, flush=True)
    summary = {}
    for key, rs in runs.items():
        eps = sorted(r["examples_per_sec"] for r in rs)
        summary[key] = {"min": eps[0], "median": statistics.median(eps), "max": eps[-1]}
        if key.startswith("torch_ddp"):
            loop = sorted(r["inner"]["examples_per_sec_training"] for r in rs)
            summary[key + " loop"] = {"min": loop[0], "median": statistics.median(loop),
                                      "max": loop[-1]}
    ratios = {}
    # Every reel program against PyTorch's fastest setting, whole command and loop alone.
    for n, reel, kind in ((n, reel, kind) for n in ranks for reel in reels
                          for kind in ("", " loop") if args.torch_threads != "none"):
        best = max((k for k in summary if k.endswith(f"/{n}{kind}")
                    and k.startswith("torch_ddp")), key=lambda k: summary[k]["median"])
        work = {p: statistics.median(r["examples"] for r in runs[p])
                for p in (f"{reel}/{n}", best.removesuffix(" loop"))}
        key = f"{reel}/torch_ddp{kind} {n}"
        if len(set(work.values())) > 1:  # docs/benchmarks.md: equal work on both sides
            ratios[key] = {"ratio": None, "against": best, "unequal_work_examples": work}
            continue
        ratios[key] = {"ratio": summary[f"{reel}/{n}"]["median"] / summary[best]["median"],
                       "against": best}
    doc = {"benchmark": f"whole-job {args.model} training, reel against PyTorch DDP",
           "command": "bench/ddp/run.py " + " ".join(sys.argv[1:]), "model": args.model,
           "hosts": args.hosts, "rate": args.rate if args.hosts > 1 else None,
           "epochs": args.epochs, "videos": None if args.model == "moe" else args.videos,
           "torch_steps": None if args.model == "moe" else args.torch_steps,
           "torch_seconds": None if args.model == "moe" else args.torch_seconds,
           "torch_openblas": args.torch_blas, "cores": os.cpu_count(),
           "reel_programs": reels,
           "torch_bucket_cap_mb": args.torch_bucket_cap_mb, "torch_gradient_as_bucket_view": True,
           "load_average": os.getloadavg(),
           "examples_per_sec": summary, "ratios_of_medians": ratios, "runs": runs}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    print(json.dumps({"examples_per_sec": summary, "ratios_of_medians": ratios}, indent=1))


if __name__ == "__main__":
    main()
