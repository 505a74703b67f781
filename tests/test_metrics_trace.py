"""The profiler's step summary on hand-worked intervals, the Chrome trace's structure and the
timeline drawing (hcsim/workload/metrics.py, trace.py, hcsim/plot_timeline.py)."""

from __future__ import annotations

import json
import math
import random
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from hcsim.errors import HcsimError
from hcsim.workload import Workload, run
from hcsim.workload.metrics import (
    COLUMNS,
    covered,
    covered_outside,
    merge_intervals,
    summarize,
    totals,
)
from hcsim.workload.trace import chrome_trace, write_chrome_trace


def _ops(rows):
    """An operation table from ``(kind, rank, start_s, end_s)`` rows."""
    return pd.DataFrame(rows, columns=["kind", "rank", "start_s", "end_s"])


# ---- interval unions -------------------------------------------------------------------------

def test_merge_touching_nested_and_empty_intervals():
    s, e = merge_intervals([5, 0, 1, 2, 7, 9], [6, 2, 1.5, 3, 7, 10])
    # [0,2) and [1,1.5) nest, [2,3) touches [0,2); [7,7) is empty
    assert s.tolist() == [0, 5, 9] and e.tolist() == [3, 6, 10]
    assert covered([], []) == 0.0
    assert covered([0, 0, 0], [4, 4, 4]) == 4.0


def test_covered_outside_hand_worked():
    # A = [0,4) u [6,10), B = [1,2) u [3,7) u [9,12): A \ B = [0,1) u [2,3) u [7,9) = 4
    assert covered_outside([0, 6], [4, 10], [1, 3, 9], [2, 7, 12]) == 4.0
    assert covered_outside([0], [4], [], []) == 4.0
    assert covered_outside([], [], [0], [4]) == 0.0
    assert covered_outside([1], [2], [0], [5]) == 0.0  # wholly covered


def test_covered_matches_unit_cells():
    """Integer intervals measured against the count of covered unit cells (independent)."""
    rng = random.Random(7)
    for _ in range(300):
        a = [(x, x + rng.randint(0, 9)) for x in (rng.randint(0, 40) for _ in range(rng.randint(0, 6)))]
        b = [(x, x + rng.randint(0, 9)) for x in (rng.randint(0, 40) for _ in range(rng.randint(0, 6)))]
        cells_a = {c for s, e in a for c in range(s, e)}
        cells_b = {c for s, e in b for c in range(s, e)}
        sa, ea = [s for s, _ in a], [e for _, e in a]
        sb, eb = [s for s, _ in b], [e for _, e in b]
        assert covered(sa, ea) == len(cells_a)
        assert covered_outside(sa, ea, sb, eb) == len(cells_a - cells_b)


# ---- the summary --------------------------------------------------------------------------------

def test_summary_hand_worked():
    # rank 0: compute [0,4) and [2,6) on two streams -> computation [0,6) = 6
    #         collective [5,9), send/recv [8,10) -> communication [5,10) = 5
    #         exposed: [6,10) = 4; busy [0,10) = 10; free 12 - 10 = 2
    #         the wait event [10,11.5) is not work: free
    ops = _ops([("compute", 0, 0.0, 4.0), ("compute", 0, 2.0, 6.0), ("collective", 0, 5.0, 9.0),
                ("sendrecv", 0, 8.0, 10.0), ("waitevent", 0, 10.0, 11.5), ("recordevent", 0, 11.5, 11.5),
                # rank 1: a collective hidden under compute, then a gap
                ("compute", 1, 0.0, 8.0), ("collective", 1, 1.0, 3.0)])
    s = summarize(ops, 12.0)
    assert list(s.columns) == list(COLUMNS)
    assert s.loc[0].tolist() == [12e6, 6e6, 5e6, 4e6, 2e6]
    assert s.loc[1].tolist() == [12e6, 8e6, 2e6, 0.0, 4e6]


