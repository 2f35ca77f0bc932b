#!/usr/bin/env python3
"""allreduce across processes: reel tcp, reel mpi, raw Open MPI (default and TCP only) and Gloo's
TCP ring, alternated in one run, 2 and 3 ranks, 4 KiB .. 64 MiB float32.

  bench/allreduce/run_allreduce.py [--build build] [--ranks 2,3] [--reps 3]
      [--links loopback,netns] [--rate 1gbit] [--out bench/out]
      [--programs reel_tcp,gloo,...] [--baseline DIR] [--min-bytes B] [--max-bytes B]
      [--max-calls N]

Each repetition runs every program once per rank count, in turn, so drift on this shared machine
hits all of them alike. Every program is timed alike (allreduce_sweep.h): seconds per call on
rank 0 between barriers. algbw = bytes / time, busbw = algbw * 2(n-1)/n (nccl-tests).

Links: `loopback` runs every rank on this host's loopback (Open MPI's default also uses shared
memory); `netns` runs each rank in its own network namespace, joined by veth links limited to
--rate with tc tbf (tests/netns/netns.sh); `netns2` runs two ranks in each namespace (ranks 2i and
2i+1 on simulated host i: the layout reel tcp reduces hierarchically). mpirun cannot start ranks inside those namespaces (its
out-of-band channel lives in this namespace, which they cannot reach), so there only reel tcp and
Gloo run. Writes OUT/allreduce.json and OUT/allreduce.md.

--baseline DIR adds the program `reel_tcp_base`: reel tcp from another build (DIR/bin and
DIR/lib, e.g. a copy of main's before a change), alternated with the others, so a change to the
ring or the transport is measured against its predecessor in the same run. Each program gets its
own build's lib/ first in LD_LIBRARY_PATH.
"""
import argparse
import json
import os
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
NETNS = os.path.join(ROOT, "tests", "netns", "netns.sh")
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
          "--mca", "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo"]
TCP_SPIN_US = 20000  # reel_tcp_spin: long enough to cover a peer's turn, short against a late rank
PROGRAMS = {  # name -> (links it runs on, description)
    "reel_tcp": (("loopback", "netns", "netns2"), "reel, transport tcp, its defaults: ranks of "
                 "one host reduce through shared memory, one rank per host runs the ring across "
                 "hosts (allreduce_layout=auto); how it waits chosen by the transport (polls when "
                 "the host's ranks fit its cores)"),
    "reel_tcp_flat": (("loopback", "netns", "netns2"), "reel, transport tcp with allreduce_layout="
                      "flat (the ring of every rank over TCP, loopback between ranks of a host)"),
    "reel_tcp_spin": (("loopback", "netns", "netns2"), "reel, transport tcp with allreduce_spin_us="
                      f"--tcp-spin-us (default {TCP_SPIN_US}: busy waiting before a sleep, as MPI "
                      "polls)"),
    "reel_tcp_sleep": (("loopback", "netns"), "reel, transport tcp with allreduce_spin_us=0 "
                       "(sleeps at once: the default before the automatic choice)"),
    "reel_tcp_system_cc": (("loopback", "netns"), "reel, transport tcp with congestion_control="
                           "system (the system's TCP congestion control on loopback too; the "
                           "default replaces bbr there by reno)"),
    "reel_tcp_no_doubling": (("loopback", "netns"), "reel, transport tcp with "
                             "allreduce_doubling_bytes=0 (no recursive doubling: the data with the "
                             "agreement up to allreduce_small_bytes / (n-1), the ring above)"),
    "reel_tcp_ring_only": (("loopback", "netns"), "reel, transport tcp with "
                           "allreduce_doubling_bytes=0 and allreduce_small_bytes=0 (agree, then "
                           "the ring, at every size)"),
    "reel_tcp_doubling_only": (("loopback", "netns"), "reel, transport tcp with "
                               "allreduce_small_bytes=0 and allreduce_doubling_bytes=1073741824 "
                               "(agree, then recursive doubling, at every size)"),
    "reel_mpi": (("loopback",), "reel, transport mpi (native MPI_Allreduce behind the arrival check)"),
    "reel_mpi_polled": (("loopback",), "reel, transport mpi with polled_allreduce=true "
                        "(one MPI_Iallreduce polled against the deadline, no arrival check)"),
    "reel_mpi_blocking": (("loopback",), "reel, transport mpi with blocking_allreduce=true "
                          "(the bare blocking MPI_Allreduce, its deadline kept by a watchdog)"),
    "reel_mpi_serialized": (("loopback",), "reel, transport mpi with blocking_allreduce=true and "
                            "thread_level=serialized (MPI_THREAD_SERIALIZED, every MPI call behind "
                            "the transport's lock)"),
    "mpi": (("loopback",), "Open MPI MPI_Allreduce, default transports (shared memory)"),
    "mpi_mt": (("loopback",), "Open MPI MPI_Allreduce, default transports, initialised with "
               "MPI_THREAD_MULTIPLE as reel's mpi transport is"),
    "mpi_tcp": (("loopback",), "Open MPI MPI_Allreduce, --mca btl tcp,self"),
    "gloo": (("loopback", "netns"), "Gloo AllreduceRing, TCP transport"),
    "reel_tcp_base": (("loopback", "netns"), "reel, transport tcp, from the --baseline build"),
}
RATIOS = [("reel_tcp", "mpi"), ("reel_tcp", "reel_tcp_flat"), ("reel_tcp_flat", "mpi_tcp"),
          ("reel_tcp", "gloo"), ("reel_tcp", "mpi_tcp"), ("reel_tcp_spin", "mpi_tcp"),
          ("reel_tcp_spin", "reel_tcp"), ("reel_tcp", "reel_tcp_sleep"),
          ("reel_tcp", "reel_tcp_system_cc"), ("reel_tcp_system_cc", "mpi_tcp"), ("reel_mpi", "mpi"),
          ("reel_mpi_polled", "mpi"), ("reel_mpi_blocking", "mpi"),
          ("reel_mpi_blocking", "mpi_mt"), ("mpi_mt", "mpi"), ("reel_mpi_serialized", "mpi"),
          ("reel_mpi_serialized", "reel_mpi_blocking"), ("reel_tcp", "reel_tcp_base"),
          ("reel_tcp", "reel_tcp_no_doubling"), ("reel_tcp_doubling_only", "reel_tcp_ring_only"),
          ("reel_tcp_doubling_only", "reel_tcp_no_doubling")]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse(out):
    rows = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit():
            rows[int(parts[0])] = float(parts[1])
    return rows


