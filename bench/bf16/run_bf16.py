#!/usr/bin/env python3
"""bf16 against fp32 at the BiLSTM's full-length shapes (issue 53), alternated in one run.

Per repetition, in a rotating order, each in its own process on 2 OpenMP threads: reel's whole
training step (`reel_bilstm_step`, impl gemm) in fp32 and in bf16, the step's largest product (the
input projection, [frames x D] x [D x 4H]) as reel runs it in each precision (`--matmul`: the
rate a step in that precision could reach at its shapes), and PyTorch 1.13's padded step in fp32
and under torch.autocast("cpu", dtype=torch.bfloat16). Writes one JSON line per sample, after a
first line describing the machine (CPU family/model and whether it has AVX-512 BF16 / AMX).

  bench/bf16/run_bf16.py --build build --reps 3 --out bench/out/bf16_step.jsonl
"""
import argparse
import datetime
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bilstm"))
from run_bench import pick_openblas_core  # noqa: E402  (PyTorch at its best OpenBLAS kernels)

BATCH, FRAMES = 32, 300


def cpu_info():
    info = {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            key = key.strip()
            if key in ("model name", "cpu family", "model", "vendor_id") and key not in info:
                info[key] = value.strip()
            if key == "flags" and "flags" not in info:
                flags = value.split()
                info["flags"] = {k: k in flags for k in ("avx512f", "avx512_bf16", "amx_bf16")}
    return info


def run(cmd, env, timeout):
    load = os.getloadavg()[0]
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout {timeout}s", "load_1min": load}
    if p.returncode != 0:
        return {"error": p.stderr.strip()[-500:], "load_1min": load}
    out = json.loads(p.stdout.strip().splitlines()[-1])
    out["load_1min"] = load
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--shapes", default="video,audio")
    ap.add_argument("--python", default="/usr/bin/python3", help="interpreter with torch")
    ap.add_argument("--min-seconds", default="2")
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    step = os.path.join(args.build, "bin", "reel_bilstm_step")
    torch_step = os.path.join(HERE, "..", "bilstm", "torch_step.py")
    env = dict(os.environ, OMP_NUM_THREADS="2")
    torch_extra, torch_blas = ({}, None) if args.no_torch else pick_openblas_core(args.python, "auto")
    torch_env = dict(env, **torch_extra)
    lengths = ",".join([str(FRAMES)] * BATCH)
    rev = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True).stdout.strip()
    meta = {"meta": True, "command": " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:]),
            "date": datetime.datetime.utcnow().isoformat(timespec="seconds") + "Z", "commit": rev,
            "cpu": cpu_info(), "cores": os.cpu_count(), "threads": 2, "batch": BATCH,
            "frames": FRAMES, "torch_openblas": torch_blas}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as out:
        out.write(json.dumps(meta) + "\n")
        for rep in range(args.reps):
            for shape in args.shapes.split(","):
                common = ["--shape", shape, "--lengths", lengths, "--min-seconds", args.min_seconds]
                programs = []
                for prec in ("fp32", "bf16"):
                    programs.append((f"reel_{prec}", [step, *common, "--steps", "2", "--warmup", "1",
                                                      "--precision", prec]))
                    programs.append((f"matmul_{prec}", [step, "--matmul", *common, "--steps", "3",
                                                        "--precision", prec]))
                    if not args.no_torch:
                        programs.append((f"torch_{prec}", [
                            args.python, torch_step, "--shape", shape, "--lengths", lengths,
                            "--mode", "padded", "--steps", "1", "--warmup", "1", "--threads", "2",
                            "--min-seconds", args.min_seconds, "--flush-denormal",
                            "--autocast", "bf16" if prec == "bf16" else "none"]))
                shift = rep % len(programs)
                for name, cmd in programs[shift:] + programs[:shift]:
                    r = run(cmd, torch_env if name.startswith("torch") else env, args.timeout)
                    out.write(json.dumps({"rep": rep, "shape": shape, "program": name, "result": r}) + "\n")
                    out.flush()
                    figure = r.get("mean_s", r.get("error", "?"))
                    print(f"rep {rep + 1} {shape} {name}: {figure} (load {r['load_1min']:.2f})", flush=True)


if __name__ == "__main__":
    main()
