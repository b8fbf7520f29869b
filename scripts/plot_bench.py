#!/usr/bin/env python3
"""Draw the sweep of `smax bench` (and `python -m smax.bench`): GB/s against the
row length, one line per implementation, the copy limit as a dashed line, one
panel per thread count; like the figure of Triton's fused-softmax tutorial.

    plot_bench.py --output docs/bench-sweep.svg build/bench.json [more.json ...]

Several JSON files are merged (e.g. the C++ run and the Python run on the same
machine). Exit status: 0 written, 2 bad arguments or input, 3 matplotlib missing.
"""
import argparse
import json
import sys
from collections import defaultdict


def load_results(paths, workload, dtype):
    """(threads, impl) -> sorted [(columns, gbps)], and the first file's machine."""
    series = defaultdict(list)
    machine = None
    for path in paths:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        machine = machine or data.get("machine", {})
        for r in data.get("results", []):
            if r.get("workload") != workload or r.get("dtype") != dtype or not r.get("gbps"):
                continue
            if r.get("ok") is False:  # a result that failed its check is not a speed
                continue
            series[(r["threads"], r["impl"])].append((r["shape"][-1], r["gbps"]))
    return {key: sorted(points) for key, points in series.items()}, machine or {}


def pick_default(paths, workload, dtype):
    """The sweep in f32 when present; else the (workload, dtype) with the most results."""
    counts = defaultdict(int)
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for r in json.load(f).get("results", []):
                if (workload is None or r.get("workload") == workload) and (dtype is None or r.get("dtype") == dtype):
                    counts[(r.get("workload"), r.get("dtype"))] += 1
    if not counts:
        return workload or "sweep", dtype or "f32"
    for preferred in [(workload or "sweep", dtype or "f32")]:
        if preferred in counts:
            return preferred
    return max(counts, key=counts.get)


def style(impl):
    """The copies are the limit (black; memcpy dashed, streaming stores dash-dotted); smax's auto stands out; libraries dotted."""
    if impl == "copy":
        return dict(color="black", linestyle="--", linewidth=2.0, label="copy (memcpy)")
    if impl == "copy-nt":
        return dict(color="black", linestyle="-.", linewidth=1.5, label="copy-nt (streaming stores)")
    if impl == "smax:auto":
        return dict(linewidth=2.5, marker="o", markersize=4, label=impl)
    if impl.startswith("smax:"):
        return dict(linewidth=1.0, marker=".", markersize=3, alpha=0.8, label=impl)
    return dict(linewidth=2.0, linestyle=":", marker="s", markersize=4, label=impl)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("json", nargs="+", help="smax bench --json files")
    parser.add_argument("--output", "-o", required=True, help="image file: .svg, .png or .pdf")
    parser.add_argument("--workload", help="default: sweep, else the workload with the most points")
    parser.add_argument("--dtype", help="default: f32 if present, else the first dtype found")
    args = parser.parse_args()

    try:
        import matplotlib
        matplotlib.use("Agg")  # no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_bench.py: matplotlib is not installed (apt-get install python3-matplotlib)", file=sys.stderr)
        return 3

    try:
        if not args.workload or not args.dtype:
            args.workload, args.dtype = pick_default(args.json, args.workload, args.dtype)
        series, machine = load_results(args.json, args.workload, args.dtype)
    except (OSError, ValueError, KeyError) as e:
        print(f"plot_bench.py: cannot read the results: {e}", file=sys.stderr)
        return 2
    if not series:
        print(f"plot_bench.py: no {args.dtype} results of workload '{args.workload}' in {', '.join(args.json)}",
              file=sys.stderr)
        return 2

    thread_counts = sorted({threads for threads, _ in series})
    impls = []  # in first-seen order: copy, smax variants, libraries
    for _, impl in series:
        if impl not in impls:
            impls.append(impl)
    fig, axes = plt.subplots(1, len(thread_counts), figsize=(6 * len(thread_counts) + 2, 5), squeeze=False,
                             sharey=True)
    for ax, threads in zip(axes[0], thread_counts):
        for impl in impls:
            points = series.get((threads, impl))
            if not points:
                continue
            xs, ys = zip(*points)
            ax.plot(xs, ys, **style(impl))
        ax.set_xscale("log", base=2)
        # Log scale: the copy limit and the kernels can be two orders of magnitude apart.
        ax.set_yscale("log")
        ax.set_xlabel("columns (row length, elements)")
        ax.set_title(f"{args.dtype} softmax, {threads} thread{'s' if threads > 1 else ''}")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("GB/s (input + output bytes / median time)")
    # One legend for all panels, outside them, so that it hides no line.
    handles, labels = [], []
    for ax in axes[0]:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    fig.legend(handles, labels, loc="center right", fontsize=8)
    cpu = machine.get("cpu_model", "unknown CPU")
    version = machine.get("smax_version", "?")
    fig.suptitle(f"smax {version} bench, {args.workload}: {cpu}", fontsize=10)
    fig.tight_layout(rect=(0, 0, 0.87, 1))
    fig.savefig(args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
