"""Traces, pending-work dumps and counters of the default runtime."""
import json
import re

import numpy as np
import pytest

import tensorasync as ta

EPS = 0.002  # the trace writes microseconds with three decimals


def _tasks(trace):
    return [e for e in trace["traceEvents"] if e.get("cat") == "task" and e["ph"] == "X"]


def test_trace_records_each_operation_once_with_its_intervals_and_edges(tmp_path):
    path = tmp_path / "run.json"
    x = ta.zeros(3)
    y = ta.zeros(3)
    ta.wait_all()
    with ta.trace(path):
        # The write mapping holds the chain back until all of it is submitted, so that
        # every operation waits for the one before it.
        with x.write() as held:
            held[:] = 0
            ta.submit(lambda a: a.__setitem__(slice(None), 1.0), (x, "write"), name="obs_first")
            ta.submit(lambda a: a.__imul__(3.0), (x, "update"), name="obs_second")
            ta.submit(lambda a, b: b.__setitem__(slice(None), a + 1), (x, "read"), (y, "write"),
                      name="obs_third")
            y.scale(2)
        ta.wait_all()
    np.testing.assert_array_equal(np.asarray(y), [8.0, 8.0, 8.0])
    trace = json.loads(path.read_text())
    tasks = _tasks(trace)
    names = [e["name"] for e in tasks]
    assert sorted(names) == sorted(["ta_tensor_acquire", "obs_first", "obs_second", "obs_third", "scale"])
    assert trace["otherData"]["dropped"] == 0
    by = {e["name"]: e for e in tasks}
    for e in tasks:
        a = e["args"]
        assert a["outcome"] == "ok" and a["status"] == "TA_STATUS_OK"
        assert a["submit_us"] <= a["ready_us"] + EPS
        assert a["ready_us"] <= a["start_us"] + EPS
        assert abs(a["start_us"] - e["ts"]) < EPS
        assert e["ts"] + e["dur"] <= a["end_us"] + EPS
        assert a["start_us"] <= a["finish_us"] + EPS <= a["end_us"] + 2 * EPS
    # The edges are the program's dependencies, and each successor started after its
    # predecessor released its accesses.
    ids = {n: by[n]["args"]["id"] for n in by}
    preds = {n: {p["op"] for p in by[n]["args"]["preds"]} for n in by}
    assert preds["ta_tensor_acquire"] == set()
    assert preds["obs_first"] == {ids["ta_tensor_acquire"]}
    assert ids["obs_first"] in preds["obs_second"]
    assert ids["obs_second"] in preds["obs_third"]
    assert ids["obs_third"] in preds["scale"]
    for succ, pred in (("obs_first", "ta_tensor_acquire"), ("obs_second", "obs_first"), ("obs_third", "obs_second"), ("scale", "obs_third")):
        assert by[pred]["args"]["finish_us"] <= by[succ]["args"]["start_us"] + EPS
    modes = {n: sorted(acc["mode"] for acc in by[n]["args"]["accesses"]) for n in by}
    assert modes["obs_first"] == ["write"] and modes["obs_third"] == ["read", "write"]
    assert modes["ta_tensor_acquire"] == ["write"] and modes["scale"] == ["update"]


def test_trace_stop_without_a_recording_and_discarding(tmp_path):
    ta.trace_start(capacity=16)
    ta.trace_stop(None)
    with pytest.raises(ta.InvalidArgumentError) as ei:
        ta.trace_stop(tmp_path / "none.json")
    assert ei.value.status == "TA_STATUS_INVALID_ARGUMENT" and ei.value.message
    assert not (tmp_path / "none.json").exists()
    ta.trace_start()
    with pytest.raises(ta.InternalError) as ei:
        ta.trace_stop(tmp_path / "no-such-dir" / "t.json")
    assert ei.value.status == "TA_STATUS_INTERNAL" and ei.value.message


def test_trace_capacity_drops_the_oldest(tmp_path):
    path = tmp_path / "small.json"
    x = ta.zeros(2)
    ta.wait_all()
    with ta.trace(path, capacity=2):
        for _ in range(5):
            x.scale(2)
        ta.wait_all()
    trace = json.loads(path.read_text())
    assert [e["name"] for e in _tasks(trace)] == ["scale", "scale"]
    assert trace["otherData"]["capacity"] == 2 and trace["otherData"]["dropped"] == 3


