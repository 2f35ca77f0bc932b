#!/usr/bin/env python3
"""async_sgd experiments (issue 12), over tcp on loopback, one process per rank (`reel launch`):

  1. ps_push_pull: push+pull round trips per second and GB/s of 10M parameters with 1-3 workers
     (one server), beside the same transport's allreduce of the same parameters by the same
     processes in the same run, compared as whole jobs (gradients /s of all workers against calls
     x ranks) and per step of all workers (one worker's round trips against calls), as
     docs/benchmarks.md counts them (--sequential-too: also with the push and the pull one after
     the other, pipeline=false);
  2. training: bilstm_video (hidden 16) on synthetic frame-level data, `sync` with 1-3 ranks and
     `async_sgd` with 1-3 workers (+1 server), then async with 3 workers and the staleness-aware
     rate, and with frequency: epoch. Per run: examples/s (metrics log), the first evaluation at or
     above --target held-out GAP (fixed before the runs), its wall time and the examples it took.
     The metrics log's examples_per_sec is the whole job's (every worker's); the figures in
     bench/journal/async_sgd.md (all sections so far) were taken when an async run's was the lead's
     own ("lead's window rate").

  3. overlap (--only async_2w,async_2w_overlap --eval-every 0 --json async_sgd_overlap.json):
     async with 2 workers, the exchange in line with the step or overlapped with the next step's
     compute (option overlap), wall time of a fixed number of steps.

  4. simulated hosts (--link netns): every rank in its own network namespace, the links limited
     to --rate (default 1gbit) with tc tbf (tests/netns/netns.sh; needs root), each rank started
     with `ip netns exec` instead of `reel launch`;
  5. a harder dataset (--data hard): 32 classes, up to 3 labels a video, weak class patterns
     (amplitude 0.15) in noise (sigma 1.0), so that the configurations need several
     evaluations to reach a target.

  bench/async_sgd/run_async_bench.py [--build build] [--reps 3] [--out bench/out]
      [--link loopback|netns] [--rate 1gbit] [--data easy|hard]

Every repetition runs every case once, in turn, so drift on this shared machine hits all alike.
Writes OUT/async_sgd.json (--json names it); the tables in bench/journal/async_sgd.md are written
by hand from such files.
"""
import argparse
import json
import os
import re
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


NETNS = os.path.join(ROOT, "tests", "netns", "netns.sh")
DATA = {  # reel synth arguments besides --out
    "easy": ["--videos", "600", "--classes", "8", "--level", "frame", "--shards", "5",
             "--min-frames", "4", "--max-frames", "8", "--max-labels", "2", "--seed", "11"],
    "hard": ["--videos", "1200", "--classes", "32", "--level", "frame", "--shards", "5",
             "--min-frames", "4", "--max-frames", "8", "--max-labels", "3", "--amplitude", "0.15",
             "--noise", "1.0", "--seed", "11"],
}
CLASSES = {"easy": 8, "hard": 32}
NETNS_NAME = None  # the namespaces of --link netns, once up


