#!/usr/bin/env python3
"""bench/RESULTS.md from its raw files (issue 50).

  python3 bench/results.py            # write bench/RESULTS.md from bench/results_rows.md + raw files
  python3 bench/results.py --check    # recompute; fail naming row and figure on any difference
  python3 bench/results.py --check --table OTHER.md   # check another copy of the table

--check also holds README.md and docs/ to the table: a ratio in a paragraph that cites
bench/RESULTS.md must be one of its figures (a figure that is not must say it is an example).

bench/results_rows.md is the table's text with every derived figure as a `{name}` placeholder.
Each row's benchmark (its first cell) has a function in DERIVE that gives its placeholders from
the row's raw file(s) in bench/results/; the definitions are docs/benchmarks.md's: whole jobs
from start to exit, equal work, the peer at its best. A row without a function is copied as
written, and --check fails on it: every row's figures come from its files. `{{`/`}}` in
bench/results_rows.md are literal braces.
"""
import argparse
import json
import os
import re
import statistics
import sys

BENCH = os.path.dirname(os.path.abspath(__file__))
RAW = os.path.join(BENCH, "results")
ROWS = os.path.join(BENCH, "results_rows.md")
TABLE = os.path.join(BENCH, "RESULTS.md")


def load(name):
    with open(os.path.join(RAW, name)) as f:
        return json.load(f)


def text(name):
    with open(os.path.join(RAW, name)) as f:
        return f.read()


def records(name):
    """A JSONL file's records."""
    return [json.loads(line) for line in text(name).splitlines() if line.strip()]


def f1(x):
    return f"{x:.1f}"


def f2(x):
    return f"{x:.2f}"


def f3(x):
    return f"{x:.3f}"


def sig3(x):
    return f"{x:.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def pct(x):
    return f"{100 * x:.0f}%"


def span(values, fmt=f2):
    lo, hi = fmt(min(values)), fmt(max(values))
    return lo if lo == hi else f"{lo}-{hi}"


def verdict(ok):
    return "met" if ok else "**missed**"


# --- one function per row: returns {placeholder: text} -----------------------------------------

def allreduce_loopback():
    # One run, every program at the same TCP congestion control (the system's set to reno, which
    # reel's loopback connections use by default): the peers at their best.
    d = load("allreduce_loopback_reno_2026-12-07_2515aa0.json")
    if d["system_congestion_control"] != "reno":
        raise ValueError("the row needs the run at equal congestion control (reno)")
    d = d["results_busbw_GBps"]

    def med(prog, n):
        return {int(b): v["median"] for b, v in d[f"loopback/{prog}/{n}"].items()}

    out, ratios = {}, []
    for n in (2, 3):
        r, f, m, t, g = (med(p, n) for p in ("reel_tcp", "reel_tcp_flat", "mpi", "mpi_tcp", "gloo"))
        vm, vt, vg = ([a[b] / c[b] for b in a] for a, c in ((r, m), (f, t), (r, g)))
        ratios += vm + vt + vg
        out.update({f"r{n}": span(r.values()), f"f{n}": span(f.values()), f"m{n}": span(m.values()),
                    f"t{n}": span(t.values()), f"g{n}": span(g.values()), f"vm{n}": span(vm),
                    f"vt{n}": span(vt), f"vg{n}": span(vg)})
    out["target"] = verdict(min(ratios) >= 1.0)
    return out


def host_loopback():
    d = load("host_allreduce_loopback_2026-12-04_a9b9895.json")["results_busbw_GBps"]

    def med(prog, n):
        return {int(b): v["median"] for b, v in d[f"loopback/{prog}/{n}"].items()}

    r2, r3, spin3 = med("reel_tcp", 2), med("reel_tcp", 3), med("reel_tcp_spin", 3)
    m2, m3 = med("mpi", 2), med("mpi", 3)
    small = min(r3)
    vs3 = [r3[b] / m3[b] for b in r3 if b > small]
    flat = [med("reel_tcp", n)[b] / med("reel_tcp_flat", n)[b] for n in (2, 3)
            for b in r3 if b >= 1 << 20]
    vs2 = [r2[b] / m2[b] for b in r2]
    return {"r2": span(r2.values()), "r3": span(r3.values()), "spin3": span(spin3.values()),
            "m2": span(m2.values()), "m3": span(m3.values()), "vs2": span(vs2),
            "v2": verdict(min(vs2) >= 1), "from_kib": str(min(b for b in r3 if b > small) >> 10),
            "vs3": span(vs3), "small_kib": str(small >> 10), "small3": f2(r3[small] / m3[small]),
            "v3": verdict(min(vs3 + [r3[small] / m3[small]]) >= 1),
            "spin_small": f2(spin3[small] / m3[small]), "flat": span(flat, lambda x: f"{x:.1f}"),
            "vflat": verdict(min(flat) >= 1.5)}


def host_netns2():
    d = load("host_allreduce_netns2_2026-12-04_a9b9895.json")["results_busbw_GBps"]
    link = load("host_allreduce_netns_2026-12-04_a9b9895.json")["results_busbw_GBps"]
    big = "67108864"
    hier = {b: v["median"] for b, v in d["netns2/reel_tcp/4"].items()}
    flat = {b: v["median"] for b, v in d["netns2/reel_tcp_flat/4"].items()}
    # Over the link, 2 hosts exchange the algbw of the 4-rank job (busbw = algbw x 2(n-1)/n).
    over_link = hier[big] / (2 * 3 / 4)
    payload = link["netns/reel_tcp/2"][big]["median"]  # 1 rank per host: what the link carries
    use = over_link / payload
    ratios = [hier[b] / flat[b] for b in hier]
    return {"hier": span(hier.values(), f3), "flat": span(flat.values(), f3),
            "use": pct(use), "nominal": pct(over_link / 0.125), "x": span(ratios),
            "vx": verdict(min(ratios) >= 1.3), "vuse": verdict(use >= 0.9)}


def allreduce_netns():
    d = load("allreduce_netns_2026-12-02_ecb1de9.json")["results_busbw_GBps"]
    big = "67108864"
    link = 0.125  # 1 Gbit/s in GB/s: the file's "rate"
    out = {"link": f3(link)}
    for n in (2, 3):
        reel = d[f"netns/reel_tcp/{n}"][big]["median"]
        gloo = d[f"netns/gloo/{n}"][big]["median"]
        out.update({f"reel{n}": f3(reel), f"gloo{n}": f3(gloo), f"link{n}": pct(reel / link),
                    f"vs_gloo{n}": f2(reel / gloo)})
    lows = [d[f"netns/reel_tcp/{n}"][big]["median"] / link for n in (2, 3)]
    out["target"] = verdict(min(lows) >= 0.9)
    return out


def s3_read():
    d = load("s3_read_2026-11-30_cfff8e5.json")
    aws = min(d["aws_cli_stdout_s"], d["aws_cli_file_s"])  # the AWS CLI at its best run
    return {"reel_s": f3(d["reel_s"]), "reel_gbps": f3(d["reel_gbps"]), "aws_s": f3(aws),
            "curl_s": f3(d["curl_single_get_s"]), "vs_aws": f2(aws / d["reel_s"]),
            "vs_curl": f2(d["curl_single_get_s"] / d["reel_s"])}


def ingest_frame():
    d = load("ingest_frame_2026-11-30_4c9b5fa.json")["median_GBps"]
    ratio = d["ingest_frame"] / d["crc_reader"]
    return {"ingest": f2(d["ingest_frame"]), "crc": f2(d["crc_reader"]), "ratio": f2(ratio),
            "target": verdict(ratio >= 0.5), "floor": verdict(d["ingest_frame"] >= 1.0)}


