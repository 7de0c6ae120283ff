#!/usr/bin/env python3
"""Checks of traces written by the library and of scripts/trace_gantt.py.

    test_trace_gantt.py --diamond D.json --program P.json... --workdir DIR

--diamond: the trace test_observe writes (TRACE_OUT): the diamond A -> {B, C}
  -> D on one tensor with A held until all were enrolled, and E failing.
  Its edges must be exactly those the epoch-queue rule gives.
--program: any trace of a real program (e.g. the tiled Cholesky under
  TA_TRACE): every operation once, times in order, and its edges checked
  against the epoch-queue rule replayed from the recorded accesses.
Then the Gantt script is run on a generated trace (known intervals on three
workers, one device stream) and on the program traces: the PNG has the asked
size, every row with work has non-background pixels in its band, and the
intervals the script parsed are the trace's.
"""
import argparse
import json
import os
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg)


def tasks_of(trace):
    return [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "task"]


def rule_edges(tasks):
    """The edges the epoch-queue rule gives, replayed in submission (id)
    order from the recorded accesses: a read waits for the tensor's last
    writer; a write or update waits for the last writer and for the readers
    since it."""
    last_writer, readers = {}, {}
    edges = set()
    for t in sorted(tasks, key=lambda t: t["args"]["id"]):
        i = t["args"]["id"]
        for acc in t["args"]["accesses"]:
            x = acc["tensor"]
            if x in last_writer:
                edges.add((last_writer[x], i, x))
            if acc["mode"] == "read":
                readers.setdefault(x, []).append(i)
            else:
                for r in readers.get(x, []):
                    edges.add((r, i, x))
                last_writer[x], readers[x] = i, []
    return {e for e in edges if e[0] != e[1]}


def check_trace(path, exact_edges):
    trace = json.load(open(path))
    tasks = tasks_of(trace)
    ids = [t["args"]["id"] for t in tasks]
    check(len(ids) == len(set(ids)), "%s: an operation appears twice" % path)
    check(trace["otherData"]["recorded"] == len(tasks), "%s: recorded %s but %d task slices" % (path, trace["otherData"]["recorded"], len(tasks)))
    by_id = {t["args"]["id"]: t for t in tasks}
    # Device work: a device operation after one of the same device may start
    # once that one has queued its work (issued), before it finishes.
    issued = {e["args"]["id"]: (e["args"]["device"], float(e["ts"])) for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "device"}

    def released(q, t):
        qi, ti = issued.get(q["args"]["id"]), issued.get(t["args"]["id"])
        if qi and ti and qi[0] == ti[0]:
            return qi[1]
        return q["args"]["finish_us"]

    for t in tasks:
        a = t["args"]
        order = [a["submit_us"], a["enrolled_us"], a["start_us"], a["finish_us"], a["end_us"]]
        check(order == sorted(order), "%s: op %d times out of order: %s" % (path, a["id"], order))
        check(abs(float(t["ts"]) - a["start_us"]) < 1e-6, "%s: op %d slice starts at %s, not at its start" % (path, a["id"], t["ts"]))
        check(a["submit_us"] <= a["ready_us"] <= a["start_us"], "%s: op %d ready %s outside submit %s .. start %s" % (path, a["id"], a["ready_us"], a["submit_us"], a["start_us"]))
        check(float(t["ts"]) + float(t["dur"]) <= a["end_us"] + 1e-3, "%s: op %d slice ends after the operation" % (path, a["id"]))
        for p in a["preds"]:
            q = by_id.get(p["op"])
            if q:
                check(released(q, t) <= a["start_us"], "%s: op %d started before its predecessor %d released it" % (path, a["id"], p["op"]))
    recorded = {(p["op"], t["args"]["id"], p["tensor"]) for t in tasks for p in t["args"]["preds"] if p["op"] in by_id}
    rule = rule_edges(tasks)
    if exact_edges:
        check(recorded == rule, "%s: edges %s, the epoch rule gives %s" % (path, sorted(recorded), sorted(rule)))
    else:
        # Every recorded edge is one the rule gives; every rule edge whose
        # predecessor released its accesses after the successor was enrolled
        # is recorded (one released earlier needs no edge).
        check(recorded <= rule, "%s: edges not given by the rule: %s" % (path, sorted(recorded - rule)[:10]))
        needed = {(p, s, x) for (p, s, x) in rule if by_id[p]["args"]["finish_us"] > by_id[s]["args"]["enrolled_us"]}
        check(needed <= recorded, "%s: edges missing: %s" % (path, sorted(needed - recorded)[:10]))
    flows = [e for e in trace["traceEvents"] if e.get("ph") in ("s", "f")]
    check(len(flows) == 2 * len(recorded) or not exact_edges, "%s: %d flow events for %d edges" % (path, len(flows), len(recorded)))
    return trace, tasks


