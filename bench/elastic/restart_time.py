#!/usr/bin/python3
"""Time lost per failure: `reel launch --max-restarts 1` restarting `reel train` against
`torchrun --max-restarts 1` restarting PyTorch DDP, when one of 2 ranks is SIGKILLed mid-epoch
(issue 54).

  bench/elastic/restart_time.py [--build build] [--reps 3] [--videos 512] [--every 4]
      [--kill-after 6] [--out OUT.json]

Both sides train bilstm_video (bench/ddp's shapes and data: frame-level shards from `reel synth`,
batch 32 per rank, Adam) on 2 processes of this host, writing their state every `--every` steps
(reel: its checkpoint, trainer.checkpoint_every_steps; PyTorch: TorchElastic's snapshot pattern,
rank 0 saving model, optimizer and step with torch.save, bench/ddp/torch_ddp.py --snapshot) and
logging each step's wall time (reel: trainer.metrics_log with log_every_steps 1; PyTorch:
--step-log). When the log shows step `--kill-after` done, rank 1's process gets SIGKILL. The time
lost is from the kill to the end of the first step after it (what the restarted job has trained
by then, from the newest state: noticing the loss, stopping the other rank, starting again,
forming the group, loading the state, its first step); the steps trained again are the kill's step
minus the state's. Repetitions alternate the programs; min/median/max per program.
"""
import argparse
import glob
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench", "ddp"))
from run import PYTHON, frame_data, pick_openblas_core  # noqa: E402


def rank1_pid(root_pid, env_key):
    """The pid of the process below `root_pid` whose environment has env_key=1."""
    for stat in glob.glob("/proc/[0-9]*/stat"):
        pid = int(stat.split("/")[2])
        try:
            chain, p = [], pid
            while p > 1:  # is root_pid an ancestor?
                with open(f"/proc/{p}/stat") as f:
                    p = int(f.read().rsplit(")", 1)[1].split()[1])
                chain.append(p)
            if root_pid not in chain:
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                if f"{env_key}=1".encode() in f.read().split(b"\0"):
                    return pid
        except (OSError, ValueError, IndexError):
            continue
    return None


def steps_logged(path):
    """(step, wall_time, world or None) of every training-step record the log holds so far:
    reel's (with a loss; its evaluation records have none) and torch_ddp.py --step-log's (step,
    wall time and, when it logs it, the world size)."""
    out = []
    if os.path.exists(path):
        for line in open(path):
            try:
                r = json.loads(line)
            except ValueError:
                continue  # a line still being written
            if "step" in r and "wall_time" in r and (
                    "loss" in r or set(r) <= {"step", "wall_time", "world"}):
                out.append((int(r["step"]), float(r["wall_time"]), r.get("world")))
    return out


def run_case(cmd, env, log, env_key, kill_after, timeout=900):
    """Runs cmd, kills rank 1 after step kill_after; returns the figures of the run."""
    start = time.time()
    p = subprocess.Popen(cmd, cwd=ROOT, env=dict(os.environ, **env), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
    killed_at, killed_step = None, None
    while p.poll() is None and time.time() - start < timeout:
        done = steps_logged(log)
        if killed_at is None and done and max(s for s, _, _ in done) >= kill_after:
            pid = rank1_pid(p.pid, env_key)
            if pid:
                killed_step = max(s for s, _ in done)
                killed_at = time.time()
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
    out = p.communicate(timeout=max(1, timeout - (time.time() - start)))[0]
    if p.returncode != 0 or killed_at is None:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}, killed "
                           f"{killed_at is not None}: {out[-3000:]}")
    after = sorted((w, s) for s, w, _ in steps_logged(log) if w > killed_at)
    first_wall, first_step = after[0]
    return {"seconds": time.time() - start, "killed_step": killed_step,
            "first_step_after": first_step, "steps_again": killed_step - (first_step - 1),
            "lost_s": first_wall - killed_at, "final_step": max(s for _, s in after)}


def reel_case(args, files, work):
    reel = os.path.join(args.build, "bin", "reel")
    log = os.path.join(work, "metrics.jsonl")
    cmd = [reel, "launch", "-n", "2", "--max-restarts", "1", "--", reel, "train", "--config",
           os.path.join(ROOT, "bench", "ddp", "bilstm_video.pbtxt"),
           "--set", "data.options.files=" + os.path.join(os.path.dirname(files[0]), "*.tfrecord"),
           "--set", f"trainer.checkpoint_dir={work}/ckpt",
           "--set", f"trainer.checkpoint_every_steps={args.every}",
           "--set", "trainer.log_every_steps=1", "--set", f"trainer.metrics_log={log}"]
    return run_case(cmd, {"LD_LIBRARY_PATH": os.path.join(args.build, "lib")}, log, "REEL_RANK",
                    args.kill_after)


def torch_case(args, files, work):
    log = os.path.join(work, "steps.jsonl")
    cmd = [PYTHON, os.path.join(ROOT, "bench", "ddp", "torchrun.py"), "--nproc_per_node", "2",
           "--max_restarts", "1", os.path.join(ROOT, "bench", "ddp", "torch_ddp.py"),
           "--model", "bilstm_video", "--files", ",".join(files), "--threads", "1",
           "--bucket-cap-mb", "25", "--gradient-as-bucket-view",
           "--snapshot", f"{work}/snapshot.pt", "--snapshot-every", str(args.every),
           "--step-log", log]
    return run_case(cmd, args.torch_env, log, "RANK", args.kill_after)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--videos", type=int, default=512)
    ap.add_argument("--every", type=int, default=4, help="steps between saved states")
    ap.add_argument("--kill-after", type=int, default=6, help="rank 1 killed after this step")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    files = frame_data(args.build, args.videos)
    args.torch_env, blas = pick_openblas_core(PYTHON, "auto")
    runs = {"reel": [], "torch_ddp": []}
    for rep in range(args.reps):
        order = list(runs) if rep % 2 == 0 else list(reversed(runs))
        for program in order:
            with tempfile.TemporaryDirectory(prefix="reel-restart-") as work:
                r = (reel_case if program == "reel" else torch_case)(args, files, work)
            runs[program].append(r)
            print(f"rep {rep} {program}: lost {r['lost_s']:.2f} s, killed after step "
                  f"{r['killed_step']}, trained again {r['steps_again']} step(s)", flush=True)
    summary = {p: {k: statistics.median(r[k] for r in rs) for k in ("lost_s", "steps_again")} |
               {"lost_s_min": min(r["lost_s"] for r in rs),
                "lost_s_max": max(r["lost_s"] for r in rs)} for p, rs in runs.items()}
    with open("/proc/cpuinfo") as f:
        info = dict(map(str.strip, l.split(":", 1)) for l in f.read().split("\n\n")[0].splitlines()
                    if ":" in l)
    record = {"benchmark": "restart_time", "command": " ".join(sys.argv),
              "cpu": {k: info[k] for k in ("cpu family", "model", "model name")},
              "cores": os.cpu_count(), "load_average": os.getloadavg(), "videos": args.videos,
              "every": args.every, "kill_after": args.kill_after, "torch_openblas": blas,
              "summary": summary, "runs": runs}
    with open(args.out, "w") as f:
        json.dump(record, f, indent=1)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
