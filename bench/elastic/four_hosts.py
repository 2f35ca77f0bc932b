#!/usr/bin/python3
"""Issue 54's target on 4 simulated hosts: `reel launch --nnodes 3:4 --max-restarts 2` against
`torchrun --nnodes 3:4 --max_restarts 2` (c10d rendezvous on host 0) restarting PyTorch DDP, when
every process of host 3 is SIGKILLed mid-epoch and host 3 is started again once the 3 left train.

  bench/elastic/four_hosts.py [--build build] [--reps 3] [--videos 1024] [--test-videos 256]
      [--batch 8] [--every 4] [--kill-after 8] [--rate 1gbit] [--programs reel,torch_ddp]
      --out OUT.json

Hosts: tests/netns/netns.sh, one network namespace per host behind a bridge, links limited to
--rate; one rank per host, one thread. Both sides train bilstm_video (bench/ddp's model, Adam) for
one epoch of frame-level shards from `reel synth` (labels of 16 classes, 3862 outputs; 30-60
frames a video: small, so that a run takes a minute on a loaded 2-core machine), `--batch` per rank, saving their state every
`--every` steps (reel: its checkpoint; PyTorch: TorchElastic's snapshot pattern,
bench/ddp/torch_ddp.py --snapshot) and logging each step's wall time. Both rendezvous close a
round 1 s after the last newcomer (reel --rdzv-last-call-seconds 1, torchrun's last_call_timeout=1;
their defaults are 3 s and 30 s); everything else is the programs' defaults, but that host 0's
agent is told to host the c10d store (is_host=1, the others 0) and each agent runs with the
namespace's address as its host name (unshare --uts): torchrun takes both from the host name, which
the namespaces would share.

Each repetition runs every program twice, alternated: undisturbed, and with host 3's processes
(launcher/agent and rank) SIGKILLed once step `--kill-after` is logged, host 3's launcher started
again once a step after the kill is logged. Per disturbed run: the time lost (from the kill to the
end of the first step after it), whether the group went on with 3 and ended with 4, the steps
trained again. Per run: the final GAP@20 on `--test-videos` held-out videos of the same synthetic
signal (reel eval on the newest checkpoint; PyTorch: rank 0 at its end, the same definition,
docs/metrics.md) and the examples trained (reel: its last line, every example of the epoch once;
PyTorch: the step log's batch x world per step, its snapshot holding no data position). Raw
figures, min/median/max, the command, the CPU and the load go to --out.
"""
import argparse
import glob
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench", "ddp"))
sys.path.insert(0, os.path.join(ROOT, "bench", "elastic"))
from restart_time import steps_logged  # noqa: E402
from run import PYTHON, pick_openblas_core  # noqa: E402

NETNS = os.path.join(ROOT, "tests", "netns", "netns.sh")
NAME = f"reel4b{os.getpid()}"
PORT = 29531
# The labels' classes (the models keep their 3862 outputs): few enough that one short epoch learns
# something, so that the final GAPs can differ.
CLASSES = 16


def data(build, videos, test_videos):
    """Train and test frame-level shards, written once."""
    out = os.path.join(ROOT, "bench", "out", f"elastic4_frames_{videos}_{test_videos}_{CLASSES}")
    if not glob.glob(os.path.join(out, "train", "*.tfrecord")):
        subprocess.run([os.path.join(build, "bin", "reel"), "synth", "--out", out, "--videos",
                        str(videos), "--test-videos", str(test_videos), "--classes", str(CLASSES),
                        "--level", "frame", "--shards", "4", "--min-frames", "30",
                        "--max-frames", "60", "--seed", "1"], check=True, stdout=subprocess.DEVNULL)
    return (sorted(glob.glob(os.path.join(out, "train", "*.tfrecord"))),
            sorted(glob.glob(os.path.join(out, "test", "*.tfrecord"))))



def start(host, cmd, env, log):
    return subprocess.Popen(["ip", "netns", "exec", f"{NAME}-r{host}", "env"] +
                            [f"{k}={v}" for k, v in env.items()] + cmd, cwd=ROOT,
                            stdout=open(log, "w"), stderr=subprocess.STDOUT)


