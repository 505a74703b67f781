"""hcsim.plot_plan: the planner's pictures draw exactly the data they are given.

Frames are made by hand in the schemas of hcsim.plan and hcsim.whatif; the expected values
(the Pareto front, which rows are valid, the max of a link's two directions) are computed
here independently and compared with what the figure holds.
"""

import math

import numpy as np
import pandas as pd
import pytest

from hcsim.errors import HcsimError
from hcsim.plot_plan import (
    BASELINE_COLOR,
    plot_breakdown,
    plot_link_utilization,
    plot_pareto,
    plot_scaling,
    plot_whatif,
)
from hcsim.topology import leaf_spine, ring
from hcsim.workload import Workload, run

pytest.importorskip("matplotlib")


@pytest.fixture(autouse=True)
def _close_figures():
    """Figures returned without a path stay open: close them after each test."""
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


def brute_front(cost, time):
    """Indices of the points no other point beats on both cost and time (brute force)."""
    keep = []
    for i, (c, t) in enumerate(zip(cost, time, strict=True)):
        if not (math.isfinite(c) and math.isfinite(t)):
            continue
        beaten = any(c2 <= c and t2 <= t and (c2 < c or t2 < t)
                     for j, (c2, t2) in enumerate(zip(cost, time, strict=True))
                     if j != i and math.isfinite(c2) and math.isfinite(t2))
        if not beaten:
            keep.append(i)
    return keep


def plan_frame(priced=False, tokens=True):
    """A plan over servers x oversubscription (8 points), the largest oversubscribed one invalid."""
    rows = []
    for i, (servers, ov) in enumerate([(s, o) for s in (1, 2, 4, 8) for o in (1, 2)]):
        npus = 8 * servers
        compute = 100.0 / servers
        exposed = 4.0 + 2.5 * math.log2(npus) * ov
        free = 0.5 + 0.25 * ov
        step = compute + exposed + free
        rows.append({"point": i, "oversubscription": ov, "servers": servers, "npus": npus, "status": "ok",
                     "reason": "", "step_time_ms": step, "samples_per_step": 64, "samples_per_s": 64e3 / step,
                     "tokens_per_s": 64e3 * 4096 / step if tokens else np.nan, "scaling_efficiency": np.nan,
                     "compute_ms": compute, "communication_ms": 1.5 * exposed, "exposed_comm_ms": exposed,
                     "free_ms": free, "npu_hours_per_step": npus * step / 3.6e6,
                     "cost_per_step": npus * step / 3.6e6 * (2.0 / ov) if priced else np.nan,
                     "meets_target": step < 45.0, "pareto": False})
    df = pd.DataFrame(rows)
    bad = df.index[-1]
    metrics = ["step_time_ms", "samples_per_s", "tokens_per_s", "compute_ms", "communication_ms",
               "exposed_comm_ms", "free_ms", "npu_hours_per_step", "cost_per_step"]
    df.loc[bad, metrics] = np.nan
    df.loc[bad, ["status", "reason", "meets_target"]] = ["invalid", "does not fit in HBM", False]
    first = df[df["servers"] == 1].set_index("oversubscription")["samples_per_s"] / 8
    df["scaling_efficiency"] = df["samples_per_s"] / df["npus"] / df["oversubscription"].map(first)
    cost = df["cost_per_step" if priced else "npu_hours_per_step"].to_numpy(dtype=float)
    front = brute_front(cost, df["step_time_ms"].to_numpy(dtype=float))
    df["pareto"] = df.index.isin(front)
    df.attrs["answer"] = {"question": "smallest cluster with step time under 45 ms", "point": 4,
                          "text": "4 servers (32 NPUs), oversubscription 1"}
    return df


