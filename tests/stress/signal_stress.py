#!/usr/bin/env python3
"""Stop signals at random moments, counted: the record issue 49 asks for.

Each run starts a reel command on small synthetic data and sends it SIGINT, SIGTERM, or two or
three TERMs 0.05-1 s apart, at a random moment (forming the group, opening data, steps,
evaluation, while a checkpoint is written, between tuning trials) or just as a checkpoint's
temporary file appears. Commands: `reel train` of every model with both optimizers, on one rank
and under `reel launch -n 2`; `reel tune`; `reel eval` and `reel predict`.

A run is good when it ends with status 130 (or 0 when its work was done before the signal landed)
and leaves in its checkpoint folder complete checkpoints only: no temporary file left as the
newest, and the newest checkpoint loads (`reel eval` on it). Anything else is counted as what it
is (abort, killed by a signal, sanitizer report, other status, hung, bad checkpoint) and fails the
harness. A signal sent within milliseconds of exec, before main, ends any program by its default
action; such a run (no output, nothing written) is counted apart and is not a failure. docs/training.md says what each signal does; docs/reliability.md has the record's row.

  signal_stress.py --reel BUILD/bin/reel --runs 500 --seed 1 --record OUT.jsonl [--workdir DIR]
"""
import argparse
import collections
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

MODELS = {  # model -> the data level it reads
    "bilstm_audio": "frame",
    "bilstm_video": "frame",
    "two_stream": "frame",
    "moe": "video",
    "logistic": "video",
}
PATTERNS = ["INT", "TERM", "TERM TERM", "TERM TERM TERM"]
BEFORE_MAIN = "ended by the signal before main"
GOOD = ("stopped 130", "finished 0", BEFORE_MAIN)
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                   "WARNING: ThreadSanitizer")


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def prepare(reel, work):
    """Data at both levels and a small checkpoint for eval and predict, made once."""
    for level, extra in (("frame", ["--min-frames", "20", "--max-frames", "60"]), ("video", [])):
        out = os.path.join(work, "data-" + level)
        if not os.path.isdir(out):
            run([reel, "synth", "--out", out, "--videos", "512", "--test-videos", "96",
                 "--classes", "8", "--level", level, "--shards", "2", "--seed", "3"] + extra)
    ckpt = os.path.join(work, "eval-ckpt")
    if not os.path.isdir(ckpt):
        run([reel, "train", "--quiet"] + train_args(work, "moe", "sync", ckpt, steps=4))
    return ckpt


def train_args(work, model, optimizer, ckpt, steps=1000000, rng=None):
    level = MODELS[model]
    data = os.path.join(work, "data-" + level)
    config = model
    args = ["--config", os.path.join(REPO, "configs", config + ".pbtxt"),
            "--set", "model.name=" + model,
            "--set", "data.options.files=%s/train/*.tfrecord" % data,
            "--set", "eval_data.options.files=%s/test/*.tfrecord" % data,
            "--set", "data.options.level=" + level, "--set", "eval_data.options.level=" + level,
            "--set", "trainer.num_classes=8", "--set", "trainer.batch_size=8",
            "--set", "trainer.steps=%d" % steps, "--set", "trainer.epochs=0",
            "--set", "trainer.checkpoint_dir=" + ckpt,
            "--set", "trainer.metrics_log=", "--set", "trainer.tensorboard_dir=",
            "--set", "trainer.log_every_steps=5"]
    if model.startswith("bilstm") or model == "two_stream":
        hidden = ["model.options.hidden=16"] if model != "two_stream" else [
            "model.options.video_hidden=16", "model.options.audio_hidden=16"]
        for h in hidden:
            args += ["--set", h]
        args += ["--set", "data.options.max_frames=60", "--set", "eval_data.options.max_frames=60"]
    if model == "moe":
        args += ["--set", "model.options.experts=2"]
    if level == "video":
        args += ["--set", "trainer.learning_rate.base=0.01"]
    if rng is not None:
        args += ["--set", "trainer.checkpoint_every_steps=%d" % rng.choice([0, 3, 10, 25]),
                 "--set", "trainer.eval_every_steps=%d" % rng.choice([0, 0, 10, 30]),
                 "--set", "trainer.keep_checkpoints=2"]
    if optimizer == "async_sgd":
        args += ["--set", "optimizer.name=async_sgd", "--set", "optimizer.options.rule=adagrad",
                 "--set", "optimizer.options.servers=1"]
    return args