def run_case(command, env, work, step_log, kill_after, timeout=600):
    """Starts command(host) on the 4 hosts; with kill_after, kills host 3 and brings it back.
    Returns the figures and the logs."""
    procs = [start(h, command(h), env, f"{work}/host{h}.log") for h in range(4)]
    begin = time.time()
    killed_at = killed_step = back_at = None
    while time.time() - begin < timeout:
        if all(p.poll() is not None for p in procs
               if p is not procs[3] or back_at or not kill_after):
            break
        done = steps_logged(step_log)
        if kill_after and killed_at is None and done and max(s for s, _, _ in done) >= kill_after:
            killed_step = max(s for s, _, _ in done)
            pids = subprocess.run(["ip", "netns", "pids", f"{NAME}-r3"], capture_output=True,
                                  text=True).stdout.split()
            killed_at = time.time()
            for pid in pids:
                os.kill(int(pid), signal.SIGKILL)
            procs[3].wait()
        if killed_at and back_at is None and any(w > killed_at for _, w, _ in done):
            back_at = time.time()
            procs[3] = start(3, command(3), env, f"{work}/host3-again.log")
        time.sleep(0.05)
    logs = {os.path.basename(f): open(f).read() for f in sorted(glob.glob(f"{work}/host*.log"))}
    for h, p in enumerate(procs):
        if p.poll() is None:
            p.kill()
            raise RuntimeError(f"host {h} still runs after {timeout} s: {logs}")
        if p.returncode != 0:
            raise RuntimeError(f"host {h} exited {p.returncode}: {logs}")
    # The logs' ends, with paths in the tree relative to it (scripts/check-paths.sh).
    r = {"seconds": time.time() - begin,
         "logs_tail": {k: v[-1500:].replace(ROOT + "/", "") for k, v in logs.items()}}
    done = steps_logged(step_log)
    r["steps_logged"] = len(done)
    if killed_at:
        after = sorted((w, s, world) for s, w, world in done if w > killed_at)
        r.update(killed_step=killed_step, first_step_after=after[0][1],
                 steps_again=killed_step - (after[0][1] - 1), lost_s=after[0][0] - killed_at,
                 back_after_kill_s=back_at - killed_at)
    return r, logs, done


def reel_case(args, files, tests, work, kill):
    reel = os.path.join(args.build, "bin", "reel")
    log = f"{work}/metrics.jsonl"
    a0 = subprocess.check_output([NETNS, "addr", "0"], text=True).strip()
    train = [reel, "train", "--config", os.path.join(ROOT, "bench", "ddp", "bilstm_video.pbtxt"),
             "--set", "data.options.files=" + os.path.join(os.path.dirname(files[0]), "*.tfrecord"),
             "--set", f"trainer.batch_size={args.batch}", "--set", "trainer.epochs=1",
             "--set", f"trainer.checkpoint_dir={work}/ckpt",
             "--set", f"trainer.checkpoint_every_steps={args.every}",
             "--set", "trainer.log_every_steps=1", "--set", f"trainer.metrics_log={log}"]

    def command(host):
        return [reel, "launch", "-n", "1", "--nnodes", "3:4", "--max-restarts", "2",
                "--coordinator", f"{a0}:{PORT}", "--rdzv-last-call-seconds", "1", "--"] + train
    env = {"LD_LIBRARY_PATH": os.path.join(args.build, "lib"), "OMP_NUM_THREADS": "1",
           "REEL_SECRET": f"four-hosts-{os.getpid()}",
           "REEL_JOB_ID": f"four-hosts-{os.getpid()}-{time.time_ns()}"}
    r, logs, _ = run_case(command, env, work, log, kill)
    host0 = logs["host0.log"]
    r["formed"] = re.findall(r"rendezvous: round (\d+) formed with (\d+) node", host0)
    r["went_on_with_3"] = any(n == "3" for _, n in r["formed"])
    r["ended_with"] = int(r["formed"][-1][1])
    done = re.findall(r"trained (\d+) steps \((\d+) examples, epoch", host0)
    r["final_step"], r["examples"] = int(done[-1][0]), int(done[-1][1])
    ev = subprocess.run([reel, "eval", "--checkpoint", f"{work}/ckpt", "--data",
                         os.path.join(os.path.dirname(tests[0]), "*.tfrecord"), "--json"],
                        capture_output=True, text=True, check=True,
                        env=dict(os.environ, LD_LIBRARY_PATH=env["LD_LIBRARY_PATH"]))
    r["gap"] = json.loads(ev.stdout.strip().splitlines()[-1])["gap"]
    return r