def launch(reel, n, command, timeout=900):
    if NETNS_NAME is None:
        out = subprocess.run([reel, "launch", "-n", str(n), "--"] + command, capture_output=True,
                             text=True, timeout=timeout)
        if out.returncode != 0:
            raise RuntimeError(f"launch -n {n} {' '.join(command)} failed:\n{out.stdout}\n{out.stderr}")
        return out.stdout + out.stderr
    # Simulated hosts: rank i in namespace NAME-ri, rank 0's address the coordinator's.
    addr0 = subprocess.check_output([NETNS, "addr", "0"], text=True).strip()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, REEL_WORLD_SIZE=str(n), REEL_COORDINATOR=f"{addr0}:{port}",
               REEL_SECRET=secrets.token_hex(16))
    procs = [subprocess.Popen(["ip", "netns", "exec", f"{NETNS_NAME}-r{i}"] + command,
                              env=dict(env, REEL_RANK=str(i)), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for i in range(n)]
    outs = [p.communicate(timeout=timeout)[0] for p in procs]
    if any(p.returncode != 0 for p in procs):
        raise RuntimeError(f"netns ranks {' '.join(command)} failed:\n" + "\n".join(outs))
    return "\n".join(outs)


def push_pull(reel, bench, workers, floats, iters, options=()):
    extra = [a for o in options for a in ("--option", o)]
    out = launch(reel, workers + 1, [bench, "--transport", "tcp", "--floats", str(floats),
                                     "--iters", str(iters)] + extra)
    row = {}
    for kind in ("push_pull", "allreduce"):
        m = re.search(kind + r" .*?seconds_per_\w+=([0-9.]+) \w+_per_second=([0-9.]+) "
                      r"GB_per_second=([0-9.]+)", out)
        row[kind] = {"seconds": float(m.group(1)), "per_second": float(m.group(2)),
                     "GBps": float(m.group(3))}
    m = re.search(r"all_workers_round_trips_per_second=([0-9.]+) all_workers_GB_per_second=([0-9.]+)",
                  out)
    row["push_pull"].update(all_per_second=float(m.group(1)), all_GBps=float(m.group(2)))
    # Whole jobs (docs/benchmarks.md): gradients /s of all workers against those of the sync job
    # of the same processes (calls x ranks); per step of all workers, R against C.
    row["allreduce"]["all_per_second"] = row["allreduce"]["per_second"] * (workers + 1)
    row["whole_job_ratio"] = row["push_pull"]["all_per_second"] / row["allreduce"]["all_per_second"]
    row["per_step_ratio"] = row["push_pull"]["per_second"] / row["allreduce"]["per_second"]
    return row


CONFIG = """data {{ name: "tfrecord" options {{ key: "files" value: "{data}/train000[0-3].tfrecord" }}
  options {{ key: "level" value: "frame" }} options {{ key: "max_frames" value: "8" }} }}
eval_data {{ name: "tfrecord" options {{ key: "files" value: "{data}/train0004.tfrecord" }}
  options {{ key: "level" value: "frame" }} options {{ key: "max_frames" value: "8" }} }}
model {{ name: "bilstm_video" options {{ key: "hidden" value: "16" }} }}
optimizer {{ name: "{optimizer}" {options} }}
{transport}
trainer {{ steps: {steps} batch_size: 32 seed: 1 num_classes: {classes} learning_rate {{ base: {lr} warmup_steps: {warmup} }}
  log_every_steps: 10 eval_every_steps: {eval_every} metrics_log: "{run}/metrics.jsonl" }}
"""


def train(reel, work, data, name, ranks, optimizer, options, steps, eval_every, target, classes,
          lr=0.01, warmup=0):
    run = tempfile.mkdtemp(prefix=name + "-", dir=work)
    opts = " ".join(f'options {{ key: "{k}" value: "{v}" }}' for k, v in options.items())
    config = os.path.join(run, "run.pbtxt")
    with open(config, "w") as f:
        f.write(CONFIG.format(data=data, optimizer=optimizer, options=opts, steps=steps, lr=lr,
                              warmup=warmup,
                              eval_every=eval_every, run=run, classes=classes,
                              transport='transport { name: "tcp" }' if NETNS_NAME else ""))
    start = time.time()
    out = launch(reel, ranks, [reel, "train", "--config", config, "--quiet"])
    wall = time.time() - start
    # The job's examples as the lead's last line counts them (every worker's, async included).
    done = re.findall(r"trained \d+ steps \((\d+) examples", out)
    rates, evals = [], []
    with open(os.path.join(run, "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if "examples_per_sec" in r:
                rates.append(r["examples_per_sec"])
            if "eval_gap" in r:
                evals.append((r["step"], r["eval_gap"], r["wall_time"], r.get("job_examples")))
    workers = ranks - 1 if optimizer == "async_sgd" else ranks
    hit = next((e for e in evals if e[1] >= target), None)
    # Whole job (docs/benchmarks.md): examples over the command's start to exit. The log's
    # window rates are kept beside it as what they are. Examples to the target: the job's count
    # on the evaluation's line (every worker's, docs/training.md); logs of builds before it
    # had none, and keep the estimate step x 32 x workers under its own name.
    job_examples = max(int(x) for x in done) if done else None
    return {"wall_seconds": wall,
            "job_examples": job_examples,
            "whole_job_examples_per_sec": job_examples / wall if job_examples else None,
            "log_window_examples_per_sec_median": statistics.median(rates),
            "final_gap": evals[-1][1] if evals else None,
            "gaps": [e[1] for e in evals],
            "target_step": hit[0] if hit else None,
            "target_examples": hit[3] if hit else None,
            "target_examples_estimate": hit[0] * 32 * workers if hit else None,
            "target_seconds": hit[2] - start if hit else None}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--floats", type=int, default=10_000_000)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--target", type=float, default=0.6, help="held-out GAP to reach")
    ap.add_argument("--skip", default="", help="comma list: push_pull,train")
    ap.add_argument("--only", default="", help="comma list of training cases (default: all)")
    ap.add_argument("--eval-every", type=int, default=10,
                    help="evaluation interval in steps (0: only the final one)")
    ap.add_argument("--json", default="async_sgd.json", help="result file name in --out")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "out"))
    ap.add_argument("--link", default="loopback", choices=("loopback", "netns"))
    ap.add_argument("--rate", default="1gbit", help="tc rate of each link with --link netns")
    ap.add_argument("--data", default="easy", choices=sorted(DATA))
    ap.add_argument("--sequential-too", action="store_true",
                    help="ps_push_pull also with pipeline=false, alternated with the default")
    ap.add_argument("--workers", default="1,2,3", help="worker counts of ps_push_pull")
    ap.add_argument("--chunks", default="",
                    help="ps_push_pull also with these pipeline_chunk values (floats, comma-"
                         "separated; key <workers>_chunk<N>), alternated with the default")
    args = ap.parse_args()
    if args.link == "netns":
        global NETNS_NAME
        name = f"reelasync{os.getpid()}"
        up = subprocess.run([NETNS, "up", name, "4", args.rate], capture_output=True, text=True)
        if up.returncode != 0:
            sys.exit(f"cannot create the namespaces: {up.stderr.strip()}")
        NETNS_NAME = name
    try:
        run_all(args)
    finally:
        if NETNS_NAME:
            subprocess.run([NETNS, "down", NETNS_NAME])