def bilstm(name, sgemm_target):
    d = load(name)
    res = {r["lengths"]: r for r in d["results"]}
    full, uni = res["full"], res["uniform"]
    reel_full = full["programs"]["reel_gemm"]["median"]
    reel_uni = uni["programs"]["reel_gemm"]["median"]
    # Padded PyTorch computes all 300 frames of every video: paired with reel at full length
    # (docs/benchmarks.md, standard shapes); packed is the exact path, paired at uniform lengths.
    padded = full["torch_padded_best"]
    packed = uni["torch_packed_best"]
    executed = [full["executed_fraction_of_sgemm"], uni["executed_fraction_of_sgemm"]]
    nominal = [full["fraction_of_sgemm"], uni["fraction_of_sgemm"]]
    padded_x = padded["median_s"] / reel_full
    packed_x = packed["median_s"] / reel_uni
    return {"full_s": f3(reel_full), "uni_s": f3(reel_uni),
            "exec": span(executed, lambda x: f"{100 * x:.0f}") + "%",
            "nominal": span(nominal, lambda x: f"{100 * x:.0f}") + "%",
            "padded_s": f3(padded["median_s"]), "padded_t": str(padded["threads"]),
            "packed_s": f"{packed['median_s']:.1f}", "packed_t": str(packed["threads"]),
            "sgemm": f"{d['meta']['sgemm_gflops']['median']:.0f}",
            "padded_x": f2(padded_x), "packed_x": f"{packed_x:.0f}",
            "padded_v": verdict(padded_x >= 1.5), "packed_v": verdict(packed_x >= 10),
            "sgemm_v": verdict(min(executed) >= sgemm_target)}


def bilstm_video():
    return bilstm("bilstm_step_video_2026-12-01_85818bc.json", 0.85)


def bilstm_audio():
    return bilstm("bilstm_step_audio_2026-12-01_91a0c1d.json", 0.70)


def push_pull(name):
    """Whole jobs (docs/benchmarks.md, counting whole jobs): gradients /s of all W workers
    against the same W+1 processes' allreduce (a call carries W+1 gradients); medians of the
    repetitions, the ratio of the medians."""
    d = load(name)["push_pull"]
    out = {}
    for w in (1, 2, 3):
        reps = d[str(w)]

        def med(kind, key):
            return statistics.median(r[kind][key] for r in reps)

        pp, ar = med("push_pull", "all_per_second"), med("allreduce", "all_per_second")
        out.update({f"pp{w}": sig3(pp), f"rt{w}": sig3(med("push_pull", "per_second")),
                    f"ar{w}": sig3(ar), f"c{w}": sig3(med("allreduce", "per_second")),
                    f"x{w}": f2(pp / ar)})
    return out


def push_pull_loop():
    return push_pull("async_sgd_pp_loop_2026-12-04_f6b7eb1.json")


def push_pull_netns():
    return push_pull("async_sgd_pp_netns_2026-12-04_f6b7eb1.json")


def async_train():
    d = load("async_sgd_train_2026-12-04_f6b7eb1.json")
    steps = int(re.search(r"--steps (\d+)", d["command"]).group(1))
    t = d["train"]

    def med(case, key):
        return statistics.median(r[key] for r in t[case])

    def rate(case, workers):  # whole job: every worker's examples over start to exit
        return steps * 32 * workers / med(case, "wall_seconds")

    out = {}
    for w in (1, 2, 3):
        a, s = f"async_{w}w", f"sync_{w + 1}"  # the same processes: W workers + server, W+1 ranks
        ra, rs = rate(a, w), rate(s, w + 1)
        # sync at its best to the target: any learning-rate rule run at that rank count
        best = min((med(c, "target_seconds"), c) for c in t
                   if c == s or c.startswith(s + "_lr"))
        out.update({f"a{w}": f"{ra / 1000:.1f}k", f"s{w}": f"{rs / 1000:.1f}k",
                    f"r{w}": f2(ra / rs), f"at{w}": f2(med(a, "target_seconds")),
                    f"st{w}": f2(best[0]), f"tt{w}": f2(best[0] / med(a, "target_seconds")),
                    f"se{w}": str(int(med(best[1], "target_examples")))})
    return out


def allreduce_inproc():
    d = load("allreduce_inproc_2026-11-30_cfff8e5.json")
    big = [x for x in d["sizes"] if x["bytes"] >= 1 << 20]
    return {"busbw": span([x["busbw_GBps"] for x in big]),
            "lo_mib": str(min(x["bytes"] for x in big) >> 20),
            "hi_mib": str(max(x["bytes"] for x in big) >> 20),
            "of_memcpy": span([x["busbw_over_memcpy"] for x in big]),
            "reps": str(d["reps"])}


def ddp_moe(name, ns):
    """moe trains every video each epoch on both sides; PyTorch drops each epoch's partial batch,
    so the rates are per example of each side's own count."""
    d = load(name)
    rate = d["examples_per_sec"]
    out = {}
    for n in ns:
        reel, torch = rate[f"reel/{n}"]["median"], rate[f"torch_ddp/{n}"]["median"]
        x = reel / torch
        out.update({f"reel{n}": f"{reel:.1f}", f"torch{n}": f"{torch:.1f}", f"x{n}": f2(x),
                    f"v{n}": verdict(x >= 1.5),
                    f"ex{n}": f"{statistics.median(r['examples'] for r in d['runs'][f'reel/{n}']):,.0f}",
                    f"tex{n}": f"{statistics.median(r['examples'] for r in d['runs'][f'torch_ddp/{n}']):,.0f}"})
    return out


def ddp_moe_1host():
    return ddp_moe("ddp_moe_2026-12-04_e7e7536.json", (1, 2))


def ddp_moe_2hosts():
    # Rates per example of each side's own count, as ddp_moe: PyTorch drops partial batches.
    return exchange_2hosts("ddp_moe_2hosts_2026-12-07_228875a.json",
                           {"z": "reel_zero1", "ov": "reel_overlap", "af": "reel_after"}, 1.45,
                           equal_work=False)


def ddp_equal(name, n):
    """reel's whole job against PyTorch DDP's faster thread count when both trained every example
    (the file's default, equal work): medians of examples/s start to exit; the work checked."""
    d = load(name)
    rate, runs = d["examples_per_sec"], d["runs"]
    best = max((k for k in rate if k.startswith("torch_ddp") and k.endswith(f"/{n}")),
               key=lambda k: rate[k]["median"])
    work = {r["examples"] for p in (f"reel/{n}", best) for r in runs[p]}
    if len(work) > 1:
        raise ValueError(f"{name}: unequal work {work}")
    reel, torch = rate[f"reel/{n}"], rate[best]
    x = reel["median"] / torch["median"]
    t = 1 if "_1t" in best else d["cores"] // n
    threads = f"{t} thread{'s' if t > 1 else ''}"
    return {"reel": f"{reel['median']:.1f}", "reel_span": span([reel["min"], reel["max"]], f1),
            "torch": f"{torch['median']:.1f}", "threads": threads, "ex": f"{work.pop():,}", "x": f2(x),
            "v": verdict(x >= 4)}


def ddp_equal_rows(name):
    out = {"load": f1(load(name)["load_average"][0])}
    for n in (1, 2):
        out.update({f"p{n}_{k}": v for k, v in ddp_equal(name, n).items()})
    return out


def ddp_bilstm_1host():
    return ddp_equal_rows("ddp_bilstm_video_2026-12-07_2515aa0.json")


def ddp_two_stream_1host():
    return ddp_equal_rows("ddp_two_stream_2026-12-07_2515aa0.json")


def ddp_two_stream_2hosts():
    return exchange_2hosts("ddp_two_stream_2hosts_2026-12-07_b484977.json",
                           {"ov": "reel_overlap", "af": "reel_after"}, 3)


def overlap_bilstm_2hosts():
    return exchange_2hosts("ddp_bilstm_video_2hosts_2026-12-07_228875a.json",
                           {"ov": "reel_overlap", "af": "reel_after"}, 3)


