#!/usr/bin/env python3
"""The training table of a run_async_bench.py result file: per case, median (min-max) over the
repetitions of the wall time, the whole job's examples/s, the seconds and examples to the target
GAP, and the final GAP. Usage: bench/async_sgd/train_table.py RESULT.json"""
import json
import statistics
import sys


def cell(xs, fmt):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-"
    return f"{fmt.format(statistics.median(xs))} ({fmt.format(min(xs))}-{fmt.format(max(xs))})"


def whole_job(x):
    """Examples over start to exit: the file's own count, or (files before issue 50, whose
    examples_per_sec was a median of log windows) steps x 32 x workers is not assumed: none."""
    return x.get("whole_job_examples_per_sec")


def main():
    r = json.load(open(sys.argv[1]))
    print(f"`{r['command']}`; link {r['link']} {r.get('rate') or ''}, data {r['data']}; "
          f"load averages {[round(l[0], 2) for l in r['loads']]}")
    print()
    print("| case | wall s | examples/s (whole job) | seconds to target | examples to target "
          "| runs reaching it | final GAP |")
    print("|---|---|---|---|---|---|---|")
    for name, rows in r["train"].items():
        reached = sum(1 for x in rows if x["target_step"] is not None)
        print(f"| {name} | {cell([x['wall_seconds'] for x in rows], '{:.2f}')} | "
              f"{cell([whole_job(x) for x in rows], '{:.0f}')} | "
              f"{cell([x['target_seconds'] for x in rows], '{:.2f}')} | "
              f"{cell([x['target_examples'] for x in rows], '{:.0f}')} | {reached} of {len(rows)} | "
              f"{cell([x['final_gap'] for x in rows], '{:.3f}')} |")


if __name__ == "__main__":
    main()