def run_all(args):
    reel = os.path.join(args.build, "bin", "reel")
    bench = os.path.join(args.build, "bench", "async_sgd", "ps_push_pull")
    if not os.path.exists(bench):
        bench = os.path.join(args.build, "bin", "ps_push_pull")
    skip = set(args.skip.split(","))
    results = {"command": "bench/async_sgd/run_async_bench.py " + " ".join(sys.argv[1:]),
               "loads": [os.getloadavg()], "push_pull": {}, "train": {}}
    work = tempfile.mkdtemp(prefix="reel-async-bench-")
    data = os.path.join(work, "data")
    subprocess.run([reel, "synth", "--out", data] + DATA[args.data], check=True,
                   capture_output=True)
    results.update(link=args.link, rate=args.rate if args.link == "netns" else None,
                   data=args.data)
    cases = [("sync_1", 1, "sync", {"rule": "adam"}),
             ("sync_2", 2, "sync", {"rule": "adam"}),
             ("sync_3", 3, "sync", {"rule": "adam"}),
             # as many processes as async with 3 workers and a server
             ("sync_4", 4, "sync", {"rule": "adam"}),
             ("async_1w", 2, "async_sgd", {"rule": "adam"}),
             ("async_2w", 3, "async_sgd", {"rule": "adam"}),
             ("async_3w", 4, "async_sgd", {"rule": "adam"}),
             ("async_3w_staleness", 4, "async_sgd", {"rule": "adam", "staleness_aware": "true"}),
             ("async_3w_epoch", 4, "async_sgd", {"rule": "adam", "frequency": "epoch"}),
             ("async_2w_overlap", 3, "async_sgd", {"rule": "adam", "overlap": "true"}),
             # sync with the learning rate scaled by the rank count (0.01 x N), beside async
             # whose N workers each apply their own update at 0.01.
             ("sync_2_lr_x2", 2, "sync", {"rule": "adam"}, 0.02),
             ("sync_3_lr_x3", 3, "sync", {"rule": "adam"}, 0.03),
             # the same with a linear warm-up over the first 15 steps (Goyal et al. 2017)
             ("sync_2_lr_x2_warmup", 2, "sync", {"rule": "adam"}, 0.02, 15),
             ("sync_3_lr_x3_warmup", 3, "sync", {"rule": "adam"}, 0.03, 15)]
    if args.only:
        cases = [c for c in cases if c[0] in args.only.split(",")]
    for rep in range(args.reps):
        if "push_pull" not in skip:
            for w in (int(x) for x in args.workers.split(",")):
                # With --sequential-too, the pipelined push+pull (the default) and the push and
                # pull one after the other (key "<w>_sequential") alternate; with --chunks, the
                # default and the other chunk sizes.
                variants = [(str(w), ())]
                if args.sequential_too:
                    variants.append((f"{w}_sequential", ("pipeline=false",)))
                for n in filter(None, args.chunks.split(",")):
                    variants.append((f"{w}_chunk{n}", (f"pipeline_chunk={n}",)))
                for key, options in variants:
                    row = push_pull(reel, bench, w, args.floats, args.iters, options)
                    results["push_pull"].setdefault(key, []).append(row)
                    print(f"rep {rep} push_pull {key}: {row}", flush=True)
        if "train" not in skip:
            for name, ranks, optimizer, options, *lr in cases:
                row = train(reel, work, data, name, ranks, optimizer, options, args.steps,
                            args.eval_every or args.steps, args.target, CLASSES[args.data], *lr)
                results["train"].setdefault(name, []).append(row)
                print(f"rep {rep} {name}: {row}", flush=True)
        results["loads"].append(os.getloadavg())
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, args.json), "w") as f:
        json.dump(results, f, indent=1)
    print(json.dumps(results["loads"]))


if __name__ == "__main__":
    main()