def generated_trace(path):
    """A trace with known intervals: 3 workers, a device stream, chains."""
    rnd = random.Random(7)
    ev = [{"name": "thread_name", "ph": "M", "pid": 1, "tid": w, "args": {"name": "worker %d" % (w - 1)}} for w in (1, 2, 3)]
    ev.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": 1000, "args": {"name": "device 0 stream 0"}})
    truth = []
    i = 0
    for w in (1, 2, 3):
        t = 50.0 * w
        for k in range(20):
            i += 1
            t, dur = round(t, 3), round(rnd.uniform(5, 40), 3)
            name = ["gemm", "syrk", "trsm", "potrf"][rnd.randrange(4)]
            preds = [{"op": i - 1, "tensor": 0}] if k else []
            ev.append({"name": name, "cat": "task", "ph": "X", "pid": 1, "tid": w, "ts": t, "dur": dur,
                       "args": {"id": i, "preds": preds, "finish_us": round(t + dur, 3), "end_us": round(t + dur, 3)}})
            truth.append((w, name, i, t, round(t + dur, 3)))
            t += dur + rnd.uniform(2, 30)  # idle gaps
    ev.append({"name": "gemm", "cat": "device", "ph": "X", "pid": 1, "tid": 1000, "ts": 100.0, "dur": 300.0, "args": {"id": 999}})
    truth.append((1000, "gemm", 999, 100.0, 400.0))
    json.dump({"traceEvents": ev, "otherData": {"dropped": 0}}, open(path, "w"))
    return truth


def check_png(png, layout, label):
    import matplotlib.image as mpimg

    img = mpimg.imread(png)
    h, w = img.shape[0], img.shape[1]
    check((w, h) == (layout["width"], layout["height"]), "%s: PNG is %dx%d, asked %dx%d" % (label, w, h, layout["width"], layout["height"]))
    for r in layout["rows"]:
        top, bottom = int(r["top"]) + 1, int(r["bottom"]) - 1
        left, right = int(r["left"]), int(r["right"]) + 3
        band = img[top:bottom, left:right, :3]
        coloured = ((band.max(axis=2) - band.min(axis=2)) > 0.15).sum()
        check(coloured > 0, "%s: row %s has no coloured pixels" % (label, r["name"]))
    return img


