#!/usr/bin/env python3
"""Draw a tensorasync trace (Chrome trace-event JSON, from TA_TRACE or
ta_runtime_trace_stop) as a PNG Gantt chart: one row per worker (and per
device stream), each operation a bar coloured by its name, idle time left
blank, optionally the critical path outlined.

    python3 scripts/trace_gantt.py trace.json -o trace.png [--critical-path]
        [--width 1600] [--height 600] [--dpi 100] [--title TEXT]
        [--intervals out.json] [--layout out.json]

The critical path is the chain of dependent operations (through the
recorded dependency edges) with the largest total run time: however many
workers there are, the run takes at least that long.

--intervals writes the parsed intervals (row, name, id, start_us, end_us);
--layout writes each row's pixel band in the PNG (top, bottom), for tests.
Needs matplotlib.
"""
import argparse
import json
import sys


def load(path):
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    names = {}
    tasks = []
    device = []
    for e in events:
        ph = e.get("ph")
        if ph == "M" and e.get("name") == "thread_name":
            names[e["tid"]] = e["args"]["name"]
        elif ph == "X":
            iv = {
                "tid": e["tid"],
                "name": e["name"],
                "start_us": float(e["ts"]),
                "end_us": float(e["ts"]) + float(e.get("dur", 0)),
                "args": e.get("args", {}),
            }
            iv["id"] = iv["args"].get("id")
            (tasks if e.get("cat") == "task" else device).append(iv)
    return trace, names, tasks, device


def rows_of(names, tasks, device):
    """Row order: workers by tid (tid 0, other threads, only if used), then device streams."""
    used = {iv["tid"] for iv in tasks + device}
    worker_tids = sorted(t for t in names if 0 < t < 1000)
    rows = ([0] if 0 in used else []) + worker_tids + sorted(t for t in used if t >= 1000)
    rows += sorted(t for t in used if t not in rows)
    return rows


def bursts(intervals, gap_us):
    """[(start, end)] of the groups of intervals separated by idle gaps of at least gap_us."""
    out = []
    for iv in sorted(intervals, key=lambda iv: iv["start_us"]):
        if out and iv["start_us"] - out[-1][1] < gap_us:
            out[-1][1] = max(out[-1][1], iv["end_us"])
        else:
            out.append([iv["start_us"], iv["end_us"]])
    return [tuple(b) for b in out]