def run_ranks(commands, envs, timeout):
    """Starts one process per rank; rank 0's stdout, or None if any rank failed."""
    procs = [subprocess.Popen(c, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for c, e in zip(commands, envs)]
    outs, ok = [], True
    deadline = time.time() + timeout
    for p in procs:
        try:
            out, err = p.communicate(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            return None, "timeout"
        outs.append((out, err))
        ok = ok and p.returncode == 0
    if not ok:
        return None, " | ".join(e.strip()[-300:] for _, e in outs if e.strip())
    return outs[0][0], ""


def run(program, n, link, args, netns_name):
    build = args.baseline if program == "reel_tcp_base" else args.build
    b = os.path.join(build, "bin")
    sweep = ["--budget-bytes", str(args.budget), "--min-bytes", str(args.min_bytes),
             "--max-bytes", str(args.max_bytes), "--max-calls", str(args.max_calls)]
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        p for p in (os.path.join(os.path.abspath(build), "lib"), env.get("LD_LIBRARY_PATH")) if p)
    if program in ("mpi", "mpi_mt", "mpi_tcp") or program.startswith("reel_mpi"):
        cmd = MPIRUN + (["--mca", "btl", "tcp,self"] if program == "mpi_tcp" else []) + ["-n", str(n)]
        if program == "reel_mpi":
            cmd += [os.path.join(b, "reel_allreduce_peer"), "--transport", "mpi"]
        elif program == "reel_mpi_polled":
            cmd += [os.path.join(b, "reel_allreduce_peer"), "--transport", "mpi",
                    "--option", "polled_allreduce=true"]
        elif program == "reel_mpi_blocking":
            cmd += [os.path.join(b, "reel_allreduce_peer"), "--transport", "mpi",
                    "--option", "blocking_allreduce=true"]
        elif program == "reel_mpi_serialized":
            cmd += [os.path.join(b, "reel_allreduce_peer"), "--transport", "mpi",
                    "--option", "blocking_allreduce=true", "--option", "thread_level=serialized"]
        else:
            cmd += [os.path.join(b, "mpi_allreduce_peer")]
            if program == "mpi_mt":
                cmd += ["--thread-multiple"]
        out, err = run_ranks([cmd + sweep], [env], args.timeout)
        return out, err
    host = (lambda i: i // 2) if link == "netns2" else (lambda i: i)  # the namespace of rank i
    addr = (lambda i: "127.0.0.1") if link == "loopback" else (
        lambda i: subprocess.check_output([NETNS, "addr", str(host(i))], text=True).strip())
    wrap = (lambda i, c: c) if link == "loopback" else (
        lambda i, c: ["ip", "netns", "exec", f"{netns_name}-r{host(i)}"] + c)
    commands, envs = [], []
    store = tempfile.mkdtemp(prefix="reel-gloo-store-")
    port = free_port()
    secret = secrets.token_hex(16)
    for i in range(n):
        e = dict(env, REEL_RANK=str(i), REEL_WORLD_SIZE=str(n))
        if program.startswith("reel_tcp"):
            e.update(REEL_COORDINATOR=f"{addr(0)}:{port}", REEL_SECRET=secret)
            c = [os.path.join(b, "reel_allreduce_peer"), "--transport", "tcp",
                 "--option", f"listen_address={addr(i)}"]
            if program in ("reel_tcp_spin", "reel_tcp_sleep"):
                spin = args.tcp_spin_us if program == "reel_tcp_spin" else 0
                c += ["--option", f"allreduce_spin_us={spin}"]
            if program == "reel_tcp_system_cc":
                c += ["--option", "congestion_control=system"]
            if program == "reel_tcp_flat":
                c += ["--option", "allreduce_layout=flat"]
            if program in ("reel_tcp_no_doubling", "reel_tcp_ring_only"):
                c += ["--option", "allreduce_doubling_bytes=0"]
            if program in ("reel_tcp_ring_only", "reel_tcp_doubling_only"):
                c += ["--option", "allreduce_small_bytes=0"]
            if program == "reel_tcp_doubling_only":
                c += ["--option", "allreduce_doubling_bytes=1073741824"]
        else:
            c = [os.path.join(b, "gloo_allreduce_peer"), "--store", store, "--host", addr(i)]
        commands.append(wrap(i, c + sweep))
        envs.append(e)
    try:
        return run_ranks(commands, envs, args.timeout)
    finally:
        shutil.rmtree(store, ignore_errors=True)


def summary(times, n):
    """min/median/max busbw (GB/s) from seconds per call."""
    bus = sorted(b / t / 1e9 * 2 * (n - 1) / n for b, t in times)
    return {"min": bus[0], "median": statistics.median(bus), "max": bus[-1], "runs": len(bus)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--ranks", default="2,3")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--links", default="loopback,netns")
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--programs", default=",".join(PROGRAMS))
    ap.add_argument("--budget", type=int, default=256 << 20, help="bytes per size on loopback")
    ap.add_argument("--min-bytes", type=int, default=4096, help="smallest size")
    ap.add_argument("--max-bytes", type=int, default=64 << 20, help="largest size")
    ap.add_argument("--max-calls", type=int, default=1000,
                    help="calls per size at most (small sizes: 1000 calls of 4 KiB last a few ms)")
    ap.add_argument("--tcp-spin-us", type=int, default=TCP_SPIN_US,
                    help="allreduce_spin_us of the reel_tcp_spin program")
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "out"))
    ap.add_argument("--congestion-control", default="",
                    help="set the system's TCP congestion control (sysctl, as root) to this for the "
                    "run and restore it after: Open MPI's connections use the system's, reel's on "
                    "loopback reno, so `reno` compares them with equal congestion control (issue 50)")
    ap.add_argument("--baseline", help="build dir (bin/, lib/) of the reel_tcp_base program")
    args = ap.parse_args()
    ranks = [int(r) for r in args.ranks.split(",")]
    programs = args.programs.split(",")
    if args.baseline and "reel_tcp_base" not in programs:
        programs.append("reel_tcp_base")
    if "reel_tcp_base" in programs and not args.baseline:
        ap.error("program reel_tcp_base needs --baseline DIR")
    command = "bench/allreduce/run_allreduce.py " + " ".join(sys.argv[1:])
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = next((l.split(":", 1)[1].strip() for l in lscpu.splitlines() if l.startswith("Model name")), "?")
    loads = [os.getloadavg()]
    restore = system_congestion_control()
    if args.congestion_control:
        set_congestion_control(args.congestion_control)
    try:
        measure(args, ranks, programs, command, model, loads)
    finally:
        if args.congestion_control:
            set_congestion_control(restore)