def run_gantt(trace_path, png, extra, workdir):
    lay = os.path.join(workdir, os.path.basename(png) + ".layout.json")
    ivs = os.path.join(workdir, os.path.basename(png) + ".intervals.json")
    cmd = [sys.executable, os.path.join(HERE, "trace_gantt.py"), trace_path, "-o", png, "--layout", lay, "--intervals", ivs] + extra
    subprocess.run(cmd, check=True)
    return json.load(open(lay)), json.load(open(ivs))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--diamond")
    ap.add_argument("--program", nargs="*", default=[])
    ap.add_argument("--device", nargs="*", default=[], help="traces with (simulated) device work")
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)

    if a.diamond:
        trace, tasks = check_trace(a.diamond, exact_edges=True)
        names = sorted(t["name"] for t in tasks)
        check(names == ["A", "B", "C", "D", "E"], "diamond: operations %s" % names)
        out = {t["name"]: t["args"]["outcome"] for t in tasks}
        check(out == {"A": "ok", "B": "ok", "C": "ok", "D": "ok", "E": "failed"}, "diamond: outcomes %s" % out)
        by = {t["name"]: t["args"]["id"] for t in tasks}
        want = {(by["A"], by["B"]), (by["A"], by["C"]), (by["A"], by["D"]), (by["B"], by["D"]), (by["C"], by["D"])}
        got = {(p["op"], t["args"]["id"]) for t in tasks for p in t["args"]["preds"]}
        check(got == want, "diamond: edges %s, want %s" % (sorted(got), sorted(want)))

    gen = os.path.join(a.workdir, "generated.json")
    truth = generated_trace(gen)
    png = os.path.join(a.workdir, "generated.png")
    layout, ivs = run_gantt(gen, png, ["--width", "1000", "--height", "400", "--critical-path"], a.workdir)
    check(os.path.getsize(png) > 0, "generated: no PNG")
    check_png(png, layout, "generated")
    parsed = sorted((iv["tid"], iv["name"], iv["id"], round(iv["start_us"], 3), round(iv["end_us"], 3)) for iv in ivs)
    check(parsed == sorted(truth), "generated: parsed intervals differ from the trace's")
    check([r["tid"] for r in layout["rows"]] == [1, 2, 3, 1000], "generated: rows %s" % [r["tid"] for r in layout["rows"]])
    # The heaviest chain is one worker's whole chain (20 operations).
    crit = layout["critical_path"]
    sums = {w: sum(e - s for (tid, _, _, s, e) in truth if tid == w) for w in (1, 2, 3)}
    heaviest = max(sums, key=sums.get)
    check(crit == [i for (tid, _, i, _, _) in sorted(truth, key=lambda x: x[2]) if tid == heaviest],
          "generated: critical path %s is not worker %d's chain" % (crit, heaviest))

    for k, p in enumerate(a.program):
        trace, tasks = check_trace(p, exact_edges=False)
        check(len(tasks) > 0, "%s: no operations" % p)
        png = os.path.join(a.workdir, "program%d.png" % k)
        layout, ivs = run_gantt(p, png, ["--critical-path"], a.workdir)
        worked = {t["tid"] for t in tasks}
        layout["rows"] = [r for r in layout["rows"] if r["tid"] in worked]
        check_png(png, layout, p)
        check(sorted((iv["id"], iv["start_us"]) for iv in ivs if not iv["device"]) == sorted((t["args"]["id"], float(t["ts"])) for t in tasks),
              "%s: parsed intervals differ from the trace's" % p)

    for k, p in enumerate(a.device):
        trace, tasks = check_trace(p, exact_edges=False)
        by_id = {t["args"]["id"]: t for t in tasks}
        dev = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "device"]
        check(len(dev) > 0, "%s: no device slices" % p)
        names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e.get("ph") == "M" and e.get("name") == "thread_name"}
        for e in dev:
            t = by_id.get(e["args"]["id"])
            check(t is not None, "%s: device slice of an operation not in the trace" % p)
            check(names.get(e["tid"], "").startswith("device %d stream %d" % (e["args"]["device"], e["args"]["stream"])), "%s: device slice on track %s" % (p, names.get(e["tid"])))
            if t:
                ta = t["args"]
                check(ta["start_us"] <= float(e["ts"]) and float(e["ts"]) + float(e["dur"]) <= ta["finish_us"] + 1e-3,
                      "%s: op %d's device work [%s, +%s] is outside its start %s .. finish %s" % (p, ta["id"], e["ts"], e["dur"], ta["start_us"], ta["finish_us"]))
        png = os.path.join(a.workdir, "device%d.png" % k)
        layout, ivs = run_gantt(p, png, [], a.workdir)
        check(any(r["tid"] >= 1000 for r in layout["rows"]), "%s: no device row in the chart" % p)
        layout["rows"] = [r for r in layout["rows"] if r["tid"] in {e["tid"] for e in dev}]
        check_png(png, layout, p)

    if failures:
        print("test_trace_gantt: %d checks FAILED" % len(failures))
        return 1
    print("test_trace_gantt: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