def test_plots_of_a_real_plan_frame(tmp_path):
    """hcsim.plan's own frame (2 ms of compute, then a 64 MiB allreduce over the whole pod):
    the front drawn is the brute-force front of its rows, the bars add up, and scaling draws
    without a throughput (written-out operations carry no sample count)."""
    from hcsim.plan import plan

    doc = {"topology": "atlas900-a2-pod", "servers": 1,
           "workload": {"communicators": {"all": "all"}, "ops": [
               {"kind": "compute", "name": "fwd", "ranks": "all", "duration_us": 2000},
               {"kind": "collective", "name": "ar", "comm": "all", "collective": "allreduce", "size": "64M",
                "after": ["fwd"]}]}}
    df = plan(doc, {"servers": [1, 2, 4], "roce_bandwidth_GBps": [5, 20]}, target_step_ms=4,
              price_per_npu_hour=2.0, progress=False)
    cost, time = df["cost_per_step"].to_numpy(dtype=float), df["step_time_ms"].to_numpy(dtype=float)
    front = sorted(brute_front(cost, time), key=lambda i: (cost[i], time[i]))
    line = [ln for ln in plot_pareto(df).axes[0].get_lines() if ln.get_gid() == "pareto-front"][0]
    np.testing.assert_array_equal(line.get_xdata(), cost[front])
    np.testing.assert_array_equal(line.get_ydata(), time[front])
    bars = plot_breakdown(df).axes[0].containers
    np.testing.assert_allclose(np.sum([[p.get_height() for p in b] for b in bars], axis=0), time, rtol=1e-9)
    fig = plot_scaling(df)
    steps = {ln.get_label(): ln for ln in fig.axes[0].get_lines()}
    assert set(steps) == {"roce_bandwidth_GBps=5", "roce_bandwidth_GBps=20"}
    assert "no throughput" in fig.axes[1].texts[0].get_text()
    assert plot_scaling(df, tmp_path / "s.png").stat().st_size > 1000


def whatif_frame():
    rows = [("baseline", "ok", "", 1000.0), ("fail-link=leaf0,spine0", "ok", "", 1500.0),
            ("straggler=3:2", "ok", "", 900.0),
            ("fail-node=leaf0", "error", "fail-node=leaf0 leaves npu0 and npu4 with no path between them: no "
             "other route around this cut", np.nan)]
    df = pd.DataFrame(rows, columns=["case", "status", "reason", "time_us"])
    df.insert(1, "perturbation", ["", "link leaf0 <-> spine0 failed", "rank 3: 2 x slower compute", "node leaf0"])
    df["baseline_us"] = 1000.0
    df["delta_us"] = df["time_us"] - 1000.0
    df["delta_pct"] = df["delta_us"] / 10.0
    return df


@pytest.mark.parametrize("draw", [plot_breakdown, plot_scaling, plot_pareto])
@pytest.mark.parametrize("suffix", ["png", "svg", "pdf"])
def test_plan_plots_write_files(tmp_path, draw, suffix):
    out = draw(plan_frame(), tmp_path / "sub" / f"plot.{suffix}")
    assert out == tmp_path / "sub" / f"plot.{suffix}"
    assert out.stat().st_size > 1000
    if suffix == "png":
        from PIL import Image

        with Image.open(out) as im:
            assert im.mode == "P" and im.size[0] > 400  # a palette picture, full size


def test_breakdown_bars_add_up_to_the_step_time_and_skip_invalid_points():
    df = plan_frame()
    fig = plot_breakdown(df)
    ax = fig.axes[0]
    bars = [c for c in ax.containers]
    assert [b.get_label() for b in bars] == ["compute", "exposed communication", "idle (waits, bubbles)"]
    valid = df[df["status"] == "ok"]
    assert all(len(b) == len(valid) for b in bars)  # the invalid point has no bar
    tops = np.sum([[p.get_height() for p in b] for b in bars], axis=0)
    np.testing.assert_allclose(tops, valid["step_time_ms"], rtol=1e-12)
    # each part sits on the one below it
    for lower, upper in zip(bars, bars[1:], strict=False):
        for p, q in zip(lower, upper, strict=True):
            assert q.get_y() == pytest.approx(p.get_y() + p.get_height())
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks[0] == "8, oversubscription=1" and ticks[-1] == "64, oversubscription=1"  # too long to stack
    assert all(t.get_rotation() == 90 for t in ax.get_xticklabels())
    # labelled by another column when asked
    fig = plot_breakdown(df, x="servers")
    assert [t.get_text().split(",")[0] for t in fig.axes[0].get_xticklabels()] == ["1", "1", "2", "2", "4", "4", "8"]
    short = df.rename(columns={"oversubscription": "os"})
    ticks = [t.get_text() for t in plot_breakdown(short).axes[0].get_xticklabels()]
    assert ticks[0] == "8\nos=1" and ticks[1] == "8\nos=2"  # short lines stacked, upright