def critical_path(tasks):
    """Ids on the critical path: the chain of dependent operations (through
    the recorded edges) with the largest total run time."""
    by_id = {iv["id"]: iv for iv in tasks if iv["id"] is not None}
    best = {}  # id -> (total run time of the heaviest chain ending here, previous id)
    for i in sorted(by_id):
        iv = by_id[i]
        preds = [p["op"] for p in iv["args"].get("preds", []) if p.get("op") in best]
        prev = max(preds, key=lambda p: best[p][0]) if preds else None
        best[i] = ((best[prev][0] if prev is not None else 0.0) + iv["end_us"] - iv["start_us"], prev)
    if not best:
        return []
    cur = max(best, key=lambda i: best[i][0])
    path = []
    while cur is not None:
        path.append(cur)
        cur = best[cur][1]
    return path[::-1]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--critical-path", action="store_true")
    ap.add_argument("--width", type=int, default=1600, help="pixels")
    ap.add_argument("--height", type=int, default=0, help="pixels (default: from the number of rows)")
    ap.add_argument("--dpi", type=int, default=100)
    ap.add_argument("--title", default=None)
    ap.add_argument("--window", nargs=2, type=float, metavar=("START_US", "END_US"),
                    help="draw only operations that overlap this window (trace time, microseconds)")
    ap.add_argument("--burst", type=int, default=None, metavar="K",
                    help="draw only the K-th burst of activity (0 first, -1 last): operations separated from others by idle gaps of at least --gap-us")
    ap.add_argument("--gap-us", type=float, default=1000.0)
    ap.add_argument("--intervals", default=None, help="write the parsed intervals here (JSON)")
    ap.add_argument("--layout", default=None, help="write the rows' pixel bands here (JSON)")
    a = ap.parse_args(argv)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    trace, names, tasks, device = load(a.trace)
    if a.burst is not None:
        found = bursts(tasks + device, a.gap_us)
        if not found:
            sys.exit("trace_gantt: the trace has no operations")
        a.window = found[a.burst]
    if a.window:
        lo, hi = a.window
        keep = lambda iv: iv["end_us"] >= lo and iv["start_us"] <= hi
        tasks = [iv for iv in tasks if keep(iv)]
        device = [iv for iv in device if keep(iv)]
    rows = rows_of(names, tasks, device)
    row_index = {tid: i for i, tid in enumerate(rows)}
    everything = tasks + device
    t0 = min((iv["start_us"] for iv in everything), default=0.0)
    t1 = max((iv["end_us"] for iv in everything), default=1.0)
    span_ms = max(t1 - t0, 1e-3) / 1000.0

    # Colours: by operation name, the most frequent first.
    counts = {}
    for iv in everything:
        counts[iv["name"]] = counts.get(iv["name"], 0) + 1
    order = sorted(counts, key=lambda n: (-counts[n], n))
    cmap = plt.get_cmap("tab10" if len(order) <= 10 else "tab20")
    colour = {n: cmap(i % cmap.N) for i, n in enumerate(order)}

    height = a.height or max(240, 110 + 46 * len(rows))
    fig = plt.figure(figsize=(a.width / a.dpi, height / a.dpi), dpi=a.dpi)
    # Fixed margins (in pixels) so the row bands are known exactly.
    left, right, top, bottom = 150, 200, 50 if a.title else 20, 60
    ax = fig.add_axes([left / a.width, bottom / height, 1 - (left + right) / a.width, 1 - (top + bottom) / height])
    crit = set(critical_path(tasks)) if a.critical_path else set()
    # Busy time per row: the union of its intervals (a kernel that waits in
    # a parallel join may run other operations nested inside its own slice).
    busy = {tid: 0.0 for tid in rows}
    for tid in rows:
        reach = None
        for iv in sorted((iv for iv in everything if iv["tid"] == tid), key=lambda iv: iv["start_us"]):
            s0 = iv["start_us"] if reach is None else max(iv["start_us"], reach)
            if iv["end_us"] > s0:
                busy[tid] += iv["end_us"] - s0
            reach = iv["end_us"] if reach is None else max(reach, iv["end_us"])
    # Longest first, so that nested operations are drawn on top of the one
    # they ran inside.
    for iv in sorted(everything, key=lambda iv: -(iv["end_us"] - iv["start_us"])):
        y = row_index[iv["tid"]]
        x = (iv["start_us"] - t0) / 1000.0
        w = max((iv["end_us"] - iv["start_us"]) / 1000.0, 3 * span_ms / (a.width - left - right))  # at least 3 pixels
        on_path = iv in tasks and iv["id"] in crit
        ax.broken_barh([(x, w)], (y - 0.4, 0.8), facecolors=colour[iv["name"]],
                       edgecolors="black" if on_path else "none", linewidth=1.6 if on_path else 0)
    if crit:
        by_id = {iv["id"]: iv for iv in tasks}
        pts = [by_id[i] for i in critical_path(tasks)]
        for p, q in zip(pts, pts[1:]):
            ax.plot([(p["end_us"] - t0) / 1000.0, (q["start_us"] - t0) / 1000.0],
                    [row_index[p["tid"]], row_index[q["tid"]]], color="black", linewidth=1.0)
    labels = []
    for tid in rows:
        n = names.get(tid, "thread %d" % tid)
        n = n.split(" (")[0]
        labels.append("%s\n%.0f%% busy" % (n, 100.0 * busy[tid] / max(t1 - t0, 1e-9)))
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(labels)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(0, span_ms)
    ax.set_xlabel("time (ms)")
    ax.grid(axis="x", color="#dddddd", linewidth=0.5)
    ax.set_axisbelow(True)
    handles = [Patch(color=colour[n], label="%s (%d)" % (n, counts[n])) for n in order[:12]]
    if crit:
        handles.append(Patch(facecolor="white", edgecolor="black", label="critical path (%d ops)" % len(crit)))
    other = trace.get("otherData", {}) if isinstance(trace, dict) else {}
    if other.get("dropped"):
        handles.append(Patch(color="white", label="%d older operations dropped" % other["dropped"]))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False, borderaxespad=0)
    if a.title:
        fig.suptitle(a.title)
    fig.savefig(a.out, dpi=a.dpi)

    if a.intervals:
        with open(a.intervals, "w") as f:
            json.dump([{"row": names.get(iv["tid"], str(iv["tid"])), "tid": iv["tid"], "name": iv["name"], "id": iv["id"],
                        "start_us": iv["start_us"], "end_us": iv["end_us"], "device": iv in device} for iv in everything], f)
    if a.layout:
        axes_top = top
        axes_h = height - top - bottom
        band = axes_h / len(rows) if rows else 0
        with open(a.layout, "w") as f:
            json.dump({"width": a.width, "height": height, "rows": [
                {"tid": tid, "name": names.get(tid, str(tid)), "top": axes_top + i * band + 0.1 * band,
                 "bottom": axes_top + (i + 1) * band - 0.1 * band,
                 "left": left, "right": a.width - right} for i, tid in enumerate(rows)],
                "critical_path": critical_path(tasks) if a.critical_path else []}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
