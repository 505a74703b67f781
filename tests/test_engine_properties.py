"""Engine properties over random topologies and schedules, and regression tests from review."""

import dataclasses

import numpy as np
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

import hcsim
from hcsim.algorithms import CollectiveArgs, Schedule, build_schedule, make_step
from hcsim.engine import EngineConfig, FlowSimulator
from hcsim.engine.result import tables_from_engine
from hcsim.errors import ScheduleError
from hcsim.topology import full_mesh, leaf_spine, ring, single_switch, torus


def random_topology(rng):
    kind = rng.integers(5)
    bw = float(rng.choice([1e9, 10e9, 25e9]))
    lat = float(rng.choice([0.0, 1e-6]))
    npu = {}
    if rng.random() < 0.4:
        npu["injection_Bps"] = bw * float(rng.choice([0.5, 1.5]))
        npu["half_duplex"] = bool(rng.random() < 0.5)
    if rng.random() < 0.5:
        npu["reduce_Bps"] = bw * float(rng.choice([0.3, 2.0]))
    if kind == 0:
        return single_switch(int(rng.integers(3, 9)), bw, lat, **npu)
    if kind == 1:
        return leaf_spine(int(rng.integers(2, 4)), int(rng.integers(1, 4)), int(rng.integers(1, 3)), bw, lat,
                          oversubscription=float(rng.choice([0.5, 1.0, 3.0])), **npu)
    if kind == 2:
        return ring(int(rng.integers(3, 8)), bw, lat, **npu)
    if kind == 3:
        return torus((3, 3), bw, lat, **npu)
    return full_mesh(int(rng.integers(3, 7)), bw, lat, **npu)


def random_schedule(rng, p):
    steps = []
    for _ in range(int(rng.integers(1, 5))):
        n = int(rng.integers(1, 2 * p))
        src = rng.integers(0, p, n)
        dst = (src + rng.integers(1, p, n)) % p
        nbytes = rng.integers(0, 5, n) * 250_000
        steps.append(make_step(src, dst, nbytes, rng.random(n) < 0.4, 0, 1))
    return Schedule(CollectiveArgs("sendrecv", p, 1), 1, steps, np.ones(1, dtype=np.int64), "random")


def run(topo, sched, routing, full=False):
    sim = FlowSimulator(topo, topo.npus, sched, EngineConfig(step_overhead_s=0.5e-6, routing=routing))
    sim.force_full_recompute = full
    t = sim.run()
    ends = np.concatenate([s.t_end for s in sorted(sim.done_states, key=lambda s: s.k)])
    return t, ends


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), routing=st.sampled_from(["ecmp", "spray"]))
def test_fast_path_equals_full_max_min_recomputation(seed, routing):
    rng = np.random.default_rng(seed)
    topo = random_topology(rng)
    sched = random_schedule(rng, topo.num_npus)
    t_fast, ends_fast = run(topo, sched, routing, False)
    t_full, ends_full = run(topo, sched, routing, True)
    assert t_fast == pytest.approx(t_full, rel=1e-9)
    assert ends_fast == pytest.approx(ends_full, rel=1e-9)