def test_scaling_curves_one_per_other_axis_and_ideal_lines():
    df = plan_frame()
    fig = plot_scaling(df)
    step_ax, tput_ax, eff_ax = fig.axes[:3]
    curves = {ln.get_label(): ln for ln in step_ax.get_lines()}
    assert set(curves) == {"oversubscription=1", "oversubscription=2"}
    ok1 = df[(df["status"] == "ok") & (df["oversubscription"] == 1)]
    np.testing.assert_array_equal(curves["oversubscription=1"].get_xdata(), ok1["npus"])
    np.testing.assert_allclose(curves["oversubscription=1"].get_ydata(), ok1["step_time_ms"])
    assert len(curves["oversubscription=2"].get_xdata()) == 3  # 64 NPUs at 2 is invalid
    assert tput_ax.get_ylabel() == "tokens / s"
    ideal = [ln for ln in tput_ax.get_lines() if ln.get_gid() == "ideal"]
    assert len(ideal) == 1  # one ideal line, from the fastest 8-NPU point
    best8 = df.loc[(df["npus"] == 8), "tokens_per_s"].max()
    np.testing.assert_allclose(ideal[0].get_xdata(), [8, 64])
    np.testing.assert_allclose(ideal[0].get_ydata(), [best8, best8 * 8])
    assert any(list(ln.get_ydata()) == [1.0, 1.0] for ln in eff_ax.get_lines())  # ideal efficiency
    # without token counts the throughput is samples per second
    fig = plot_scaling(plan_frame(tokens=False), x="servers")
    assert fig.axes[1].get_ylabel() == "samples / s" and fig.axes[0].get_xlabel() == "servers"


def test_scaling_against_a_category_puts_each_value_at_one_place():
    """x not numeric (a policy axis, here 'b' before 'a' at one size and after it at another):
    one tick per category, and every curve's point for a category sits on that tick."""
    df = plan_frame().iloc[:6].drop(columns=["oversubscription"])
    df["servers"], df["npus"] = [1, 1, 2, 2, 4, 4], [8, 8, 16, 16, 32, 32]
    df.insert(2, "policy", ["b", "a", "a", "b", "b", "a"])
    df.attrs["axes"] = ["servers", "policy"]
    ax = plot_scaling(df, x="policy").axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["b", "a"]
    assert list(ax.get_xticks()) == [0, 1]
    for ln in ax.get_lines():
        servers = int(ln.get_label().split(",")[0].removeprefix("servers="))
        part = df[df["servers"] == servers]
        want = {"b": 0.0, "a": 1.0}
        assert sorted(zip(ln.get_xdata(), ln.get_ydata(), strict=True)) == sorted(
            (want[p], t) for p, t in zip(part["policy"], part["step_time_ms"], strict=True))


@pytest.mark.parametrize("priced", [False, True])
def test_pareto_line_is_exactly_the_brute_force_front(priced):
    df = plan_frame(priced=priced)
    cost_col = "cost_per_step" if priced else "npu_hours_per_step"
    fig = plot_pareto(df)
    ax = fig.axes[0]
    line = [ln for ln in ax.get_lines() if ln.get_gid() == "pareto-front"][0]
    cost = df[cost_col].to_numpy(dtype=float)
    time = df["step_time_ms"].to_numpy(dtype=float)
    front = sorted(brute_front(cost, time), key=lambda i: cost[i])
    np.testing.assert_array_equal(line.get_xdata(), cost[front])
    np.testing.assert_array_equal(line.get_ydata(), time[front])
    assert ax.get_xlabel() == ("cost per step" if priced else "NPU hours per step")
    everything = [c for c in ax.collections if c.get_label() == "plan point"][0].get_offsets()
    assert len(everything) == 7  # every valid point, not the invalid one
    meets = [c for c in ax.collections if c.get_gid() == "meets-target"][0].get_offsets()
    want = df[(df["status"] == "ok") & df["meets_target"]]
    np.testing.assert_array_equal(np.asarray(meets)[:, 1], want["step_time_ms"])
    answer = [t for t in ax.texts if t.get_gid() == "answer"][0]
    assert answer.get_text() == "answer: 32 NPUs, oversubscription=1"
    assert answer.xy == (cost[4], time[4])