def test_summary_clips_skips_unrun_and_reports_idle_ranks():
    ops = _ops([("compute", 0, -1.0, 2.0), ("collective", 0, 3.0, 9.0), ("compute", 2, math.nan, 1.0)])
    s = summarize(ops, 4.0, ranks=[0, 1, 2])
    assert s.loc[0].tolist() == [4e6, 2e6, 1e6, 1e6, 1e6]  # [0,2) compute, [3,4) communication
    assert s.loc[1].tolist() == [4e6, 0.0, 0.0, 0.0, 4e6]  # no operation: all free
    assert s.loc[2].tolist() == [4e6, 0.0, 0.0, 0.0, 4e6]  # its only row never ran
    assert summarize(_ops([]), 1.0).empty


def test_summary_identity_on_random_tables():
    """stepTime = computation + exposed communication + free, on every rank."""
    rng = np.random.default_rng(3)
    n = 400
    start = rng.uniform(0, 1e-3, n)
    ops = _ops({"kind": rng.choice(["compute", "collective", "sendrecv", "waitevent"], n),
                "rank": rng.integers(0, 8, n), "start_s": start,
                "end_s": start + rng.uniform(0, 3e-4, n)})
    s = summarize(ops, 1.3e-3)
    lhs = s["computation_us"] + s["communicationNotOverlapComputation_us"] + s["free_us"]
    assert np.allclose(lhs, s["stepTime_us"], rtol=0, atol=1e-9)
    assert (s["communicationNotOverlapComputation_us"] <= s["communication_us"] + 1e-9).all()


def _summary_rank_by_rank(ops, step, ranks):
    """The summary worked one rank at a time with the single-interval-set helpers (the reference
    the vectorised summary is checked against)."""
    ran = ops[ops["start_s"].notna() & ops["end_s"].notna()]
    rows = []
    for rank in ranks:
        part = ran[ran["rank"] == rank]
        s = np.clip(part["start_s"].to_numpy(dtype=float), 0.0, step)
        e = np.clip(part["end_s"].to_numpy(dtype=float), 0.0, step)
        kind = part["kind"].to_numpy()
        comp = np.isin(kind, ["compute"])
        comm = np.isin(kind, ["collective", "sendrecv"])
        busy = covered(s[comp | comm], e[comp | comm])
        rows.append([step, covered(s[comp], e[comp]), covered(s[comm], e[comm]),
                     covered_outside(s[comm], e[comm], s[comp], e[comp]), max(step - busy, 0.0)])
    return np.array(rows) * 1e6


@pytest.mark.parametrize("seed", range(12))
def test_summary_of_every_rank_at_once_equals_rank_by_rank(seed):
    rng = np.random.default_rng(seed)
    n, p = int(rng.integers(0, 300)), int(rng.integers(1, 40))
    start = rng.choice([rng.uniform(-1e-4, 1.2e-3, n), np.round(rng.uniform(0, 1e-3, n), 4)])  # ties too
    end = start + rng.choice([rng.uniform(-1e-5, 3e-4, n), np.round(rng.uniform(0, 3e-4, n), 4)])
    end[rng.random(n) < 0.05] = np.nan  # never ran
    ops = _ops({"kind": rng.choice(["compute", "collective", "sendrecv", "waitevent"], n),
                "rank": rng.integers(0, p, n), "start_s": start, "end_s": end})
    step = float(rng.uniform(5e-4, 1.5e-3))
    ranks = sorted(set(rng.integers(0, p + 3, int(rng.integers(1, p + 3))).tolist()))
    got = summarize(ops, step, ranks)
    assert got.index.tolist() == ranks
    assert np.allclose(got[list(COLUMNS)].to_numpy(), _summary_rank_by_rank(ops, step, ranks), rtol=1e-12, atol=1e-9)


def test_summary_refuses_bad_input():
    with pytest.raises(HcsimError, match="step_time_s"):
        summarize(_ops([]), -1.0)
    with pytest.raises(HcsimError, match="step_time_s"):
        summarize(_ops([]), math.nan)
    with pytest.raises(HcsimError, match="ops"):
        summarize(pd.DataFrame({"rank": [0]}), 1.0)