CC = "/proc/sys/net/ipv4/tcp_congestion_control"


def system_congestion_control():
    with open(CC) as f:
        return f.read().strip()


def set_congestion_control(name):
    subprocess.run(["sysctl", "-q", f"net.ipv4.tcp_congestion_control={name}"], check=True)


def measure(args, ranks, programs, command, model, loads):
    results = {}  # (link, program, n) -> {bytes: [seconds...]}
    failures = []
    for link in args.links.split(","):
        netns_name = f"reelbench{os.getpid()}"
        budget = args.budget
        if link.startswith("netns"):
            hosts = max(ranks) if link == "netns" else (max(ranks) + 1) // 2
            up = subprocess.run([NETNS, "up", netns_name, str(hosts), args.rate],
                                capture_output=True, text=True)
            if up.returncode != 0:
                failures.append(f"netns: {up.stderr.strip()}")
                continue
            args.budget = 64 << 20  # 1 Gbit/s: keep each size to a few seconds
        try:
            for rep in range(args.reps):
                for n in ranks:
                    for program in programs:
                        if link not in PROGRAMS[program][0]:
                            continue
                        out, err = run(program, n, link, args, netns_name)
                        print(f"{link} rep {rep} {program} n={n}: {'ok' if out else 'FAILED ' + err}",
                              file=sys.stderr, flush=True)
                        if out is None:
                            failures.append(f"{link} {program} n={n} rep {rep}: {err}")
                            continue
                        for b, t in parse(out).items():
                            results.setdefault((link, program, n), {}).setdefault(b, []).append(t)
                        # Written after every run, so an interrupted benchmark keeps what it has.
                        write(args, command, model, loads + [os.getloadavg()], results, failures,
                              ranks, programs)
        finally:
            if link.startswith("netns"):
                subprocess.run([NETNS, "down", netns_name])
            args.budget = budget
        loads.append(os.getloadavg())

    write(args, command, model, loads + [os.getloadavg()], results, failures, ranks, programs)


