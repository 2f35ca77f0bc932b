#!/usr/bin/env python3
"""Whole-job training speed of moe on the YouTube-8M video-level shards: `reel train` (1 rank, and
2 under `reel launch -n 2`, transport tcp) against PyTorch DistributedDataParallel (gloo) under
torchrun (bench/ddp/torchrun.py, bench/ddp/torch_moe_ddp.py), 1 and 2 processes on this host.

  bench/ddp/run_moe.py [--build build] [--reps 3] [--epochs 5] [--ranks 1,2] [--out FILE]
      [--hosts 2 [--rate 1gbit]]

Every case is the whole command, timed from its start to its exit: startup, reading the two
training shards (reel each epoch from the files, PyTorch once into memory), training `--epochs`
epochs of batch 32 per rank, Adam. Examples are those all ranks trained (reel: as its last
line counts them; PyTorch: whole batches, steps x 32 x ranks).
Repetitions alternate the four programs; medians, minima and maxima of examples/s over the runs.
PyTorch gets the host's cores over its processes as threads (torch.set_num_threads), as reel's
ranks narrow themselves to theirs.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FILES = ",".join(os.path.join(ROOT, "data", "yt8m", f"validate000{i}.tfrecord") for i in (0, 1))
PYTHON = "/usr/bin/python3"  # Debian's, which has python3-torch


NETNS = os.path.join(ROOT, "tests", "netns", "netns.sh")
PORT = 29517


def run_hosts(commands, env):
    """Runs commands[i] in simulated host i at once; (seconds until all ended, outputs)."""
    start = time.time()
    procs = [subprocess.Popen(["ip", "netns", "exec", f"{HOSTS}-r{i}", "env"] +
                              [f"{k}={v}" for k, v in env.items()] + c, cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for i, c in enumerate(commands)]
    outs = [p.communicate(timeout=900)[0] for p in procs]
    seconds = time.time() - start
    for c, p, o in zip(commands, procs, outs):
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(c)}: {o[-2000:]}")
    return seconds, outs


HOSTS = None  # the namespaces' name with --hosts 2


def run_reel(build, ranks, epochs):
    reel = os.path.join(build, "bin", "reel")
    train = [reel, "train", "--config", os.path.join(ROOT, "bench", "ddp", "moe.pbtxt"),
             "--set", f"trainer.epochs={epochs}"]
    if HOSTS:  # one rank on each simulated host
        a0 = subprocess.check_output([NETNS, "addr", "0"], text=True).strip()
        seconds, outs = run_hosts(
            [[reel, "launch", "-n", "1", "--nnodes", str(ranks), "--node-rank", str(i),
              "--coordinator", f"{a0}:{PORT}", "--"] + train for i in range(ranks)],
            {"REEL_SECRET": "ddp-bench", "OMP_NUM_THREADS": "1"})
        done = re.search(r"trained \d+ steps \((\d+) examples", outs[0])
        return {"seconds": seconds, "examples": int(done.group(1))}
    cmd = train if ranks == 1 else [reel, "launch", "-n", str(ranks), "--"] + train
    start = time.time()
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    seconds = time.time() - start
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {p.stderr[-2000:]}")
    # "trained N steps (X examples, ...)": X counts every rank's examples (each epoch's last,
    # partial batch too).
    done = re.search(r"trained \d+ steps \((\d+) examples", p.stdout + p.stderr)
    if not done:
        raise RuntimeError(f"no 'trained N steps (X examples' line: {p.stdout[-2000:]}")
    return {"seconds": seconds, "examples": int(done.group(1))}


def run_torch(ranks, epochs):
    script = [os.path.join(ROOT, "bench", "ddp", "torch_moe_ddp.py"), "--files", FILES,
              "--epochs", str(epochs)]
    if HOSTS:  # one process on each simulated host, gloo on the namespace's link
        a0 = subprocess.check_output([NETNS, "addr", "0"], text=True).strip()
        seconds, outs = run_hosts(
            [[PYTHON, os.path.join(ROOT, "bench", "ddp", "torchrun.py"), "--nnodes", str(ranks),
              "--node_rank", str(i), "--nproc_per_node", "1", "--master_addr", a0,
              "--master_port", str(PORT + 1)] + script + ["--threads", "1"]
             for i in range(ranks)],
            {"GLOO_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "1"})
        inner = json.loads([l for l in outs[0].splitlines() if l.startswith("{")][-1])
        return {"seconds": seconds, "examples": inner["examples"], "inner": inner}
    cmd = [PYTHON, os.path.join(ROOT, "bench", "ddp", "torchrun.py"), "--nproc_per_node",
           str(ranks)] + script
    start = time.time()
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    seconds = time.time() - start
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if p.returncode != 0 or not lines:
        raise RuntimeError(f"{' '.join(cmd)}: {p.stderr[-2000:]}")
    inner = json.loads(lines[-1])
    return {"seconds": seconds, "examples": inner["examples"], "inner": inner}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--ranks", default="1,2")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "out", "ddp_moe.json"))
    ap.add_argument("--hosts", type=int, default=1,
                    help="2: each rank on a simulated host of its own (network namespaces, "
                    "tests/netns/netns.sh), links limited to --rate, one thread per process")
    ap.add_argument("--rate", default="1gbit")
    args = ap.parse_args()
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
    runs = {}
    for rep in range(args.reps):
        for n in ranks:
            for program in ("reel", "torch_ddp"):
                r = run_reel(args.build, n, args.epochs) if program == "reel" else run_torch(
                    n, args.epochs)
                r["examples_per_sec"] = r["examples"] / r["seconds"]
                runs.setdefault(f"{program}/{n}", []).append(r)
                print(f"rep {rep} {program} {n} rank(s): {r['examples_per_sec']:.1f} examples/s "
                      f"({r['examples']} in {r['seconds']:.1f} s)", file=sys.stderr, flush=True)
    summary = {}
    for key, rs in runs.items():
        eps = sorted(r["examples_per_sec"] for r in rs)
        summary[key] = {"min": eps[0], "median": statistics.median(eps), "max": eps[-1]}
    ratios = {f"reel/torch_ddp {n}": summary[f"reel/{n}"]["median"] /
              summary[f"torch_ddp/{n}"]["median"] for n in ranks}
    doc = {"benchmark": "whole-job moe training, reel against PyTorch DDP",
           "command": "bench/ddp/run_moe.py " + " ".join(sys.argv[1:]),
           "hosts": args.hosts, "rate": args.rate if args.hosts > 1 else None,
           "cores": os.cpu_count(), "load_average": os.getloadavg(),
           "examples_per_sec": summary, "ratios_of_medians": ratios, "runs": runs}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    print(json.dumps({"examples_per_sec": summary, "ratios_of_medians": ratios}, indent=1))


if __name__ == "__main__":
    main()