def torch_case(args, files, tests, work, kill):
    log = f"{work}/steps.jsonl"
    a0 = subprocess.check_output([NETNS, "addr", "0"], text=True).strip()

    def command(host):
        # Its own host name, the namespace's address: torchrun's agents give the workers the
        # rank-0 agent's host name as MASTER_ADDR, and the namespaces share this machine's
        # ("localhost" to getfqdn here), so every worker would look for the master on its own
        # loopback.
        addr = subprocess.check_output([NETNS, "addr", str(host)], text=True).strip()
        return ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', addr,
                PYTHON, os.path.join(ROOT, "bench", "ddp", "torchrun.py"), "--nnodes", "3:4",
                "--nproc_per_node", "1", "--max_restarts", "2", "--rdzv_backend", "c10d",
                "--rdzv_endpoint", f"{a0}:{PORT + 1}", "--rdzv_id", f"four-hosts-{os.getpid()}",
                "--rdzv_conf", f"last_call_timeout=1,is_host={int(host == 0)}",
                os.path.join(ROOT, "bench", "ddp", "torch_ddp.py"), "--model", "bilstm_video",
                "--files", ",".join(files), "--batch", str(args.batch), "--threads", "1",
                "--bucket-cap-mb", "25", "--gradient-as-bucket-view",
                "--snapshot", f"{work}/snapshot.pt", "--snapshot-every", str(args.every),
                "--step-log", log, "--eval-files", ",".join(tests)]
    env = dict(args.torch_env, GLOO_SOCKET_IFNAME="eth0", OMP_NUM_THREADS="1")
    r, logs, done = run_case(command, env, work, log, kill)
    inner = [json.loads(line) for line in logs["host0.log"].splitlines() if line.startswith("{")]
    worlds = [w for _, _, w in done]
    r["went_on_with_3"] = 3 in worlds
    r["ended_with"] = inner[-1]["ranks"]
    r["final_step"] = max(s for s, _, _ in done)
    r["examples"] = sum(args.batch * w for w in worlds)
    r["gap"] = inner[-1]["gap"]
    return r


def spread(values):
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--videos", type=int, default=1024)
    ap.add_argument("--test-videos", type=int, default=256)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--every", type=int, default=4, help="steps between saved states")
    ap.add_argument("--kill-after", type=int, default=8, help="host 3 killed after this step")
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--programs", default="reel,torch_ddp")
    ap.add_argument("--cases", default="killed,undisturbed")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the namespaces go on the way out
    files, tests = data(args.build, args.videos, args.test_videos)
    programs = args.programs.split(",")
    args.torch_env, blas = pick_openblas_core(PYTHON, "auto") if "torch_ddp" in programs else (
        {}, None)
    subprocess.run([NETNS, "up", NAME, "4", args.rate], check=True)
    cases = args.cases.split(",")
    runs = {f"{p}/{c}": [] for p in programs for c in cases}
    try:
        for rep in range(args.reps):
            order = programs if rep % 2 == 0 else list(reversed(programs))
            for program in order:
                for case in cases:
                    with tempfile.TemporaryDirectory(prefix="reel-four-hosts-") as work:
                        run = reel_case if program == "reel" else torch_case
                        try:
                            r = run(args, files, tests, work,
                                    args.kill_after if case == "killed" else 0)
                        except (RuntimeError, subprocess.CalledProcessError, IndexError,
                                KeyError) as e:
                            r = {"failed": str(e)[-3000:]}
                    runs[f"{program}/{case}"].append(r)
                    print(f"rep {rep} {program} {case}: " + json.dumps(
                        {k: v for k, v in r.items() if k != "logs_tail"})[:600], flush=True)
    finally:
        for host in range(4):
            for pid in subprocess.run(["ip", "netns", "pids", f"{NAME}-r{host}"],
                                      capture_output=True, text=True).stdout.split():
                os.kill(int(pid), signal.SIGKILL)
        subprocess.run([NETNS, "down", NAME])
    summary = {}
    for key, rs in runs.items():
        ok = [r for r in rs if "failed" not in r]
        s = {"runs": len(rs), "failed": len(rs) - len(ok)}
        for k in ("lost_s", "steps_again", "gap", "examples", "seconds"):
            if ok and all(k in r for r in ok):
                s[k] = spread([r[k] for r in ok])
        for k in ("went_on_with_3", "ended_with"):
            if ok:
                s[k] = [r.get(k) for r in ok]
        summary[key] = s
    with open("/proc/cpuinfo") as f:
        info = dict(map(str.strip, line.split(":", 1))
                    for line in f.read().split("\n\n")[0].splitlines() if ":" in line)
    record = {"benchmark": "four_hosts", "command": " ".join(sys.argv),
              "cpu": {k: info[k] for k in ("cpu family", "model", "model name")},
              "cores": os.cpu_count(), "load_average": os.getloadavg(), "hosts": 4,
              "rate": args.rate, "videos": args.videos, "test_videos": args.test_videos,
              "batch": args.batch, "every": args.every, "kill_after": args.kill_after,
              "torch_openblas": blas, "summary": summary, "runs": runs}
    with open(args.out, "w") as f:
        json.dump(record, f, indent=1)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