def write(args, command, model, loads, results, failures, ranks, programs):
    """Writes OUT/allreduce.json and .md from what has been measured so far."""
    table = {f"{l}/{p}/{n}": {str(b): summary([(b, t) for t in ts], n) for b, ts in sorted(v.items())}
             for (l, p, n), v in sorted(results.items())}
    doc = {"benchmark": "allreduce", "command": command, "cpu": model, "cores": os.cpu_count(),
           "load_average_1_5_15_per_link": loads, "rate": args.rate,
           # the system's, which Open MPI's and Gloo's connections use (reel's pick reno on
           # loopback unless congestion_control=system)
           "system_congestion_control": system_congestion_control(), "results_busbw_GBps": table,
           "failures": failures}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "allreduce.json"), "w") as f:
        json.dump(doc, f, indent=1)
    tables = render_tables(results, ranks, args.rate)
    print(tables)
    load_text = ", ".join("/".join(f"{x:.2f}" for x in l) for l in loads)
    with open(os.path.join(args.out, "allreduce.md"), "w") as f:
        f.write("# allreduce across processes: reel tcp and mpi against Open MPI and Gloo\n\n"
                f"Command: `{command}` (after building the targets `reel_allreduce_peer`, "
                "`mpi_allreduce_peer`, `gloo_allreduce_peer` and the `tcp` and `mpi` plugins)\n\n"
                f"Machine: {model}, {os.cpu_count()} cores, shared with other engineers' builds; "
                f"load average (1/5/15 min) at the start and after each link: {load_text}.\n\n"
                "Programs: " + "; ".join(f"`{p}`: {PROGRAMS[p][1]}" for p in programs) + ".\n\n"
                f"{args.reps} runs per case, programs alternated within each repetition. "
                "busbw = algbw * 2(n-1)/n, algbw = bytes / seconds per call (rank 0, between "
                "barriers); GB/s = 1e9 bytes/s.\n" + tables + "\n")
        if failures:
            f.write("\nFailed runs:\n\n" + "\n".join(f"- {x}" for x in failures) + "\n")
    if failures:
        print("failures:\n  " + "\n  ".join(failures))


def render_tables(results, ranks, rate):
    """Markdown: busbw min/median/max per program, then the ratios of medians."""
    lines = []
    for link in ("loopback", "netns", "netns2"):
        for n in ranks:
            progs = [p for p in PROGRAMS if (link, p, n) in results]
            if not progs:
                continue
            sizes = sorted({b for p in progs for b in results[(link, p, n)]})
            title = {"loopback": "loopback",
                     "netns": f"a network namespace each, links limited to {rate}",
                     "netns2": f"two ranks per network namespace, links limited to {rate}"}[link]
            lines += [f"\n### {n} ranks, {title}: busbw GB/s, median (min–max) of the runs\n",
                      "| bytes | " + " | ".join(progs) + " |", "|---" * (len(progs) + 1) + "|"]
            med = {}
            for b in sizes:
                cells = []
                for p in progs:
                    ts = results[(link, p, n)].get(b)
                    if not ts:
                        cells.append("–")
                        continue
                    s = summary([(b, t) for t in ts], n)
                    med[(p, b)] = s["median"]
                    cells.append(f"{s['median']:.3f} ({s['min']:.3f}–{s['max']:.3f})")
                lines.append(f"| {b} | " + " | ".join(cells) + " |")
            ratios = [(a, c) for a, c in RATIOS if a in progs and c in progs]
            if ratios:
                lines += ["", "| bytes | " + " | ".join(f"{a} / {c}" for a, c in ratios) + " |",
                          "|---" * (len(ratios) + 1) + "|"]
                for b in sizes:
                    cells = [f"{med[(a, b)] / med[(c, b)]:.2f}" if (a, b) in med and (c, b) in med else "–"
                             for a, c in ratios]
                    lines.append(f"| {b} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
