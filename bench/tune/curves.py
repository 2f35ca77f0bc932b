"""What the search comparisons share: a search's progress is a curve of (compute spent so far,
metric) after each evaluation, in the order the evaluations happened."""
import statistics


def reach(curve, target):
    """The compute spent when the curve first reached target, or None."""
    return next((spent for spent, metric in curve if metric >= target), None)


def stats(xs, fmt="{:.0f}"):
    xs = sorted(xs)
    return " / ".join(fmt.format(x) for x in (xs[0], statistics.median(xs), xs[-1]))


def print_targets(runs, first, second, unit, best, tolerances, best_label="best"):
    """The table of compute to reach best - tolerance, for two searches' runs ({name: [{"curve":
    ...}]}), with the ratio of medians second / first."""
    print(f"| target GAP@20 | {first} {unit} to it (min / median / max) "
          f"| {second} {unit} to it (min / median / max) | ratio of medians, {second} / {first} |")
    print("|---|---|---|---|")
    for tolerance in tolerances:
        target = best - tolerance
        cells, medians = [], {}
        for name in (first, second):
            rs = runs[name]
            hit = [x for x in (reach(r["curve"], target) for r in rs) if x is not None]
            missed = len(rs) - len(hit)
            medians[name] = statistics.median(hit) if hit else None
            cells.append((stats(hit) if hit else "-") +
                         (f" ({missed} of {len(rs)} runs never reached it)" if missed else ""))
        ratio = (f"{medians[second] / medians[first]:.2f}"
                 if medians[first] and medians[second] else "-")
        print(f"| >= {target:.4f} ({best_label} - {tolerance}) | {cells[0]} | {cells[1]} | {ratio} |")