def step_parts(time_line):
    """A rank's time breakdown line as {part: seconds}."""
    return {k: float(v) for k, v in re.findall(r"(\w+) ([0-9.]+) s \(", time_line)}


def exposed_share(time_line):
    """The exchange left exposed: update plus wait over the step's parts (data, compute, update,
    wait; evaluation and checkpoints apart), as issue 52 counts it."""
    p = step_parts(time_line)
    step = sum(p.get(k, 0.0) for k in ("data", "compute", "update", "wait"))
    return (p.get("update", 0.0) + p.get("wait", 0.0)) / step


def exchange_2hosts(name, programs, target, equal_work=True):
    """reel's programs (--reel-set names, {key: program}) against PyTorch DDP's fastest program on
    2 simulated hosts: whole-job medians, rank 0's exposed exchange per run. Equal work checked
    unless the row says how the sides' examples differ (moe: PyTorch drops partial batches)."""
    d = load(name)
    rate, runs = d["examples_per_sec"], d["runs"]
    best = max((k for k in rate if k.startswith("torch_ddp") and k.endswith("/2")),
               key=lambda k: rate[k]["median"])
    t = rate[best]["median"]
    out = {"torch": f"{t:.1f}", "against": best.removesuffix("/2"),
           "tex": f"{statistics.median(r['examples'] for r in runs[best]):,.0f}"}
    for key, prog in programs.items():
        work = {statistics.median(r["examples"] for r in runs[p]) for p in (f"{prog}/2", best)}
        if equal_work and len(work) > 1:
            raise ValueError(f"{name}: unequal work {work}")
        m = rate[f"{prog}/2"]["median"]
        shares = [100 * exposed_share(r["time"]) for r in runs[f"{prog}/2"]]
        out.update({key: f"{m:.1f}", f"{key}_x": f2(m / t), f"{key}_v": verdict(m / t >= target),
                    f"{key}_exp": span(shares, lambda x: f"{x:.0f}"),
                    f"{key}_ve": verdict(statistics.median(shares) <= 15),
                    f"{key}_ex": f"{statistics.median(r['examples'] for r in runs[f'{prog}/2']):,.0f}"})
    first, second = list(programs)[:2]
    out["gain"] = f2(rate[f"{programs[first]}/2"]["median"] / rate[f"{programs[second]}/2"]["median"])
    return out


def eval_ranks():
    # Whole commands (wall of each), alternated; ratios are medians of the per-repetition ratios.
    runs = ab_runs(text("eval_ranks_2026-12-05_ae06ad9.txt"), "videos_per_s")
    return {"launch": f"{statistics.median(runs['launch'].values()):.1f}",
            "alone": f"{statistics.median(runs['alone'].values()):.1f}",
            "mpirun": f"{statistics.median(runs['mpirun'].values()):.1f}",
            "vs_alone": f2(per_rep(runs, "launch", "alone")),
            "vs_mpirun": f2(per_rep(runs, "launch", "mpirun")),
            "reps": str(len(runs["launch"]))}


def ab_runs(section, metric):
    """{case: {rep: value}} of a bench/ab.py output's `rep N case: metric=V` lines."""
    runs = {}
    for m in re.finditer(rf"^rep (\d+) (\w+): (?:.* )?{metric}=([0-9.]+)", section, re.M):
        runs.setdefault(m.group(2), {})[int(m.group(1))] = float(m.group(3))
    return runs


def per_rep(runs, a, b):
    return statistics.median(runs[a][r] / runs[b][r] for r in runs[a])


def thread_budget():
    # Two sessions: hidden 16, then the default 128/64; the trainer's rate over all steps.
    sections = text("thread_budget_2026-12-06_7fcc010.txt").split("# $ ")[1:]
    out = {}
    for key, section in zip(("s", "d"), sections):
        runs = ab_runs(section, "examples_per_s")
        launch, whole = runs["launch"].values(), runs["launch_whole"].values()
        out.update({f"{key}_launch": f"{statistics.median(launch):.1f}",
                    f"{key}_range": f"{min(launch):.1f}-{max(launch):.1f}",
                    f"{key}_mpirun": f"{statistics.median(runs['mpirun'].values()):.1f}",
                    f"{key}_whole": f"{statistics.median(whole):.1f}",
                    f"{key}_vs_mpirun": f2(per_rep(runs, "launch", "mpirun")),
                    f"{key}_vs_whole": f2(per_rep(runs, "launch", "launch_whole")),
                    f"{key}_above": "every" if min(launch) > max(whole) else "not every"})
    return out


def receive_budget():
    s = text("receive_budget_2026-12-03_cf952b2.txt")
    rss, intact = {}, []
    for m in re.finditer(r"^rep \d+ budget (\w+): .*?(\d+) of (\d+) messages intact, peak RSS (\d+) KiB",
                         s, re.M):
        rss.setdefault(m.group(1), []).append(int(m.group(4)) / 1024)
        intact.append((int(m.group(2)), int(m.group(3))))
    budget, unbounded = statistics.median(rss["default"]), statistics.median(rss["unbounded"])
    whole = all(a == b for a, b in intact)
    return {"budget": f"{budget:.1f}", "none": f"{unbounded:.0f}", "x": f2(budget / unbounded),
            "n": str(intact[0][1]), "intact": f"{intact[0][1]} of {intact[0][1]}" if whole else
            "**not all**"}


def tcp_small():
    # Lines: ranks mode rep bytes seconds (the mean of up to 1000 calls); medians over reps.
    runs = {}
    for m in re.finditer(r"^(\d) (ring|small) \d+ (\d+) ([0-9.]+)$",
                         text("tcp_small_allreduce_2026-12-03_3a7dc07_b.txt"), re.M):
        runs.setdefault((int(m.group(1)), m.group(2), int(m.group(3))), []).append(float(m.group(4)))
    med = {k: statistics.median(v) * 1e6 for k, v in runs.items()}
    out = {"reps": str(min(len(v) for v in runs.values()))}
    for n in (2, 3):
        sizes = [b for (r, mode, b) in med if r == n and mode == "small" and b * (n - 1) <= 65536]
        us = lambda x: f"{x:.0f}"
        out.update({f"small{n}": span([med[(n, "small", b)] for b in sizes], us),
                    f"ring{n}": span([med[(n, "ring", b)] for b in sizes], us),
                    f"x{n}": span([med[(n, "small", b)] / med[(n, "ring", b)] for b in sizes]),
                    f"kib{n}": f"{min(sizes) >> 10}-{max(sizes) >> 10}"})
    return out


def python_read():
    s = text("python_read_2026-12-03_c3f4d35.txt")
    source = [float(x) for x in re.findall(r"^\| tfrecord \| [^|]+\|[^|]+\|[^|]+\| (\d+) \|", s, re.M)]
    py = [float(x) for x in re.findall(r"^read_tfrecords: .*?: (\d+) videos/s", s, re.M)]
    x = statistics.median(py) / statistics.median(source)
    reps = [a / b for a, b in zip(py, source)]
    return {"py": f"{statistics.median(py):.0f}", "cpp": f"{statistics.median(source):.0f}",
            "x": f2(x), "v": verdict(x >= 0.5), "reps": span(reps),
            "every": "in every repetition" if min(reps) >= 0.5 else "not in every repetition"}


def python_train():
    s = text("python_train_2026-12-03_c3f4d35.txt")
    cli = [float(x) for x in re.findall(r"^wall ([0-9.]+) s$", s, re.M)]
    py = [float(x) for x in re.findall(r"^reel\.train: .*wall ([0-9.]+) s", s, re.M)]
    return {"py": f3(statistics.median(py)), "cli": f3(statistics.median(cli)),
            "lo": f"{min(cli + py):.1f}", "hi": f"{max(cli + py):.1f}"}