def test_pareto_without_an_answer_or_target():
    df = plan_frame()
    df["meets_target"] = np.nan  # no target was set
    df.attrs["answer"] = {"question": "fastest", "point": None, "text": "no target given"}
    ax = plot_pareto(df).axes[0]
    assert not [t for t in ax.texts if t.get_gid() == "answer"]
    assert not [c for c in ax.collections if c.get_gid() == "meets-target"]


def test_whatif_bars_baseline_first_and_failed_cases_hatched(tmp_path):
    df = whatif_frame()
    assert plot_whatif(df, tmp_path / "w.png").stat().st_size > 1000
    shuffled = df.iloc[[2, 0, 3, 1]]  # the baseline is drawn first wherever it stands
    ax = plot_whatif(shuffled).axes[0]
    bars = {p.get_gid(): p for p in ax.patches if (p.get_gid() or "").startswith("case:")}
    assert [t.get_text() for t in ax.get_yticklabels()] == ["baseline", "straggler=3:2", "fail-node=leaf0",
                                                            "fail-link=leaf0,spine0"]
    base = bars["case:baseline"]
    assert base.get_y() < bars["case:straggler=3:2"].get_y()  # first row (the axis is inverted)
    import matplotlib.colors as mcolors

    assert mcolors.to_hex(base.get_facecolor()) == BASELINE_COLOR
    assert bars["case:fail-link=leaf0,spine0"].get_width() == 1500.0
    assert bars["case:straggler=3:2"].get_width() == 900.0
    failed = bars["case:fail-node=leaf0"]
    assert failed.get_hatch() == "//" and failed.get_facecolor()[3] == 0.0  # empty
    texts = [t.get_text() for t in ax.texts]
    assert "1500 us  +50.0%" in texts and "900 us  -10.0%" in texts
    note = [t for t in texts if t.startswith("error: ")][0]
    assert note.endswith("...") and len(note) <= len("error: ") + 60


def link_job(topo, members, op="alltoall", size=16 << 20):
    w = Workload("job")
    w.collective(op, w.communicator("all", members), op, size, algorithm="pairwise" if op == "alltoall" else "auto")
    return run(topo, w)


def test_link_heatmap_colours_each_link_by_its_busier_direction(tmp_path):
    topo = leaf_spine(2, 2, 2, 100e9, oversubscription=2.0)
    r = link_job(topo, list(range(4)))
    out = plot_link_utilization(topo, r, tmp_path / "links.png", top=2)
    assert out.stat().st_size > 1000
    links = r.links.copy()
    # make the two directions of one link differ: the drawing must show the larger
    up = (links["src"] == "leaf0") & (links["dst"] == "spine0")
    down = (links["src"] == "spine0") & (links["dst"] == "leaf0")
    links.loc[up, "utilization"] = 0.93
    links.loc[down, "utilization"] = 0.31
    ax = plot_link_utilization(topo, links, top=1).axes[0]
    assert [t.get_text() for t in ax.texts if t.get_text().endswith("%")] == ["93%"]
    ax = plot_link_utilization(topo, links, top=100).axes[0]
    undirected = {}
    for s, d, u in zip(links["src"], links["dst"], links["utilization"], strict=True):
        k = tuple(sorted((s, d)))
        undirected[k] = max(undirected.get(k, 0.0), u)
    want = sorted(f"{100 * u:.0f}%" for u in undirected.values() if u > 0)
    assert sorted(t.get_text() for t in ax.texts if t.get_text().endswith("%")) == want
    # 8 nodes: every one named; 4 rows of nodes (NPUs, leaves, spines)
    names = {t.get_text() for t in ax.texts}
    assert {"npu0", "leaf1", "spine1"} <= names and "NPUs (4)" in names and "spines (2)" in names