def test_totals_rows():
    s = summarize(_ops([("compute", 0, 0.0, 1.0), ("compute", 1, 0.0, 3.0)]), 4.0)
    t = totals(s)
    assert t.index.tolist() == ["mean", "min", "max", "sum"]
    assert t["computation_us"].tolist() == [2e6, 1e6, 3e6, 4e6]
    assert t["free_us"].tolist() == [2e6, 1e6, 3e6, 4e6]
    assert totals(s.iloc[:0]).isna().all().all()  # no rank: NaN rows, not an error


def test_job_result_ranks_is_the_summary():
    w = Workload("overlap")
    world = w.communicator("world", range(4))
    w.compute("bwd", ranks=range(4), duration_s=2e-3)
    w.collective("ar", world, "allreduce", 8 << 20, stream="comm")
    r = run("atlas800t-a2", w)
    s = r.ranks
    ar = r.ops[r.ops["op"] == "ar"]
    comm_us = float((ar["end_s"] - ar["start_s"]).iloc[0]) * 1e6
    assert s["computation_us"].tolist() == pytest.approx([2000.0] * 4)
    assert s["communication_us"].tolist() == pytest.approx([comm_us] * 4)
    exposed = max(comm_us - 2000.0, 0.0)
    assert s["communicationNotOverlapComputation_us"].tolist() == pytest.approx([exposed] * 4, abs=1e-6)


# ---- Chrome trace -------------------------------------------------------------------------------

_META = {"process_name", "process_sort_index", "thread_name", "thread_sort_index"}


def check_chrome_trace(doc, step_time_s: float) -> None:
    """The structure Perfetto / chrome://tracing read: every event's keys and types, durations
    >= 0 and inside the step, every track and process named."""
    assert isinstance(doc, dict) and isinstance(doc["traceEvents"], list)
    named_pids, named_tracks, used = set(), set(), set()
    for e in doc["traceEvents"]:
        assert isinstance(e["name"], str) and e["name"]
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] == "M":
            assert e["name"] in _META
            if e["name"].endswith("_name"):
                assert isinstance(e["args"]["name"], str) and e["args"]["name"]
                (named_pids.add(e["pid"]) if e["name"] == "process_name" else named_tracks.add((e["pid"], e["tid"])))
            else:
                assert isinstance(e["args"]["sort_index"], int)
            continue
        assert e["ph"] == "X"
        assert isinstance(e["cat"], str)
        for k in ("ts", "dur"):
            assert isinstance(e[k], (int, float)) and not isinstance(e[k], bool) and math.isfinite(e[k])
        assert e["ts"] >= 0 and e["dur"] >= 0
        assert e["ts"] + e["dur"] <= step_time_s * 1e6 * (1 + 1e-12) + 1e-9
        assert isinstance(e["args"], dict) and isinstance(e["args"]["rank"], int)
        used.add((e["pid"], e["tid"]))
    assert used, "no operation in the trace"
    assert {p for p, _ in used} <= named_pids
    assert used <= named_tracks


def _overlap_job():
    w = Workload("acl")
    world = w.communicator("world", range(4))
    w.compute("bwd_last", ranks=range(4), duration_s=1e-3)
    w.record("rec", range(4), "grads", stream="compute")
    w.wait("wait", range(4), "grads", stream="comm")
    w.collective("ar", world, "allreduce", 16 << 20, stream="comm")
    w.compute("bwd_first", ranks=range(4), duration_s=5e-4)
    return w


def test_chrome_trace_per_npu(tmp_path):
    r = run("atlas800t-a2", _overlap_job())
    path = write_chrome_trace(r, tmp_path / "t.json")
    doc = json.loads(path.read_text())
    check_chrome_trace(doc, r.step_time_s)
    names = {(e["pid"], e["args"]["name"]) for e in doc["traceEvents"] if e["name"] == "process_name"}
    assert names == {(i, f"npu {i}") for i in range(4)}
    threads = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    assert threads == {"compute", "comm"}
    xs = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(xs) == len(r.ops)
    ar = next(e for e in xs if e["name"] == "ar" and e["pid"] == 0)
    row = r.ops[(r.ops["op"] == "ar") & (r.ops["rank"] == 0)].iloc[0]
    assert ar["ts"] == pytest.approx(row.start_s * 1e6) and ar["dur"] == pytest.approx((row.end_s - row.start_s) * 1e6)
    assert ar["args"]["collective"] == "allreduce" and ar["args"]["size_bytes"] == 16 << 20