def python_grid():
    every = records("python_grid_2026-12-07_8966190.jsonl")
    runs = [r for r in every if r["kind"] == "run"]
    setup = [r for r in every if r["kind"] == "setup"][0]
    walls = {p: sorted(r["wall_s"] for r in runs if r["program"] == p)
             for p in ("reel_tune", "gridsearchcv_reel_sklearn")}
    best = {p: {(r["best_learning_rate"], round(r["best_gap"], 4)) for r in runs
                if r["program"] == p} for p in walls}
    (tune_lr, tune_gap), = best["reel_tune"]  # every run chose the same point
    (grid_lr, grid_gap), = best["gridsearchcv_reel_sklearn"]
    load_avg = [x for r in runs for x in r["loadavg_before"][:1]]
    med = {p: statistics.median(w) for p, w in walls.items()}
    return {"tune_s": f2(med["reel_tune"]), "tune_span": f"{walls['reel_tune'][0]:.2f}-{walls['reel_tune'][-1]:.2f}",
            "tune_gap": f"{tune_gap:.4f}", "grid_s": f2(med["gridsearchcv_reel_sklearn"]),
            "grid_span": f"{walls['gridsearchcv_reel_sklearn'][0]:.2f}-{walls['gridsearchcv_reel_sklearn'][-1]:.2f}",
            "grid_gap": f"{grid_gap:.4f}", "reps": str(len(walls["reel_tune"])),
            "x": f2(med["gridsearchcv_reel_sklearn"] / med["reel_tune"]),
            "same": "the same" if tune_lr == grid_lr else "a different",
            "cpu": f"family {setup['cpu']['cpu family']} model {setup['cpu']['model']}",
            "load": f"{min(load_avg):.1f}-{max(load_avg):.1f}"}


def python_inmemory():
    s = text("python_inmemory_2026-12-07_5d56473.txt")
    def runs(mode):
        return [float(x) for x in re.findall(rf"^mode={mode} .* examples_per_sec=([0-9.]+)$", s, re.M)]
    arrays, files = runs("arrays"), runs("files")
    losses = set(re.findall(r"^mode=\w+ .* final_loss=([0-9.]+) ", s, re.M))
    return {"arrays": f"{statistics.median(arrays):.0f}", "arrays_span": span(arrays, lambda x: f"{x:.0f}"),
            "files": f"{statistics.median(files):.0f}", "files_span": span(files, lambda x: f"{x:.0f}"),
            "reps": span([a / f for a, f in zip(arrays, files)]), "n": str(len(arrays)),
            "same_loss": "the same final loss" if len(losses) == 1 else "different final losses"}


def tune_disk():
    rows = {line.split()[0]: line.split() for line in text(
        "tune_checkpoint_disk_2026-12-07_cfc66e7.txt").splitlines()
        if line.startswith(("NEEDED", "ALL"))}
    gb = lambda x: f"{int(x) / 1e9:.2f}"  # noqa: E731
    return {"needed_peak": gb(rows["NEEDED"][1]), "needed_end": gb(rows["NEEDED"][2]),
            "needed_files": rows["NEEDED"][3], "all_end": gb(rows["ALL"][2]),
            "all_files": rows["ALL"][3], "trials": rows["ALL"][4],
            "x": f"{int(rows['ALL'][2]) / int(rows['NEEDED'][2]):.0f}"}


