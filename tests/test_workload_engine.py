"""Jobs on one network: hand-worked timelines for the workload runner (docs/architecture.md, Jobs)."""

import numpy as np
import pytest

import hcsim
from hcsim.topology import Topology
from hcsim.topology.builders import full_mesh, leaf_spine, ring, single_switch
from hcsim.topology.spec import LinkSpec, NpuSpec
from hcsim.workload import Communicator, Workload, run


def dumbbell(trunk_Bps=10e9, edge_Bps=100e9):
    """npu0, npu1 on switch s0; npu2, npu3 on s1; one trunk s0 <-> s1."""
    t = Topology("dumbbell")
    for i in range(4):
        t.add_npu(f"npu{i}", NpuSpec(server=i // 2, local_index=i % 2))
    t.add_node("s0")
    t.add_node("s1")
    for i in range(4):
        t.add_link(f"npu{i}", f"s{i // 2}", LinkSpec(edge_Bps))
    t.add_link("s0", "s1", LinkSpec(trunk_Bps))
    return t


def test_two_allreduces_on_disjoint_groups_share_one_link_half_each():
    n = 10**8
    alone = Workload("alone")
    alone.collective("a", alone.communicator("a", [0, 2]), "allreduce", n, algorithm="ring")
    both = Workload("both")
    both.collective("a", both.communicator("a", [0, 2]), "allreduce", n, algorithm="ring")
    both.collective("b", both.communicator("b", [1, 3]), "allreduce", n, algorithm="ring", stream="comm")
    t = dumbbell()
    # ring allreduce on 2 ranks: two steps of n/2 each way over the trunk (edges are 10x faster)
    one = run(t, alone)
    assert one.step_time_s == pytest.approx(2 * (n / 2) / 10e9, rel=1e-12)
    two = run(t, both)
    times = two.op_times().set_index("op")["duration_s"]
    assert times["a"] == pytest.approx(2 * one.step_time_s, rel=1e-12)
    assert times["b"] == pytest.approx(2 * one.step_time_s, rel=1e-12)
    trunk = two.links[(two.links["src"] == "s0") & (two.links["dst"] == "s1")]
    assert float(trunk["bytes"].iloc[0]) == pytest.approx(2 * n / 2 * 2)  # 2 ops x 2 steps x n/2
    assert float(trunk["utilization"].iloc[0]) == pytest.approx(1.0)


def test_disjoint_groups_on_disjoint_links_do_not_slow_each_other():
    t = ring(4, 1e9)
    w = Workload("disjoint")
    w.collective("a", w.communicator("a", [0, 1]), "allreduce", 2000, algorithm="ring")
    w.collective("b", w.communicator("b", [2, 3]), "allreduce", 2000, algorithm="ring")
    r = run(t, w)
    alone = hcsim.simulate(t, "allreduce", 2000, "ring", ranks=[0, 1])
    assert r.step_time_s == pytest.approx(alone.time_s, rel=1e-12)


@pytest.mark.parametrize("compute_ms", [5.0, 0.5])
def test_collective_hidden_behind_compute_adds_nothing_and_a_longer_one_adds_the_difference(compute_ms):
    t = full_mesh(4, 10e9, 1e-6)
    coll = hcsim.simulate(t, "allreduce", 8 << 20, "ring").time_s  # about 1.26 ms
    w = Workload("overlap")
    world = w.communicator("world", range(4))
    w.compute("bwd", range(4), compute_ms * 1e-3)
    w.collective("grads", world, "allreduce", 8 << 20, algorithm="ring", stream="comm")
    r = run(t, w)
    assert r.step_time_s == pytest.approx(max(compute_ms * 1e-3, coll), rel=1e-12)
    if compute_ms * 1e-3 > coll:
        assert r.step_time_s == compute_ms * 1e-3  # fully hidden: exactly the compute
    else:  # exposed: compute + (collective - compute)
        assert r.step_time_s - compute_ms * 1e-3 == pytest.approx(coll - compute_ms * 1e-3, rel=1e-9)


def test_stream_order_serialises_and_events_order_streams():
    t = full_mesh(4, 10e9, 1e-6)
    coll = hcsim.simulate(t, "allgather", 4 << 20, "ring").time_s
    # same stream: one after the other
    w = Workload("serial")
    world = w.communicator("world", range(4))
    w.collective("g1", world, "allgather", 4 << 20, algorithm="ring")
    w.collective("g2", world, "allgather", 4 << 20, algorithm="ring")
    r = run(t, w)
    ops = r.op_times().set_index("op")
    assert ops.at["g2", "start_s"] == pytest.approx(ops.at["g1", "end_s"], rel=1e-12)
    assert r.step_time_s == pytest.approx(2 * coll, rel=1e-12)
    # the collective on stream "comm" waits for an event recorded after 3 ms of compute
    w = Workload("events")
    world = w.communicator("world", range(4))
    w.compute("fwd", range(4), 3e-3)
    w.record("rec", range(4), "fwd_done", stream="compute")
    w.wait("wait", range(4), "fwd_done", stream="comm")
    w.collective("g", world, "allgather", 4 << 20, algorithm="ring", stream="comm")
    w.compute("more", range(4), 1e-3)  # runs on the compute stream meanwhile
    r = run(t, w)
    ops = r.op_times().set_index("op")
    assert ops.at["g", "start_s"] == pytest.approx(3e-3, rel=1e-12)
    assert ops.at["more", "start_s"] == pytest.approx(3e-3, rel=1e-12)
    assert ops.at["g", "end_s"] == pytest.approx(3e-3 + coll, rel=1e-12)
    assert r.step_time_s == pytest.approx(4e-3, rel=1e-12)  # 'more' ends last
    # 'after' orders across streams on the same rank as an event does
    w = Workload("after")
    world = w.communicator("world", range(4))
    w.compute("fwd", range(4), 3e-3)
    w.collective("g", world, "allgather", 4 << 20, algorithm="ring", stream="comm", after=["fwd"])
    assert run(t, w).step_time_s == pytest.approx(3e-3 + coll, rel=1e-12)


def test_a_late_rank_holds_its_peers():
    t = full_mesh(2, 10e9)
    w = Workload("late")
    w.compute("slow", [1], 2e-3, stream="comm")  # rank 1's stream is busy; rank 0's is not
    w.collective("ar", w.communicator("w", [0, 1]), "allreduce", 2000, algorithm="ring")
    r = run(t, w)
    rows = r.ops[r.ops["op"] == "ar"].set_index("rank")
    assert rows.at[0, "start_s"] == 0.0 and rows.at[1, "start_s"] == pytest.approx(2e-3)
    alone = hcsim.simulate(t, "allreduce", 2000, "ring").time_s
    assert rows.at[0, "end_s"] == pytest.approx(2e-3 + alone, rel=1e-9)
    # 'after' an operation that does not involve a rank waits for all of it
    w = Workload("whole")
    w.compute("slow", [1], 2e-3)
    w.collective("ar", w.communicator("w", [0, 1]), "allreduce", 2000, algorithm="ring", after=["slow"])
    rows = run(t, w).ops.query("op == 'ar'").set_index("rank")
    assert rows.at[0, "start_s"] == rows.at[1, "start_s"] == pytest.approx(2e-3)


def test_compute_on_one_npu_is_shared_and_speed_scales_it():
    t = full_mesh(2, 10e9)
    w = Workload("share")
    w.compute("a", [0], 1e-3, stream="s1")
    w.compute("b", [0], 3e-3, stream="s2")
    r = run(t, w).ops.set_index("op")
    # both at half speed until a ends at 2 ms (1 ms of work), then b alone: 3 - 1 = 2 ms more
    assert r.at["a", "end_s"] == pytest.approx(2e-3, rel=1e-12)
    assert r.at["b", "end_s"] == pytest.approx(4e-3, rel=1e-12)
    w = Workload("slow")
    w.compute("a", [0, 1], 1e-3)
    r = run(t, w, speed={1: 0.5})
    ends = r.ops.set_index("rank")["end_s"]
    assert ends[0] == pytest.approx(1e-3) and ends[1] == pytest.approx(2e-3)


def test_send_recv_costs_latency_plus_bytes_over_bandwidth():
    t = single_switch(3, 1e9, 1e-6)
    w = Workload("p2p")
    w.send("s", 0, 2, 10**6)
    r = run(t, w)
    alone = hcsim.simulate(t, "sendrecv", 10**6, "ring", ranks=[0, 2])
    assert r.step_time_s == pytest.approx(2e-6 + 1e-3, rel=1e-9)  # two hops of 1 us, 1 MB at 1 GB/s
    assert r.step_time_s == pytest.approx(alone.time_s, rel=1e-9)


@pytest.mark.parametrize("topology, collective, size, algorithm", [
    ("atlas800t-a2", "allreduce", 64 << 20, "auto"),
    ("atlas800t-a2", "allreduce", 700 << 20, "ring"),        # four CCL-buffer loops
    ("atlas800t-a2", "allgather", 1 << 20, "mesh"),
    ("atlas800t-a2", "broadcast", 300 << 20, "ring"),
    ("atlas800t-a2", "alltoall", 8 << 20, "pairwise"),
    ("atlas800t-a2", "reducescatter", 12345678 - 12345678 % 8, "ring"),
])
def test_one_operation_equals_simulate(topology, collective, size, algorithm):
    expected = hcsim.simulate(topology, collective, size, algorithm)
    w = Workload("one")
    w.collective("c", w.communicator("world", range(8)), collective, size, algorithm=algorithm)
    r = run(topology, w)
    assert r.step_time_s == pytest.approx(expected.time_s, rel=1e-12)
    assert r.ops["algorithm"].iloc[0] == expected.algorithm


def test_one_operation_on_a_contended_leaf_spine_equals_simulate():
    t = leaf_spine(3, 4, 1, 200e9, 3.3e-7)
    for algo in ("ring", "hd", "nhr"):
        expected = hcsim.simulate(t, "allreduce", 6 << 20, algo)
        w = Workload("one")
        w.collective("c", w.communicator("world", range(12)), "allreduce", 6 << 20, algorithm=algo)
        if expected.config["contention_free_steps"]:  # simulate took the one-pass route: the same to 1e-12
            assert run(t, w).step_time_s == pytest.approx(expected.time_s, rel=1e-12)
        else:
            assert run(t, w).step_time_s == expected.time_s  # bit-identical: same engine, same order


def test_bad_workloads_get_one_line_errors():
    t = full_mesh(4, 1e9)
    with pytest.raises(hcsim.ConfigError, match="before any record"):
        w2 = Workload("bad")
        w2.wait("w", [0], "never", stream="s")
        run(t, w2)
    w3 = Workload("big")
    w3.compute("c", [7], 1e-3)
    with pytest.raises(hcsim.ConfigError, match="rank = 7: rank numbers from 0 to 3"):
        run(t, w3)
    with pytest.raises(hcsim.ConfigError, match="after = 'nope'"):
        Workload("x").compute("c", [0], 1.0, after=["nope"])
    with pytest.raises(hcsim.ConfigError, match="speed"):
        ok = Workload("ok")
        ok.compute("c", [0], 1e-3)
        run(t, ok, speed={0: -1})
    with pytest.raises(hcsim.ConfigError, match="workload"):
        run(t, Workload("empty"))
    w4 = Workload("toomuch")
    for i in range(3):
        w4.collective(f"c{i}", w4.communicator("w", range(4)), "alltoall", 4 << 20, algorithm="pairwise")
    with pytest.raises(hcsim.WorkLimitError, match="max_transfers"):
        run(t, w4, max_transfers=20)


def test_reruns_are_bit_identical():
    t = leaf_spine(2, 4, 2, 100e9, 1e-6)
    w = Workload("mix")
    a, b = w.communicator("a", range(0, 8, 2)), w.communicator("b", range(1, 8, 2))
    w.compute("f", range(8), 1e-4)
    w.collective("ra", a, "allreduce", 3 << 20, algorithm="ring", after=["f"])
    w.collective("rb", b, "allreduce", 5 << 20, algorithm="hd", stream="comm2")
    w.send("p", 0, 7, 1 << 20, stream="p2p")
    r1, r2 = run(t, w), run(t, w)
    assert r1.step_time_s == r2.step_time_s
    assert np.array_equal(r1.ops["end_s"].to_numpy(), r2.ops["end_s"].to_numpy())


def test_dtype_rules_apply_to_a_job_collective():
    w = Workload("dt")
    world = w.communicator("world", range(8))
    w.collective("g", world, "allgather", 24, algorithm="ring", dtype="fp16")  # 3 B per rank: not whole fp16
    with pytest.raises(hcsim.ConfigError, match="size = 24"):
        run("atlas800t-a2", w)
    w = Workload("dt2")
    w.collective("r", w.communicator("world", range(8)), "allreduce", 1 << 20, dtype="bf16", reduce_op="prod")
    with pytest.raises(hcsim.ConfigError, match="prod"):
        run("atlas800t-a2", w)
    with pytest.raises(hcsim.ConfigError, match="dtype"):
        Workload("x").collective("r", Communicator("c", (0, 1)), "allreduce", 64, dtype="float7")


def test_compute_from_flops_needs_the_npus_figures():
    w = Workload("flops")
    w.compute("gemm", [0, 1], flops=2 * 4096**3, bytes_moved=3 * 2 * 4096**2, dtype="bf16")
    with pytest.raises(hcsim.ConfigError, match="no compute figures"):
        run(full_mesh(2, 1e9), w)


def test_a_dtype_the_dma_cannot_reduce_goes_through_the_vector_core_as_in_simulate():
    for dtype, op in (("int64", "sum"), ("fp32", "prod"), ("fp16", "max")):
        expected = hcsim.simulate("atlas800t-a2", "allreduce", 8 << 20, "ring", dtype=dtype, reduce_op=op)
        w = Workload("vec")
        w.collective("r", w.communicator("world", range(8)), "allreduce", 8 << 20, algorithm="ring",
                     dtype=dtype, reduce_op=op)
        assert run("atlas800t-a2", w).step_time_s == pytest.approx(expected.time_s, rel=1e-12)
    slow = hcsim.simulate("atlas800t-a2", "allreduce", 8 << 20, "ring", dtype="int64").time_s
    fast = hcsim.simulate("atlas800t-a2", "allreduce", 8 << 20, "ring", dtype="int32").time_s
    assert slow > fast  # the check above compares something that differs


def test_unknown_collective_is_refused_when_added():
    """A misspelt collective is one line when the operation is added, not a KeyError at run time."""
    from hcsim.errors import ConfigError
    from hcsim.workload import Workload

    w = Workload("typo")
    comm = w.communicator("pair", [0, 1])
    with pytest.raises(ConfigError, match="collective = 'allreduse': one of allreduce"):
        w.collective("ar", comm, "allreduse", 1024)
    assert w.ops == []


def test_max_ops_bounds_a_job_before_it_runs():
    from hcsim.errors import WorkLimitError
    from hcsim.scenario import load_scenario
    from hcsim.workload import Workload, run

    w = Workload("many")
    for i in range(5):
        w.compute(f"c{i}", [0, 1], 1e-6)
    with pytest.raises(WorkLimitError, match="max_ops = 3: workload 'many' has 5 operations"):
        run("atlas800t-a2", w, max_ops=3)
    assert run("atlas800t-a2", w, max_ops=5).step_time_s == pytest.approx(5e-6)
    s = load_scenario({"topology": "atlas800t-a2", "options": {"max_ops": 2}, "workload": {"repeat": 3, "ops": [
        {"kind": "compute", "name": "c", "ranks": [0], "duration_us": 1}]}})
    with pytest.raises(WorkLimitError, match="max_ops = 2"):
        run(s.topology, s.workload, **s.options)