def test_link_heatmap_shows_links_the_table_lacks_as_failed():
    topo = leaf_spine(2, 2, 2, 100e9)
    links = link_job(topo, list(range(4))).links
    gone = links[~(((links["src"] == "leaf0") & (links["dst"] == "spine0"))
                   | ((links["src"] == "spine0") & (links["dst"] == "leaf0")))]
    ax = plot_link_utilization(topo, gone).axes[0]
    drawn = {c.get_gid(): c for c in ax.collections if c.get_gid() in ("busy", "idle", "down")}
    assert len(drawn["down"].get_segments()) == 1
    total = sum(len(c.get_segments()) for c in drawn.values())
    assert total == topo.graph.to_undirected().number_of_edges()


def test_link_heatmap_stays_readable_on_a_pod_and_draws_generic_graphs(tmp_path):
    import hcsim

    pod = hcsim.load_topology("atlas900-a2-pod", servers=32)  # 556 nodes
    r = link_job(pod, list(range(0, pod.num_npus, 8)), size=4 << 20)
    fig = plot_link_utilization(pod, r)
    ax = fig.axes[0]
    assert not [t for t in ax.texts if t.get_text().startswith("npu")]  # too many to name
    assert {"NPUs (256)", "NICs (256)", "leaves (8)", "spines (4)"} <= {t.get_text() for t in ax.texts}
    out = plot_link_utilization(pod, r, tmp_path / "pod.png", top=3)
    assert out.stat().st_size > 1000
    t = ring(6, 10e9)
    out = plot_link_utilization(t, link_job(t, list(range(6)), op="allreduce"), tmp_path / "ring.svg")
    assert out.stat().st_size > 1000


@pytest.mark.parametrize("draw,needs", [(plot_breakdown, "compute_ms"), (plot_scaling, "scaling_efficiency"),
                                        (plot_pareto, "pareto")])
def test_plan_plots_refuse_bad_frames_in_one_line(draw, needs):
    df = plan_frame()
    with pytest.raises(HcsimError, match=f"df: missing column {needs} ") as err:
        draw(df.drop(columns=[needs]))
    assert "\n" not in str(err.value)
    with pytest.raises(HcsimError, match="missing columns status, step_time_ms"):
        draw(df.drop(columns=["step_time_ms", "status"]))
    with pytest.raises(HcsimError, match="df: no rows"):
        draw(df.iloc[:0])
    everything_invalid = df.assign(status="invalid")
    with pytest.raises(HcsimError, match="no valid point"):
        draw(everything_invalid)
    with pytest.raises(HcsimError, match="df = "):
        draw([1, 2, 3])


def test_bad_x_and_bad_whatif_or_link_input_in_one_line():
    with pytest.raises(HcsimError, match="x = 'gpus': a column of the frame"):
        plot_breakdown(plan_frame(), x="gpus")
    with pytest.raises(HcsimError, match="df: missing column time_us"):
        plot_whatif(whatif_frame().drop(columns=["time_us"]))
    with pytest.raises(HcsimError, match="no case ran"):
        plot_whatif(whatif_frame().assign(status="error"))
    topo = leaf_spine(2, 2, 2, 100e9)
    links = link_job(topo, list(range(4))).links
    with pytest.raises(HcsimError, match="links: missing column utilization"):
        plot_link_utilization(topo, links.drop(columns=["utilization"]))
    with pytest.raises(HcsimError, match="npu0->spine0"):
        plot_link_utilization(topo, pd.DataFrame({"src": ["npu0"], "dst": ["spine0"], "utilization": [0.5]}))
    with pytest.raises(HcsimError, match="top = -1"):
        plot_link_utilization(topo, links, top=-1)
    with pytest.raises(HcsimError, match="links = "):
        plot_link_utilization(topo, "links.csv")


def test_link_heatmap_refuses_a_topology_too_large_to_draw(monkeypatch):
    from hcsim import plot

    topo = leaf_spine(2, 2, 2, 100e9)
    r = link_job(topo, list(range(4)))
    monkeypatch.setattr(plot, "MAX_DRAW_LINKS", topo.graph.number_of_edges() - 1)
    with pytest.raises(HcsimError, match=r"^plot_link_utilization: topology .* links, more than the "):
        plot_link_utilization(topo, r)
