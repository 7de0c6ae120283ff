#!/usr/bin/env python3
"""Interleaved A/B pairs of the task-overhead bench (examples-c/bench/bench.c,
patterns (a) chain, (b) independent, (c) fan-out) between two builds of
libtensorasync.so.0, each in its own folder, picked with LD_LIBRARY_PATH.

    ab_pairs.py BENCH DIR_A DIR_B PAIRS [--traced-a]

Each pair runs A and B, alternating which goes first; prints each pair's
B/A ratios of the runs' medians and minima, then their medians over the
pairs. Below 1 means B is faster. With --traced-a, each pair also runs A
with trace recording on (TA_TRACE) and prints what recording costs per task.
By hand on a quiet machine, not in CI: timings are not tests.
"""
import re
import statistics
import subprocess
import sys


def run(bench, libdir, trace_file=None):
    env = {"LD_LIBRARY_PATH": libdir, "PATH": "/usr/bin:/bin"}
    if trace_file:
        # A small ring (the oldest records dropped) keeps the file small; the
        # cost per task is the recording's all the same.
        env["TA_TRACE"] = trace_file
        env["TA_TRACE_CAPACITY"] = "8192"
    text = subprocess.run([bench, "--only=ta"], env=env, capture_output=True, text=True,
                          check=True, timeout=600).stdout
    r = {m.group(1): (float(m.group(2)), float(m.group(3)))
         for m in re.finditer(r"RESULT pattern=(\w+) impl=tensorasync unit=\S+ median=([\d.]+) min=([\d.]+)", text)}
    assert set(r) >= {"a", "b", "c"}, text
    return r


def main():
    bench, dir_a, dir_b, pairs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    traced = "--traced-a" in sys.argv[5:]
    dirs = {"a": dir_a, "b": dir_b}
    ratios = {(p, k): [] for p in "abc" for k in (0, 1)}
    on_cost = {p: [] for p in "abc"}
    for i in range(pairs):
        order = ("a", "b") if i % 2 == 0 else ("b", "a")
        res = {tag: run(bench, dirs[tag]) for tag in order}
        if traced:
            t = run(bench, dir_a, trace_file=f"{dir_a}/trace.json")
            for p in "abc":
                on_cost[p].append(t[p][0] - res["a"][p][0])
        cells = []
        for p in "abc":
            for k in (0, 1):
                ratios[(p, k)].append(res["b"][p][k] / res["a"][p][k])
            cells.append(f"({p}) A {res['a'][p][0]:.0f}/{res['a'][p][1]:.0f} B {res['b'][p][0]:.0f}/{res['b'][p][1]:.0f}"
                         f" B/A {ratios[(p, 0)][-1]:.3f}/{ratios[(p, 1)][-1]:.3f}")
        print(f"pair {i + 1:2d} (ns/task median/min): " + " | ".join(cells), flush=True)
    for p in "abc":
        for k, what in ((0, "medians"), (1, "minima")):
            rs = ratios[(p, k)]
            print(f"pattern ({p}), ratio of the runs' {what}: median B/A {statistics.median(rs):.3f}"
                  f" (min {min(rs):.3f}, max {max(rs):.3f}, {len(rs)} pairs)")
    if traced:
        for p in "abc":
            print(f"pattern ({p}), recording on: median {statistics.median(on_cost[p]):+.0f} ns/task over A off")


if __name__ == "__main__":
    main()