def test_stats_count_submissions_completions_and_failures():
    x = ta.zeros(8)
    ta.wait_all()
    before = ta.stats()
    assert before.threads >= 1
    n = 7
    for i in range(n):
        x.fill(float(i))
    ta.wait_all()
    after = ta.stats()
    assert after.tasks_submitted - before.tasks_submitted == n
    assert after.tasks_completed - before.tasks_completed == n
    assert after.tasks_failed == before.tasks_failed
    assert after.tasks_cancelled == before.tasks_cancelled
    assert after.pending == 0 and after.queue_depth == 0
    assert after.busy_ns >= before.busy_ns and after.steals >= before.steals
    assert after.threads == before.threads
    # A failing kernel, and a later reader of the tensor it poisoned: both failed.
    ta.submit(lambda a: 1 / 0, (x, "update"), name="obs_fails")
    x.scale(2)
    ta.wait_all()
    failed = ta.stats()
    assert failed.tasks_submitted - after.tasks_submitted == 2
    assert failed.tasks_completed - after.tasks_completed == 2
    assert failed.tasks_failed - after.tasks_failed == 2
    assert failed.tasks_cancelled == after.tasks_cancelled
    with pytest.raises(ta.KernelError):
        x.wait()


def test_small_operations_run_in_place_unless_turned_off():
    assert ta.small_in_place() is True
    x = ta.zeros(4)
    ta.wait_all()
    s0 = ta.stats()
    ev = x.fill(2.0)
    s1 = ta.stats()  # no wait: it completed before fill returned, on this thread
    assert ev.done()
    assert (s1.tasks_completed - s0.tasks_completed, s1.steals - s0.steals) == (1, 0)
    try:
        assert ta.small_in_place(False) is False
        x.fill(3.0)
        ta.wait_all()
        s2 = ta.stats()
        assert (s2.tasks_completed - s1.tasks_completed, s2.steals - s1.steals) == (1, 1)
    finally:
        assert ta.small_in_place(True) is True
    np.testing.assert_array_equal(np.asarray(x), [3.0] * 4)


def test_stats_pending_and_peak_behind_a_held_mapping():
    t = ta.zeros(4)
    ta.wait_all()
    base = ta.stats()
    with t.write() as a:
        a[:] = 1
        for v in (2.0, 3.0, 4.0):
            t.fill(v)
        held = ta.stats()
        # The mapping and the three fills waiting behind it.
        assert held.pending - base.pending == 4
        assert held.tasks_submitted - base.tasks_submitted == 4
        assert held.tasks_completed == base.tasks_completed
        assert held.peak_pending >= held.pending
    ta.wait_all()
    done = ta.stats()
    assert done.tasks_completed - base.tasks_completed == 4 and done.pending == 0
    np.testing.assert_array_equal(np.asarray(t), [4.0] * 4)


def test_dump_names_an_operation_blocked_behind_a_write_mapping():
    t = ta.zeros(4)
    ta.wait_all()
    ta.track(True)
    try:
        with t.write() as a:
            a[:] = 1
            ev = t.fill(2.0)
            text = ta.dump()
            dot = ta.dump("dot")
            assert not ev.done()
        ev.wait()
    finally:
        ta.track(False)
    m = re.search(r'^op #(\d+) "fill": WAITING', text, re.M)
    assert m, text
    fill_id = int(m.group(1))
    acq = re.search(r'^op #(\d+) "ta_tensor_acquire": RUNNING', text, re.M)
    assert acq, text
    acq_id = int(acq.group(1))
    block = text[m.start():].split("\nop #")[0]
    assert re.search(rf'waits for op #{acq_id} "ta_tensor_acquire" \(running\) on tensor t\d+ \(f64\)', block), text
    assert "write" in block
    assert text.count('"fill"') == 2  # its own line and the mapping's "waited for by"
    assert dot.startswith("digraph")
    assert f"op{acq_id} -> op{fill_id}" in dot and dot.rstrip().endswith("}")
    after = ta.dump()
    assert '"fill"' not in after and f"op #{fill_id}" not in after
    np.testing.assert_array_equal(np.asarray(t), [2.0] * 4)


def test_dump_grows_its_buffer_and_rejects_unknown_formats():
    src = ta.zeros(1)
    dsts = [ta.zeros(1) for _ in range(60)]
    ta.wait_all()
    ta.track(True)
    try:
        with src.write() as a:
            a[:] = 5
            for d in dsts:
                ta.copyto(d, src)
            text = ta.dump()
        ta.wait_all()
    finally:
        ta.track(False)
    assert len(text.encode()) > 4096  # larger than the first buffer
    assert text.endswith("\n")
    copies = re.findall(r'^op #\d+ "copy": WAITING', text, re.M)
    assert len(copies) == len(dsts), text
    for d in dsts:
        np.testing.assert_array_equal(np.asarray(d), [5.0])
    with pytest.raises(ValueError):
        ta.dump("svg")