def tune_config(work, path):
    """The demo's ASHA search over this work folder's frame data (8 classes)."""
    data = os.path.join(work, "data-frame")
    with open(os.path.join(REPO, "configs", "tune_bilstm_asha.pbtxt")) as f:
        text = f.read().replace("reel-demo/data", data).replace("num_classes: 16", "num_classes: 8")
    with open(path, "w") as f:
        f.write(text)


def make_case(rng, work, n, reel):
    kind = rng.choices(["train", "launch", "tune", "eval", "predict"], [60, 22, 8, 5, 5])[0]
    case = {"n": n, "kind": kind, "pattern": rng.choice(PATTERNS),
            "gaps": [round(rng.uniform(0.05, 1.0), 3) for _ in range(2)]}
    out = os.path.join(work, "runs", "%04d" % n)
    case["ckpt"] = os.path.join(out, "ckpt")
    if kind in ("train", "launch"):
        case["model"] = rng.choice(sorted(MODELS))
        case["optimizer"] = rng.choice(["sync", "async_sgd"])
        args = train_args(work, case["model"], case["optimizer"], case["ckpt"], rng=rng)
        if case["optimizer"] == "async_sgd" and kind == "train":
            args += ["--set", "trainer.local_ranks=2"]
        cmd = [reel, "train", "--quiet"] + args
        if kind == "launch":
            cmd = [reel, "launch", "-n", "2", "--"] + cmd
        # Targeted at a checkpoint being written in a third of the runs that write them.
        writes = "trainer.checkpoint_every_steps=0" not in args
        case["moment"] = "checkpoint" if writes and rng.random() < 0.33 else "random"
    elif kind == "tune":
        config = os.path.join(work, "tune.pbtxt")
        if not os.path.exists(config):
            tune_config(work, config)
        cmd = [reel, "tune", "--config", config, "--workdir", os.path.join(out, "tune")]
        case["moment"] = "random"
        case["ckpt"] = None
    else:
        test = os.path.join(work, "data-video", "test", "*.tfrecord")
        cmd = [reel, kind, "--checkpoint", os.path.join(work, "eval-ckpt"), "--data", test]
        if kind == "predict":
            cmd += ["--out", os.path.join(out, "pred.csv")]
        case["moment"] = "random"
        case["ckpt"] = None
    case["delay"] = round(rng.uniform(0.0, 3.0 if kind in ("train", "launch", "tune") else 0.4), 3)
    case["cmd"] = cmd
    os.makedirs(out, exist_ok=True)
    return case


def names_oldest_first(ckpt):
    """Names in the checkpoint folder, newest last (by modification time)."""
    try:
        entries = [(os.stat(os.path.join(ckpt, e)).st_mtime_ns, e) for e in os.listdir(ckpt)]
    except FileNotFoundError:
        return []
    return [e for _, e in sorted(entries)]


def wait_for_tmp(proc, ckpt, limit):
    end = time.monotonic() + limit
    while time.monotonic() < end and proc.poll() is None:
        try:
            if any(".tmp" in e for e in os.listdir(ckpt)):
                return True
        except FileNotFoundError:
            pass
        time.sleep(0.002)
    return False