def test_chrome_trace_per_server():
    from hcsim.topology import load_topology

    topo = load_topology("atlas900-a2-pod", servers=2)
    w = Workload("two servers")
    comm = w.communicator("pair", [0, 8])
    w.compute("fwd", ranks=[0, 1, 8], duration_s=1e-4)
    w.collective("ar", comm, "allreduce", 1 << 20)
    r = run(topo, w)
    doc = chrome_trace(r, "server", topo)
    check_chrome_trace(doc, r.step_time_s)
    procs = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    assert procs == {0: "server 0", 1: "server 1"}
    threads = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    assert threads == {"npu 0 compute", "npu 0 comm", "npu 1 compute", "npu 8 compute", "npu 8 comm"}
    with pytest.raises(HcsimError, match="topology"):
        chrome_trace(r, "server")
    with pytest.raises(HcsimError, match="group"):
        chrome_trace(r, "rack")


def test_chrome_trace_drops_nan_cells_and_unrun_rows(tmp_path):
    ops = pd.DataFrame({"op": ["a", "b"], "kind": ["compute", "collective"], "rank": [0, 0],
                        "stream": ["compute", "comm"], "start_s": [0.0, math.nan], "end_s": [1e-6, math.nan],
                        "size_bytes": [math.nan, 8.0], "algorithm": ["", "ring"]})
    res = SimpleNamespace(ops=ops, step_time_s=1e-6)
    doc = json.loads(write_chrome_trace(res, tmp_path / "x.json").read_text())
    check_chrome_trace(doc, 1e-6)
    (x,) = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert x["args"] == {"rank": 0, "kind": "compute"}
    with pytest.raises(HcsimError, match="path"):
        write_chrome_trace(res, tmp_path / "missing" / "x.json")


# ---- timeline -----------------------------------------------------------------------------------

def test_plot_timeline(tmp_path):
    from hcsim.plot_timeline import plot_timeline

    r = run("atlas800t-a2", _overlap_job())
    path = plot_timeline(r, tmp_path / "timeline.png")
    assert path.stat().st_size > 1000
    fig = plot_timeline(r, ranks=[0, 2])
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == ["npu 0 compute", "npu 0 comm", "npu 2 compute", "npu 2 comm"]
    with pytest.raises(HcsimError, match="ranks"):
        plot_timeline(r, ranks=[7])
    with pytest.raises(HcsimError, match="ranks"):
        plot_timeline(r, ranks="x")
    with pytest.raises(HcsimError, match=r"^ranks = 2.5: a list of rank numbers|^ranks = \[0, 2.5\]"):
        plot_timeline(r, ranks=[0, 2.5])
    # a huge range stops at its first rank the job lacks: nothing is built from it
    with pytest.raises(HcsimError, match=r"^ranks = 4: a rank of the job \(0 to 3 with operations\)$"):
        plot_timeline(r, ranks=range(10**12))


@pytest.mark.parametrize("path, match", [
    ("timeline.json", r"^path = '.*timeline.json': a picture file ending .png, .pdf or .svg"),
    (5, r"^path = 5: a file path"),
])
def test_plot_timeline_refuses_a_path_it_cannot_write_in_one_line(tmp_path, path, match):
    from hcsim.plot_timeline import plot_timeline

    r = run("atlas800t-a2", _overlap_job())
    with pytest.raises(HcsimError, match=match):
        plot_timeline(r, tmp_path / path if isinstance(path, str) else path)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(HcsimError, match=r"^path = '.*file/t.png': cannot be written"):
        plot_timeline(r, blocker / "t.png")