def fuzz():
    s = text("fuzz_2026-12-06_76b404d.txt")
    runs = {m.group(1): (m.group(2), int(m.group(3)))
            for m in re.finditer(r"^== (\w+): (\w+), (\d+) runs", s, re.M)}
    t = re.search(r"(\d\d):(\d\d)-(\d\d):(\d\d) UTC", s).groups()
    minutes = (int(t[2]) * 60 + int(t[3])) - (int(t[0]) * 60 + int(t[1]))
    cap = int(re.search(r"--seconds (\d+)", s).group(1))
    full = [k for k, (_, n) in runs.items() if n >= 10_000_000]
    short = sorted(((k, n) for k, (_, n) in runs.items() if n < 10_000_000), key=lambda x: -x[1])
    return {"n": str(len(runs)), "minutes": str(minutes), "full": str(len(full)),
            "short": " and ".join(f"{k} {n / 1e6:.1f} M" for k, n in short),
            "cap": str(cap // 60),
            "clean": "no crash, leak or timeout" if all(v == "ok" for v, _ in runs.values())
            else "**findings**"}


def tune_overhead():
    runs = {}
    for m in re.finditer(r"^rep \d+ (\w+): wall [0-9.]+ s, overhead ([0-9.]+) ms/trial",
                         text("tune_overhead_2026-12-04_86e86df.txt"), re.M):
        runs.setdefault(m.group(1), []).append(float(m.group(2)))
    med = {k: statistics.median(v) for k, v in runs.items()}
    ranks = ("reel_inproc", "reel_tcp")
    return {"threads": f2(med["reel_threads"]), "inproc": f2(med["reel_inproc"]),
            "tcp": f2(med["reel_tcp"]), "grid": f2(med["sklearn_gridsearchcv"]),
            "tpe": f2(med["optuna_tpe"]), "random": f2(med["optuna_random"]),
            "x_grid": f2(med["reel_threads"] / med["sklearn_gridsearchcv"]),
            "x_tpe": f2(med["reel_threads"] / med["optuna_tpe"]),
            "x_random": f2(med["reel_threads"] / med["optuna_random"]),
            "ranks_grid_random": span([med[r] / med[p] for r in ranks
                                       for p in ("sklearn_gridsearchcv", "optuna_random")]),
            "ranks_tpe": span([med[r] / med["optuna_tpe"] for r in ranks])}


def asha_vs_grid():
    runs = {}
    for m in re.finditer(r"^# rep \d+ (\w+): \d+ finished trials, (\d+) trial-steps, best GAP ([0-9.]+), "
                         r"wall ([0-9.]+) s", text("tune_asha_vs_grid_2026-12-05_ae06ad9.txt"), re.M):
        runs.setdefault(m.group(1), []).append(tuple(float(x) for x in m.groups()[1:]))

    def med(search, i):
        return statistics.median(r[i] for r in runs[search])

    grid_best = max(r[1] for r in runs["grid"])
    asha = runs["asha"]
    same = sum(1 for r in asha if r[1] >= grid_best)
    below = [grid_best - r[1] for r in asha if r[1] < grid_best]
    return {"asha_steps": f"{med('asha', 0):.0f}", "asha_gap": f"{med('asha', 1):.4f}",
            "asha_s": f"{med('asha', 2):.1f}", "grid_steps": f"{med('grid', 0):.0f}",
            "grid_gap": f"{med('grid', 1):.4f}", "grid_s": f"{med('grid', 2):.1f}",
            "x_steps": f"{med('grid', 0) / med('asha', 0):.1f}",
            "x_wall": f"{med('grid', 2) / med('asha', 2):.1f}",
            "same": f"{same} of {len(asha)} runs" + (
                f"; the others up to {max(below):.3f} below" if below else "")}


def tune_optuna():
    """Each run's curve: (epochs trained so far, best GAP@20 so far); medians over the runs."""
    d = load("tune_optuna_2026-12-04_6e24d9b.json")["runs"]

    def stats(runs):
        out = {"epochs": [], "best": [], "wall": [], "to_best": [], "near": []}
        for r in runs:
            c = r["curve"]
            best = max(g for _, g in c)
            out["epochs"].append(c[-1][0])
            out["best"].append(best)
            out["wall"].append(r["wall"])
            out["to_best"].append(next(x for x, g in c if g == best))
            out["near"].append(next(x for x, g in c if g >= best - 0.01))
        return {k: statistics.median(v) for k, v in out.items()}

    a, o = stats(d["reel_asha"]), stats(d["optuna_tpe_sha"])
    return {"a_epochs": f"{a['epochs']:.0f}", "a_best": f"{a['best']:.4f}", "a_wall": f"{a['wall']:.0f}",
            "o_epochs": f"{o['epochs']:.0f}", "o_best": f"{o['best']:.4f}", "o_wall": f"{o['wall']:.0f}",
            "x_epochs": f2(o["epochs"] / a["epochs"]), "x_wall": f2(o["wall"] / a["wall"]),
            "o_to_best": f"{o['to_best']:.0f}", "a_to_best": f"{a['to_best']:.0f}",
            "x_to_best": f2(o["to_best"] / a["to_best"]),
            "o_near": f"{o['near']:.0f}", "a_near": f"{a['near']:.0f}"}


PLAN_FILES = ["plan_validation_2026-12-05_5211570.jsonl", "plan_validation_2026-12-05_5211570_b.jsonl",
              "plan_validation_2026-12-05_fadf20e.jsonl", "plan_validation_2026-12-05_fadf20e_d.jsonl",
              "plan_validation_2026-12-05_fadf20e_e.jsonl", "plan_validation_2026-12-05_fadf20e_f.jsonl"]


def plan_validation():
    """The files in the order they were run; a case run again in a later file (after a fix)
    is taken from the latest. Ratio: the plan's epoch over the measured `reel train` epoch."""
    cases = {}
    for name in PLAN_FILES:
        runs = {}
        for line in text(name).splitlines():
            r = json.loads(line)
            plan = r["plan"]["plans"][0]
            most = re.search(r"the most: (\w+)", r["time"]).group(1)
            runs.setdefault(r["case"], []).append(
                (plan["epoch_seconds"] / r["measured_seconds"], plan["bottleneck"], most,
                 r["measured_seconds"]))
        cases.update(runs)
    part = {"exchange": "update", "step": "compute", "reading": "data"}

    def ratios(pick):
        return [x[0] for case, runs in cases.items() if pick(case) for x in runs]

    def kind(case):
        hosts, opt = case.split(":")[:2]
        return int(hosts.split("x")[0]), hosts.split("x")[1], opt, "s3=" in case

    groups = {
        "sync": lambda c: kind(c)[2] == "sync" and not kind(c)[3],
        "async1g": lambda c: kind(c)[2] == "async" and kind(c)[1] == "1gbit" and not kind(c)[3],
        "s3": lambda c: kind(c)[3],
        "async1w": lambda c: kind(c)[2] == "async" and kind(c)[1] == "100mbit" and kind(c)[0] == 2,
        "async2w": lambda c: kind(c)[2] == "async" and kind(c)[1] == "100mbit" and kind(c)[0] > 2}
    out = {k: span(ratios(g)) for k, g in groups.items()}
    within = [c for c, runs in cases.items()
              if 0.75 <= statistics.median(x[0] for x in runs) <= 1.25]
    missed = [c for c in cases if c not in within]
    right = sum(1 for runs in cases.values() if all(part[x[1]] == x[2] for x in runs))
    spread = [max(x[3] for x in runs) / min(x[3] for x in runs) - 1
              for c, runs in cases.items() if c in within and len(runs) > 1]
    out.update(n=str(len(cases)), within=str(len(within)), missed=str(len(missed)),
               missed_cases=", ".join(sorted(missed)), right=str(right),
               spread=f"{100 * max(spread):.0f}%",
               )
    return out


def seed_claim():
    # Whole jobs from start to exit (steps x 32 x workers over the wall); the file's
    # examples_per_sec is a median of log windows and its async target_examples an estimate.
    d = load("async_seed_claim_netns_2026-12-04_6e24d9b.json")
    steps = int(re.search(r"--steps (\d+)", d["command"]).group(1))
    t = d["train"]

    def med(case, key):
        return statistics.median(r[key] for r in t[case])

    def rate(case, workers):
        return steps * 32 * workers / med(case, "wall_seconds")

    def best_sync(n):
        return min((med(c, "target_seconds"), c) for c in t
                   if c == f"sync_{n}" or c.startswith(f"sync_{n}_lr"))

    k = lambda x: f"{x / 1000:.1f}k"
    a = {w: (rate(f"async_{w}w", w), med(f"async_{w}w", "target_seconds")) for w in (2, 3)}
    sy = {n: (rate(f"sync_{n}_lr_x{n}", n), best_sync(n)) for n in (2, 3)}
    quicker = all(sy[n][1][0] <= a[n][1] for n in (2, 3))
    return {"a_rate": span([a[w][0] for w in a], k), "a_t": span([a[w][1] for w in a]),
            "s_rate": span([sy[n][0] for n in sy], k),
            "s_ex": span([med(sy[n][1][1], "target_examples") for n in sy], lambda x: f"{x:.0f}"),
            "s_t": span([sy[n][1][0] for n in sy]),
            "one_rate": k(rate("sync_1", 1)), "one_t": f2(med("sync_1", "target_seconds")),
            "verdict": "as quick or quicker" if quicker else "slower at some count"}


def plan_seed_scale():
    """The examples/s column at the largest node count of each section (a prediction)."""
    s = text("plan_seed_scale_2026-12-05_fadf20e.md")
    out = {}
    for name, body in re.findall(r"^## (\w+ \w+)\n(.*?)(?=^## |\Z)", s, re.M | re.S):
        rows = [line.split(" | ") for line in body.splitlines() if re.match(r"\| \d+ \|", line)]
        last = rows[-1]
        out[name.replace(" ", "_")] = last[-3]
        out["nodes"] = f"{rows[0][0][2:]}-{last[0][2:]}"
        out["last"] = last[0][2:]
    return out


def plan_one_node():
    runs = records("plan_one_node_2026-12-08_ec19e6a.jsonl")
    out = {"runs": str(len(runs)), "reps": str(max(r["run"] for r in runs))}
    held, missed = [], []
    for c in ("moe", "bilstm_video", "two_stream", "bilstm_audio", "logistic"):
        for scale in ("small", "large"):
            case = [r for r in runs if r["config"] == c and r["scale"] == scale]
            m = statistics.median(r["ratio"] for r in case)
            out[f"{c}_{scale}"] = f2(m)
            out[f"{c}_{scale}_n"] = f"{case[0]['videos']:,}"
            if 0.85 <= m <= 1.15:
                held.append(f"{c} {scale}")
            else:
                missed.append(f"{c} {scale} (the plan too {'fast' if m < 1 else 'slow'})")
    within = sum(1 for r in runs if 0.85 <= r["ratio"] <= 1.15)
    loads = [float(r["load"].split()[0]) for r in runs]
    out.update(within=str(within), load=f"{min(loads):.1f}-{max(loads):.1f}",
               held=str(len(held)), cases=str(len(held) + len(missed)),
               missed=", ".join(missed) or "none", verdict=verdict(not missed))
    return out


def ci_timings():
    s = text("ci_timings_2026-12-07_2d88fc7.txt")
    total = int(re.search(r"\((\d+) s by date", s).group(1))
    install = int(re.search(r"deps (\d+) s", s).group(1))
    phases = [int(x) for x in re.findall(r"^-- (\d+) s,", s, re.M)]
    counts = re.findall(r"out of (\d+)", s)
    slow = {m.group(2): float(m.group(1)) for m in re.finditer(r"^([0-9.]+) .*?Test +#\d+: (\S+)", s, re.M)}
    keys = ("release", "release_tests", "asan", "asan_tests", "tsan", "tsan_tests", "fuzz")
    out = dict(zip(keys, map(str, phases)))
    cold = total + install
    out.update(total=str(total), install=str(install), cold=str(cold), n_release=counts[0],
               n_asan=counts[1], n_tsan=counts[2], budget=f2(cold / 2700),
               verdict=verdict(cold <= 2700), slurm=f"{slow['slurm_cluster']:.0f}",
               docs=f"{slow['docs_command_blocks']:.0f}")
    return out


def mpi_interleaved():
    # Jobs of the NEW build (s20_new) on 2 ranks, both sessions (journal run 26); the 4th column
    # of a size's line is raw / reel, the job's median over its blocks.
    s = text("allreduce_mpi_arrival_p2p_2026-12-03_cc6e03f.txt")
    by = {}
    for job in re.split(r"^== ", s, flags=re.M)[1:]:
        head = job.split("\n", 1)[0]
        if "build s20_new" not in head or "ranks 3" in head:
            continue
        for m in re.finditer(r"^(\d+) [0-9.]+ [0-9.]+ ([0-9.]+) ", job, re.M):
            by.setdefault(int(m.group(1)), []).append(float(m.group(2)))
    meds = [statistics.median(v) for v in by.values()]
    return {"lo": f3(min(meds)), "hi": f3(max(meds)), "jobs": str(min(len(v) for v in by.values())),
            "min_kib": str(min(by) // 1024), "max_mib": str(max(by) // 1048576),
            "within": verdict(min(meds) >= 0.95)}


def update_speed():
    # bench/update/run.sh: update_bench's passes over 40 M floats (GB/s = bytes x N / s), the
    # optimizer's update alone and moe's one-node training, each BASELINE and BUILD alternated.
    d = load("update_2026-12-07_77d2730.json")
    bw = d["bandwidth"]
    n = bw["params"]

    def gbps(prog, t):
        return [bw["bytes_per_element"][prog] * n / s / 1e9 for s in bw["seconds"][f"{prog}/{t}"]]

    def med(prog, t):
        return statistics.median(gbps(prog, t))

    def of_triad(prog, t):  # per repetition: the programs alternate within each
        return statistics.median(a / b for a, b in zip(gbps(prog, t), gbps("triad", t)))

    def case(kind, name, metric):
        return {r["rep"]: r["metrics"][metric] for r in d[kind]
                if r["case"] == name and r["status"] == 0 and not r["missing"]}

    def ratio(kind, metric):
        a, b = case(kind, "branch", metric), case(kind, "baseline", metric)
        return statistics.median(a[r] / b[r] for r in a if r in b)

    out = {}
    for t in (1, 2):
        for prog in ("copy", "triad", "sgd", "momentum", "adagrad", "adam"):
            out[f"{prog}{t}"] = f"{med(prog, t):.1f}"
        out[f"adam_of_triad{t}"] = pct(of_triad("adam", t))
        out[f"fused_of_triad{t}"] = pct(of_triad("adam_norm", t))
    best = max(of_triad("adam_norm", t) for t in (1, 2))
    out["v_bw"] = verdict(best >= 0.7)
    for t, key in ((1, "one_thread"), (2, "two_threads")):
        out[f"step_before{t}"] = f"{1e3 * statistics.median(case('step', 'baseline', key).values()):.0f}"
        out[f"step_after{t}"] = f"{1e3 * statistics.median(case('step', 'branch', key).values()):.0f}"
        out[f"step_x{t}"] = f2(ratio("step", key))
    for name, key in (("baseline", "before"), ("branch", "after")):
        share = case("train", name, "update_share").values()
        out[f"share_{key}"] = f"{pct(statistics.median(share))} ({span(share, pct)})"
        out[f"upd_{key}"] = f"{statistics.median(case('train', name, 'update').values()):.1f}"
        out[f"total_{key}"] = f"{statistics.median(case('train', name, 'total').values()):.1f}"
    out["upd_x"] = f2(ratio("train", "update"))
    out["compute_x"] = f2(ratio("train", "compute"))
    out["total_x"] = f2(ratio("train", "total"))
    # Under load compute ran 3-4x its idle time and the update did not, so the share measured
    # here flatters the update; the idle breakdown (compute 7.96 s, update 16.80 s of
    # 24.8 s) with each part scaled by its measured ratio gives the idle estimate the verdict uses.
    upd, comp = 16.80 * ratio("train", "update"), 7.96 * ratio("train", "compute")
    idle = upd / (upd + comp + (24.8 - 16.80 - 7.96))
    out["idle_share"] = pct(idle)
    out["compute_load"] = f"{statistics.median(case('train', 'baseline', 'compute').values()) / 7.96:.1f}"
    out["update_load"] = f"{statistics.median(case('train', 'baseline', 'update').values()) / 16.80:.1f}"
    out["v_share"] = verdict(idle <= 0.5)
    loads = [r["load_before"] for k in ("step", "train") for r in d[k]]
    out["load"] = f"{min(loads):.1f}-{max(loads):.1f}"
    out["reps"] = str(bw["reps"])
    return out


def bf16_rows(step_file, train_file):
    """bench/bf16/run_bf16.py's steps and matmul rates, and train_bf16.py's whole jobs."""
    recs = records(step_file)
    meta, samples = recs[0], [r for r in recs[1:] if "error" not in r["result"]]
    out = {"cpu": f"{meta['cpu']['model name']} family {meta['cpu']['cpu family']} model "
                  f"{meta['cpu']['model']}"}

    def med(shape, program, key):
        return statistics.median(r["result"][key] for r in samples
                                 if r["shape"] == shape and r["program"] == program)

    for shape in ("video", "audio"):
        reps = sorted({r["rep"] for r in samples if r["shape"] == shape})
        per_rep = lambda a, b: [  # noqa: E731  fp32 time over bf16 time, each repetition
            next(r["result"]["mean_s"] for r in samples if r["shape"] == shape and r["rep"] == i
                 and r["program"] == a) /
            next(r["result"]["mean_s"] for r in samples if r["shape"] == shape and r["rep"] == i
                 and r["program"] == b) for i in reps]
        step = per_rep("reel_fp32", "reel_bf16")
        mm = [med(shape, "matmul_bf16", "gflops") / med(shape, "matmul_fp32", "gflops")]
        torch_best = min(med(shape, "torch_fp32", "mean_s"), med(shape, "torch_bf16", "mean_s"))
        bf16_s = med(shape, "reel_bf16", "mean_s")
        k = shape[0]
        out.update({
            f"{k}32": f3(med(shape, "reel_fp32", "mean_s")), f"{k}16": f3(bf16_s),
            f"{k}x": span(step), f"{k}xm": f2(statistics.median(step)),
            f"{k}mm32": f"{med(shape, 'matmul_fp32', 'gflops'):.0f}",
            f"{k}mm16": f"{med(shape, 'matmul_bf16', 'gflops'):.0f}", f"{k}mmx": f2(mm[0]),
            f"{k}t32": f"{med(shape, 'torch_fp32', 'mean_s'):.2f}",
            f"{k}t16": f"{med(shape, 'torch_bf16', 'mean_s'):.2f}",
            f"{k}tx": f2(torch_best / bf16_s), f"{k}tv": verdict(torch_best / bf16_s >= 5),
            f"{k}rx": f2(torch_best / med(shape, "reel_fp32", "mean_s")),
        })
        out[f"{k}v"] = verdict(statistics.median(step) >= 1.6)
    runs = records(train_file)
    tmeta, jobs = runs[0], runs[1:]
    by = {p: [j for j in jobs if j["precision"] == p] for p in ("fp32", "bf16")}
    rate = [next(j["examples_per_s"] for j in by["bf16"] if j["rep"] == i) /
            next(j["examples_per_s"] for j in by["fp32"] if j["rep"] == i)
            for i in sorted({j["rep"] for j in jobs})]
    g32 = statistics.median(j["gap"] for j in by["fp32"])
    g16 = statistics.median(j["gap"] for j in by["bf16"])
    out.update({"jx": span(rate), "jxm": f2(statistics.median(rate)),
                "j32": f"{statistics.median(j['examples_per_s'] for j in by['fp32']):.0f}",
                "j16": f"{statistics.median(j['examples_per_s'] for j in by['bf16']):.0f}",
                "g32": f3(g32), "g16": f3(g16), "gd": f3(abs(g16 - g32)),
                "gv": verdict(abs(g16 - g32) <= 0.01), "jv": verdict(statistics.median(rate) >= 1.6),
                "jn": str(len(by["fp32"]))})
    return out


def bf16():
    return bf16_rows("bf16_step_2026-12-07_6c6a93a.jsonl", "bf16_train_2026-12-07_6c6a93a.jsonl")


def restart_time():
    d = load("restart_time_2026-12-07_531d878.json")
    out = {"load": f1(d["load_average"][0]), "every": str(d["every"]),
           "kill": str(d["kill_after"]), "videos": f"{d['videos']:,}"}
    median = {}
    for key, prog in (("r", "reel"), ("t", "torch_ddp")):
        lost = [r["lost_s"] for r in d["runs"][prog]]
        median[key] = statistics.median(lost)
        out.update({key: f1(median[key]), f"{key}_span": span(lost, f1),
                    f"{key}_again": span([r["steps_again"] for r in d["runs"][prog]], str)})
    out["x"] = f2(median["t"] / median["r"])
    return out


def four_hosts():
    d = load("four_hosts_2026-12-07_47872ea.json")
    s = d["summary"]
    out = {"load": span(d["load_average"], f1), "every": str(d["every"]),
           "kill": str(d["kill_after"]), "videos": f"{d['videos']:,}", "batch": str(d["batch"])}
    for key, prog in (("r", "reel"), ("t", "torch_ddp")):
        runs = d["runs"][f"{prog}/killed"]
        lost = [float(r["lost_s"]) for r in runs]
        out.update({
            key: f1(statistics.median(lost)), f"{key}_span": span(lost, f1),
            f"{key}_n": str(len(runs)),
            f"{key}_on3": str(sum(r["went_on_with_3"] in (True, "True") for r in runs)),
            f"{key}_end4": str(sum(int(r["ended_with"]) == 4 for r in runs)),
            f"{key}_again": span([int(r["steps_again"]) for r in runs], str),
            f"{key}_gap": f"{s[f'{prog}/killed']['gap']['median']:.4f}",
            f"{key}_gap0": f"{s[f'{prog}/undisturbed']['gap']['median']:.4f}",
            f"{key}_ex": span([int(r["examples"]) for r in runs], str)})
    out["x"] = f2(float(out["t"]) / float(out["r"]))
    return out


def tcp_doubling():
    # Per-call time from the bus bandwidth: busbw = 2(n-1)/n x bytes / time.
    r = load("tcp_doubling_netns_default_2026-12-07_38fdef5.json")["results_busbw_GBps"]
    us = {}
    for key, sizes in r.items():
        n = int(key.split("/")[-1])
        for b, v in sizes.items():
            us[(key.split("/")[1], n, int(b))] = 2 * (n - 1) / n * int(b) / (v["median"] * 1e9) * 1e6
    out = {"reps": str(min(v["runs"] for s in r.values() for v in s.values()))}
    for b, name in ((262144, "256"), (1048576, "1m")):
        new, old = us[("reel_tcp", 2, b)], us[("reel_tcp_no_doubling", 2, b)]
        out.update({f"d{name}": f"{new:.0f}", f"r{name}": f"{old:.0f}", f"x{name}": f2(new / old)})
    return out


def compression_gap():
    """GAP with the gradient compressed against the same seed's uncompressed run; the series of
    the journal's run 1 (its larger synthetic set, stopped after one run, left out)."""
    runs = [r for r in records("compression_gap_2026-12-07_06bc00f.jsonl")
            if r["model"] == "moe" or "--videos 1000 " in r["command"]]
    out = {"load": span([r["load_1min_before"] for r in runs], f1)}
    for key, model in (("moe", "moe"), ("bv", "bilstm_video")):
        mine = [r for r in runs if r["model"] == model]
        none = {r["seed"]: r["gap"] for r in mine if r["setting"] == "none"}
        dev = max(abs(r["gap"] - none[r["seed"]]) for r in mine if r["setting"] != "none")
        out.update({f"{key}_none": f"{statistics.median(none.values()):.4f}",
                    f"{key}_bf16": f"{statistics.median(r['gap'] for r in mine if r['setting'] == 'bf16'):.4f}",
                    f"{key}_dev": f"{dev:.4f}", f"{key}_v": verdict(dev <= 0.005),
                    f"{key}_steps": str(mine[0]["steps"])})
    return out


def plan_two_hosts():
    runs = records("plan_two_hosts_2026-12-07_4fdd3ac.jsonl")
    out = {}
    for r in runs:
        out.setdefault(f"{r['model']}_{r['program'].removeprefix('reel_')}", []).append(r["ratio"])
    loads = [float(r["load_before_profile"].split()[0]) for r in runs]
    return {k: f"{f2(statistics.median(v))} ({span(v)})" for k, v in out.items()} | \
        {"load": span(loads, f1), "reps": str(max(r["run"] for r in runs))}


def ddp_moe_2hosts_bf16():
    # Against DDP's fastest program (its fp16 hook or none); rates per example of each side's
    # own count, as ddp_moe: PyTorch drops partial batches.
    name = "ddp_moe_2hosts_2026-12-07_3d724ed.json"
    out = exchange_2hosts(name, {"bf": "reel_bf16", "ov": "reel_overlap", "bz": "reel_bf16zero1"},
                          2.0, equal_work=False)
    rate = load(name)["examples_per_sec"]
    plain = rate["torch_ddp/2"]["median"]
    ov = rate["reel_overlap/2"]["median"] / plain
    out.update({"plain": f"{plain:.1f}", "bf_xp": f2(rate["reel_bf16/2"]["median"] / plain),
                "ov_xp": f2(ov), "ov_v145": verdict(ov >= 1.45)})
    return out


DERIVE = {
    "time lost per failure, 4 simulated hosts x 1 rank at 1 Gbit/s: every process of host 3 SIGKILLed mid-epoch, then host 3 started again": four_hosts,
    "tcp AllReduce by recursive doubling (`allreduce_doubling_bytes`, default 32 KiB, 1 MiB between 2 ranks), 2 simulated hosts at 1 Gbit/s": tcp_doubling,
    "whole-job training, moe, 2 simulated hosts x 1 process, 1 Gbit/s, the gradient in bf16 on the wire": ddp_moe_2hosts_bf16,
    "compression on the wire: held-out GAP@20 with the gradient in 16 bits (`optimizer.options.compression`), 2 ranks on loopback, 3 seeds": compression_gap,
    "`reel plan` on 2 simulated hosts x 1 process at 1 Gbit/s against bench/ddp's measured whole jobs, profile re-measured per rep": plan_two_hosts,
    "time lost per failure: one of 2 ranks SIGKILLed mid-epoch, restarted by the launcher from the newest saved state, bilstm_video, 1 host": restart_time,
    "bf16 against fp32 (`trainer.precision`), the BiLSTM step at full length (B 32, T 300) and whole `reel train` jobs": bf16,
    "`reel plan` at YouTube-8M's scale (prediction, not a measurement)": plan_seed_scale,
    "the seed's claim: sync against async_sgd on 2-4 simulated hosts, 1 Gbit/s, hard synthetic data, 150 steps, GAP 0.2 fixed before the runs": seed_claim,
    "`reel plan` against real runs on simulated hosts, 26 cases x 3 runs (the 2 longest x 1) (moe and a BiLSTM, sync and async, 2-4 hosts, 100 Mbit/s and 1 Gbit/s, S3 behind a 100 Mbit/s link)": plan_validation,
    "reel tune: ASHA against grid, trial-steps over the whole search": asha_vs_grid,
    "reel tune: ASHA against Optuna 3.1 (TPE + successive-halving pruner), configs/tune_moe.pbtxt on the real shards, 24 trials, 2 at once": tune_optuna,
    "fuzzing (libFuzzer), 7 targets": fuzz,
    "reel tune: per-trial overhead, 200 trials of 5 ms, 2 at once": tune_overhead,
    "receive budget: receiver's peak RSS, 4096 x 1 MiB from a faster sender": receive_budget,
    "tcp small AllReduce (<= 64 KiB x (ranks - 1)) in the agreement": tcp_small,
    "Python: `reel.read_tfrecords` against the C++ source": python_read,
    "Python: `reel.train` against `reel train`": python_train,
    "Python: `reel tune --parallel 2` against `GridSearchCV(n_jobs=2)`, 3-point grid": python_grid,
    "Python: `reel.train` from in-memory frame-level arrays against the same videos' TFRecords (two_stream, 512 videos, 1 epoch)": python_inmemory,
    "reel tune: checkpoints on disk, configs/tune_moe.pbtxt (24 trials, ASHA), `keep_checkpoints` NEEDED (default) against ALL": tune_disk,
    "thread budget: `two_stream` training, 2 ranks on 2 cores (examples/s)": thread_budget,
    "host allreduce, one host, shared memory, 64 KiB-16 MiB (busbw)": host_loopback,
    "host allreduce, 2 simulated hosts x 2 ranks, 1 Gbit/s, 1-64 MiB": host_netns2,
    "allreduce, core ring on inproc, 2 ranks as threads": allreduce_inproc,
    "whole-job training, moe on YouTube-8M video-level data, 5 epochs, 1 host": ddp_moe_1host,
    "whole-job training, moe, 2 simulated hosts x 1 process, 1 Gbit/s": ddp_moe_2hosts,
    "`reel eval` of 600 videos on 2 ranks of one host": eval_ranks,
    "async_sgd push+pull, 40 MB, loopback, 1-3 workers and a server, as whole jobs": push_pull_loop,
    "async_sgd push+pull, 40 MB, 1 Gbit/s links (simulated hosts), 1-3 workers and a server, as whole jobs": push_pull_netns,
    "allreduce on loopback, 1-16 MiB, 2 and 3 ranks, every program at the same TCP congestion control (busbw, GB/s)": allreduce_loopback,
    "allreduce, reel tcp flat ring, 1 Gbit/s links (network namespaces), 64 MiB": allreduce_netns,
    "s3_read: one 256 MiB object from a local s3rver": s3_read,
    "ingest_frame: TFRecord to padded batches, one core": ingest_frame,
    "BiLSTM training step, video (B 32, T 300, D 1024, H 256)": bilstm_video,
    "BiLSTM training step, audio (B 32, T 300, D 128, H 128)": bilstm_audio,
    "async_sgd training on loopback, hard synthetic data, 150 steps, GAP 0.2 fixed before the runs, same processes": async_train,
    "whole-job training, bilstm_video (frame level, 1,024 videos, 1 epoch), 1 host, equal work": ddp_bilstm_1host,
    "whole-job training, two_stream (both BiLSTMs, frame level, 1,024 videos, 1 epoch), 1 host, equal work": ddp_two_stream_1host,
    "whole-job training, two_stream (both BiLSTMs, frame level, 2,048 videos, 1 epoch), 2 simulated hosts x 1 process, 1 Gbit/s: the exchange overlapped with backward": ddp_two_stream_2hosts,
    "whole-job training, bilstm_video (frame level, 2,048 videos, 1 epoch), 2 simulated hosts x 1 process, 1 Gbit/s: the exchange overlapped with backward": overlap_bilstm_2hosts,
    "CI: `scripts/test.sh`, the whole suite on a fresh clone": ci_timings,
    "`reel plan` on one node against `reel train`'s epoch, 5 configs x 2 scales, profile re-measured before each rep (`--quick --profile-each-rep`)": plan_one_node,
    "allreduce, reel mpi against raw `MPI_Allreduce`, same processes (`mpi_interleaved`)": mpi_interleaved,
    "the update at memory speed: the update rules over 40 M parameters against copy and triad in the same run; the sync optimizer's update and moe's one-node training (6,000 synthetic videos, 1 epoch) before and after": update_speed,
}


# --- the table ----------------------------------------------------------------------------------

def split_table(body):
    """(lines before the rows, rows keyed by their first cell in order)."""
    lines = body.rstrip("\n").split("\n")
    head = next(i for i, line in enumerate(lines) if line.startswith("| benchmark |")) + 2
    rows = [line for line in lines[head:] if line.startswith("| ")]
    return "\n".join(lines[:head]), [(row[2:].split(" | ")[0], row) for row in rows]


def render():
    with open(ROWS) as f:
        head, rows = split_table(f.read())
    out, derived = [], []
    for name, template in rows:
        fn = DERIVE.get(name)
        if fn is None:
            out.append((name, template, None, {}))
            continue
        values = fn()
        out.append((name, template.format(**values), template, values))
        derived.append(name)
    return head, out, derived


def check(table):
    head, rows, derived = render()
    with open(table) as f:
        _, have = split_table(f.read())
    have = dict(have)
    errors = []
    for name, row, template, values in rows:
        got = have.pop(name, None)
        if got is None:
            errors.append(f"row '{name}': missing from {table}")
            continue
        if got == row:
            continue
        if template is None:
            errors.append(f"row '{name}': differs from bench/results_rows.md")
        parts = re.split(r"\{(\w+)\}", template)
        pattern = "".join(re.escape(p.replace("{{", "{").replace("}}", "}")) if i % 2 == 0
                          else f"(?P<{p}>.+?)"
                          for i, p in enumerate(parts))
        m = re.fullmatch(pattern, got)
        if m is None:
            errors.append(f"row '{name}': its text differs from bench/results_rows.md")
            continue
        for key, want in values.items():
            if key in m.groupdict() and m.group(key) != want:
                errors.append(f"row '{name}': figure '{key}' is {m.group(key)}, its raw file gives {want}")
    for name in have:
        errors.append(f"row '{name}': in {table} but not in bench/results_rows.md")
    for name, _, template, _ in rows:
        if template is None:
            errors.append(f"row '{name}': no function in bench/results.py derives its figures")
    return errors, [name for name, _, t, _ in rows if t is None]


def doc_figures(table):
    """A ratio in README.md or docs/ whose paragraph cites bench/RESULTS.md must be one of the
    table's: each of its numbers appears in the table as a ratio (N.NNx) or a range's end."""
    root = os.path.dirname(BENCH)
    with open(table) as f:
        have = f.read()
    numbers = set(re.findall(r"(\d+(?:\.\d+)?)(?=(?:-\d+(?:\.\d+)?)?x\b)", have))
    numbers |= set(re.findall(r"-(\d+(?:\.\d+)?)x\b", have))
    docs = [os.path.join(root, "README.md")] + sorted(
        os.path.join(root, "docs", n) for n in os.listdir(os.path.join(root, "docs"))
        if n.endswith(".md"))
    errors = []
    for doc in docs:
        with open(doc, encoding="utf-8") as f:
            for para in re.split(r"\n\s*\n", f.read()):
                if "bench/RESULTS.md" not in para:
                    continue
                for m in re.finditer(r"\b(\d+(?:\.\d+)?)(?:-(\d+(?:\.\d+)?))?x\b", para):
                    for n in filter(None, m.groups()):
                        if n not in numbers:
                            errors.append(f"{os.path.relpath(doc, root)}: {m.group(0)} cites "
                                          f"bench/RESULTS.md, which has no {n}x")
    return errors


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--table", default=TABLE)
    args = ap.parse_args()
    if args.check:
        errors, pending = check(args.table)
        errors += doc_figures(args.table)
        for e in errors:
            print(e, file=sys.stderr)
        print(f"{len(DERIVE) - len(pending)} rows derived from their raw files"
              + ("" if errors else ", every figure as its file gives it"))
        return 1 if errors else 0
    head, rows, _ = render()
    with open(args.table, "w") as f:
        f.write(head + "\n" + "\n".join(row for _, row, _, _ in rows) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