def execute(case, reel, work, timeout):
    err_path = os.path.join(work, "runs", "%04d" % case["n"], "stderr.txt")
    with open(err_path, "w") as err:
        began = time.monotonic()
        proc = subprocess.Popen(case["cmd"], stdout=subprocess.DEVNULL, stderr=err, cwd=REPO,
                                start_new_session=True)
        if case["moment"] == "checkpoint":
            case["hit_tmp"] = wait_for_tmp(proc, case["ckpt"], 10)
        else:
            time.sleep(case["delay"])
        sent = []
        signals = case["pattern"].split()
        for i, name in enumerate(signals):
            if proc.poll() is not None:
                break
            proc.send_signal(getattr(signal, "SIG" + name))
            sent.append(round(time.monotonic() - began, 3))
            if i + 1 < len(signals):
                time.sleep(case["gaps"][i])
        case["sent_at"] = sent
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = None
        case["seconds"] = round(time.monotonic() - began, 3)
    with open(err_path, errors="replace") as f:
        stderr = f.read()
    case["code"] = code
    case["outcome"] = classify(case, code, stderr, reel, work)
    if case["outcome"] not in GOOD:
        case["stderr_tail"] = stderr[-1500:]
    return case


def classify(case, code, stderr, reel, work):
    if code is None:
        return "hung"
    if any(m in stderr for m in SANITIZER_MARKS):
        return "sanitizer report"
    if code in (-signal.SIGINT, -signal.SIGTERM) and not stderr and case["sent_at"][0] < 0.05:
        # Sent within milliseconds of exec, while the dynamic loader ran: no program has its
        # handling in place then, and the signal's default action ends it (a shell says 130).
        return BEFORE_MAIN
    if code < 0:
        return "killed by " + signal.Signals(-code).name
    if code == 134:
        return "abort"
    if code not in (130, 0):
        return "status %d" % code
    if code == 0 and case["sent_at"]:
        # The work was done before the first signal landed only if the command is finite.
        if case["kind"] in ("train", "launch"):
            return "status 0 after a signal"
    ckpt = case["ckpt"]
    if ckpt:
        names = names_oldest_first(ckpt)
        case["checkpoints"] = [e for e in names if ".tmp" not in e]
        if names and ".tmp" in names[-1]:
            return "temporary file newest"
        if case["checkpoints"]:
            test = os.path.join(work, "data-" + MODELS[case["model"]], "test", "*.tfrecord")
            check = subprocess.run([reel, "eval", "--checkpoint", ckpt, "--data", test],
                                   capture_output=True, text=True, cwd=REPO)
            if check.returncode != 0:
                case["eval_error"] = check.stderr[-800:]
                return "checkpoint does not load"
    return "stopped 130" if code == 130 else "finished 0"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reel", required=True)
    p.add_argument("--runs", type=int, default=500)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--record", help="one JSON line per run, then the counts")
    p.add_argument("--workdir", help="kept; default a temporary folder, removed")
    p.add_argument("--timeout", type=float, default=180.0, help="a run longer is 'hung'")
    a = p.parse_args()
    reel = os.path.abspath(a.reel)
    work = a.workdir or tempfile.mkdtemp(prefix="reel-signal-stress-")
    os.makedirs(work, exist_ok=True)
    rng = random.Random(a.seed)
    counts = collections.Counter()
    bad = 0
    out = open(a.record, "w") if a.record else None
    try:
        prepare(reel, work)
        for n in range(a.runs):
            case = execute(make_case(rng, work, n, reel), reel, work, a.timeout)
            counts[case["outcome"]] += 1
            good = case["outcome"] in GOOD
            bad += 0 if good else 1
            line = json.dumps({k: v for k, v in case.items() if k != "cmd"} |
                              {"cmd": " ".join(case["cmd"][1:3])})
            if out:
                out.write(line + "\n")
                out.flush()
            if not good:
                print("BAD", json.dumps(case), file=sys.stderr)
            shutil.rmtree(os.path.join(work, "runs", "%04d" % n), ignore_errors=True)
        summary = {"runs": a.runs, "seed": a.seed, "counts": dict(counts)}
        if out:
            out.write(json.dumps({"summary": summary}) + "\n")
        print(json.dumps(summary))
    finally:
        if out:
            out.close()
        if not a.workdir:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if bad else 0


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

if __name__ == "__main__":
    sys.exit(main())