def sparse_schedule(rng, p):
    """Few transfers per step (often contention-free), some steps repeated with new bytes."""
    steps = []
    for _ in range(int(rng.integers(1, 6))):
        n = int(rng.integers(1, max(2, p // 2)))
        src = rng.choice(p, n, replace=False)
        dst = (src + rng.integers(1, p, n)) % p
        steps.append(make_step(src, dst, rng.integers(0, 5, n) * 250_000, rng.random(n) < 0.4, 0, 1))
    return Schedule(CollectiveArgs("sendrecv", p, 1), 1, steps, np.ones(1, dtype=np.int64), "random")


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), routing=st.sampled_from(["ecmp", "spray"]),
       dense=st.booleans())
def test_contention_free_pass_equals_the_event_driven_run(seed, routing, dense):
    """When the demand bound says no resource can be hot, run() takes the one-pass route; it
    must give the event-driven engine's times (rank by rank, step by step) and bytes per link.
    A bound that missed a contended case would show here as a different time."""
    rng = np.random.default_rng(seed)
    topo = random_topology(rng)
    sched = (random_schedule if dense else sparse_schedule)(rng, topo.num_npus)
    cfg = EngineConfig(step_overhead_s=0.5e-6, launch_overhead_s=float(rng.choice([0.0, 2e-6])), routing=routing)
    fast = FlowSimulator(topo, topo.npus, sched, dataclasses.replace(cfg, record=False))
    t_fast = fast.run()
    slow = FlowSimulator(topo, topo.npus, sched, dataclasses.replace(cfg, record=True))
    t_slow = slow.run(simpy.Environment())  # given a clock, run() is the event-driven run
    assert not slow.contention_free and slow.instants > 0
    assert fast.contention_free == fast.never_contended()
    assert t_fast == pytest.approx(t_slow, rel=1e-9)
    assert fast.finish_s == pytest.approx(slow.finish_s, rel=1e-9)
    # with records, the same path as without (record changes no time), and the same records
    # as the event-driven run's: ready, start and end of every transfer
    rec = FlowSimulator(topo, topo.npus, sched, dataclasses.replace(cfg, record=True))
    assert rec.run() == t_fast and rec.contention_free == fast.contention_free
    if rec.contention_free:
        mine = tables_from_engine(rec, t_fast)[1]
        theirs = tables_from_engine(slow, t_slow)[1]
        for col in ("ready_s", "start_s", "end_s"):
            assert mine[col].to_numpy() == pytest.approx(theirs[col].to_numpy(), rel=1e-9, abs=1e-18)
        assert (mine["ready_s"] <= mine["start_s"]).all() and (mine["start_s"] <= mine["end_s"]).all()
        assert mine["end_s"].max() == t_fast
        for g, pred in enumerate(mine["pred"]):  # a predecessor ended by the time its successor was ready
            assert pred < 0 or mine["end_s"][pred] <= mine["ready_s"][g]
    assert fast.step_end_s == pytest.approx(slow.step_end_s, rel=1e-9)
    assert fast.step_ready_s == pytest.approx(slow.step_ready_s, rel=1e-9)
    assert (fast.step_count == slow.step_count).all()
    assert fast.path_bytes[:slow.path_bytes.size] == pytest.approx(slow.path_bytes, rel=1e-12)


def test_contention_free_pass_is_taken_only_without_contention():
    topo = single_switch(4, 10e9)
    apart = Schedule(CollectiveArgs("sendrecv", 4, 1), 1, [make_step(np.array([0, 2]), np.array([1, 3]), 10**9, False, 0, 1)],
                     np.ones(1, dtype=np.int64), "apart")
    onto_one = Schedule(CollectiveArgs("sendrecv", 4, 1), 1, [make_step(np.array([0, 2]), 1, 10**9, False, 0, 1)],
                        np.ones(1, dtype=np.int64), "onto one")
    sim = FlowSimulator(topo, topo.npus, apart, EngineConfig(record=False))
    assert sim.run() == pytest.approx(0.1) and sim.contention_free
    sim = FlowSimulator(topo, topo.npus, onto_one, EngineConfig(record=False))
    assert sim.run() == pytest.approx(0.2) and not sim.contention_free  # the switch->npu1 link is shared


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_no_link_ever_carries_more_than_its_capacity_on_average(seed):
    rng = np.random.default_rng(seed)
    topo = random_topology(rng)
    r = hcsim.simulate(topo, "alltoall", "1M", "mesh", routing="spray")
    assert (r.links["utilization"] <= 1 + 1e-9).all()
    # every byte sent crosses at least one link
    assert r.links["bytes"].sum() >= (1 << 20) * (topo.num_npus - 1) / topo.num_npus * topo.num_npus - 1


def test_analytical_spray_respects_a_shared_host_link():
    shared = leaf_spine(2, 1, 2, 10e9, oversubscription=0.5)  # one 10 GB/s host link, two spine paths
    for mode in ("des", "analytical"):
        r = hcsim.simulate(shared, "sendrecv", 10**9, "ring", mode=mode, routing="spray", step_overhead_s=0)
        assert r.time_s == pytest.approx(0.1, rel=1e-9), mode
    limited = leaf_spine(2, 1, 4, 10e9, oversubscription=0.25, injection_Bps=5e9)
    ana = hcsim.simulate(limited, "sendrecv", 10**9, "ring", mode="analytical", routing="spray", step_overhead_s=0)
    des = hcsim.simulate(limited, "sendrecv", 10**9, "ring", routing="spray", step_overhead_s=0)
    assert ana.time_s == pytest.approx(0.2, rel=1e-9) and des.time_s == pytest.approx(0.2, rel=1e-9)


def test_verifier_ties_chunks_to_the_requested_size():
    def tiny(args):
        s = build_schedule("allreduce", "ring", args.p, args.p)
        return dataclasses.replace(s, args=args)

    with pytest.raises(ScheduleError, match="chunks hold 8 bytes"):
        hcsim.simulate(full_mesh(8, 1e9), "allreduce", 10**9, tiny)


def test_user_schedule_for_another_call_is_rejected():
    def wrong(args):
        return build_schedule("broadcast", "tree", 2, args.nbytes)

    with pytest.raises(ScheduleError, match="returned a schedule for"):
        hcsim.simulate(full_mesh(4, 1e9), "allreduce", 10**6, wrong)


def test_tables_after_the_topology_routed_more_pairs():
    topo = full_mesh(6, 1e9)
    env = simpy.Environment()
    a = FlowSimulator(topo, topo.npus[:3], build_schedule("allgather", "ring", 3, 3000), EngineConfig())
    b = FlowSimulator(topo, topo.npus, build_schedule("alltoall", "mesh", 6, 6000), EngineConfig())
    pa, pb = env.process(a.process(env)), env.process(b.process(env))
    env.run()
    from hcsim.engine.result import tables_from_engine

    _, _, links, _ = tables_from_engine(a, pa.value)
    assert links["bytes"].sum() == pytest.approx(2 * 3000)  # 3 ranks x 2 steps x 1000 B
    _, _, links, _ = tables_from_engine(b, pb.value)
    assert links["bytes"].sum() == pytest.approx(30 * 1000)


@pytest.mark.parametrize("start_s", [0.0, 1e3, 1e6])
def test_event_merging_does_not_depend_on_the_clock(start_s):
    topo = single_switch(3, 1e9)
    sched = Schedule(CollectiveArgs("sendrecv", 3, 1), 1,
                     [make_step(np.array([1, 2]), 0, np.array([1000, 1900]), False, 0, 1)], np.ones(1, dtype=np.int64))
    env = simpy.Environment(initial_time=start_s)
    proc = env.process(FlowSimulator(topo, topo.npus, sched, EngineConfig()).process(env))
    env.run()
    # both share the 1 GB/s link into npu0 until the first ends at 2 us; the rest goes alone.
    # (float64 resolves about 1e-10 s at a clock of 1e6 s, hence the absolute tolerance)
    assert proc.value == pytest.approx(2.9e-6, abs=1e-9)


def test_queue_pairs_spread_a_transfer_over_ecmp_paths():
    # one NPU per leaf, 4 spines; a lone cross-leaf transfer: 1 QP rides one 2.5 GB/s spine path,
    # 8 QPs hash onto several spines (deterministically) and go faster, never past spray
    t = leaf_spine(2, 1, 4, 40e9, oversubscription=4.0)
    n = 10**9
    one = hcsim.simulate(t, "sendrecv", n, "ring", ranks=[0, 1], step_overhead_s=0, qps=1)
    many = hcsim.simulate(t, "sendrecv", n, "ring", ranks=[0, 1], step_overhead_s=0, qps=8)
    spray = hcsim.simulate(t, "sendrecv", n, "ring", ranks=[0, 1], step_overhead_s=0, routing="spray")
    assert one.time_s == pytest.approx(n / 2.5e9, rel=1e-9)
    assert spray.time_s < many.time_s < one.time_s
    net = t.compiled()
    ptr, res, *_ = net.paths.arrays()
    used = [tuple(res[ptr[pid]:ptr[pid + 1]]) for pid in net.route(0, 1, "ecmp", 0, 8)]
    spines_hit = len(set(used))
    # 8 equal parts, the busiest path carries (parts on it) / 8 of the data at 2.5 GB/s
    busiest = max(used.count(u) for u in set(used))
    assert many.time_s == pytest.approx(n * busiest / 8 / 2.5e9, rel=1e-9) and spines_hit > 1
    with pytest.raises(hcsim.ConfigError, match="qps = 9"):
        hcsim.simulate(t, "sendrecv", n, "ring", qps=9)


@settings(max_examples=120, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), dense=st.booleans())
def test_engine_equals_a_straightforward_reference(seed, dense):
    """The engine (batched, hot/cold max-min, counting rounds, contention-free pass) against a
    plain-Python event loop that recomputes textbook max-min for every flow at every event
    (tests/reference_engine.py): every rank's finish time to 1e-9."""
    from reference_engine import simulate as reference

    rng = np.random.default_rng(seed)
    topo = random_topology(rng)
    sched = (random_schedule if dense else sparse_schedule)(rng, topo.num_npus)
    ovh, launch = float(rng.choice([0.0, 0.5e-6])), float(rng.choice([0.0, 2e-6]))
    sim = FlowSimulator(topo, topo.npus, sched, EngineConfig(step_overhead_s=ovh, launch_overhead_s=launch,
                                                            record=bool(rng.random() < 0.3)))
    sim.run()
    assert sim.finish_s == pytest.approx(reference(topo, sched, ovh, launch), rel=1e-9, abs=1e-15)


def test_contention_free_steps_are_reported_only_when_the_pass_was_the_run():
    free = hcsim.simulate(single_switch(8, 10e9, 1e-6), "allgather", "1M", "ring", record=False)
    assert free.config["contention_free_steps"] == 7 and free.config["instants"] == 0
    busy = hcsim.simulate(single_switch(8, 10e9, 1e-6), "alltoall", "1M", "mesh", record=False)
    assert busy.config["contention_free_steps"] == 0 and busy.config["instants"] > 0
