"""The event-driven engine against hand-worked answers: contention, timelines, reductions."""

import numpy as np
import pytest

import hcsim
from hcsim.algorithms import CollectiveArgs, Schedule, make_step
from hcsim.engine import EngineConfig, FlowSimulator
from hcsim.engine.des import Fabric
from hcsim.errors import StuckScheduleError
from hcsim.topology import LinkSpec, NpuSpec, Topology, full_mesh, leaf_spine, ring, single_switch


def run(topo, steps, p=None, **cfg):
    """Run hand-made steps (no verification: these are timing probes, not collectives)."""
    p = p or topo.num_npus
    total = int(max(int(s.chunk_hi.max()) for s in steps))
    sched = Schedule(CollectiveArgs("sendrecv", p, 1), total, steps, np.ones(total, dtype=np.int64), "probe")
    sim = FlowSimulator(topo, topo.npus, sched, EngineConfig(**cfg))
    return sim, sim.run()


def step(src, dst, nbytes, reduce=False):
    src = np.atleast_1d(src)
    return make_step(src, dst, nbytes, reduce, 0, 1)


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_k_transfers_through_one_link_each_get_a_kth(k):
    t = single_switch(k + 1, 10e9)
    sim, time = run(t, [step(np.arange(1, k + 1), 0, 10**9)])
    assert time == pytest.approx(k * 10**9 / 10e9, rel=1e-12)  # the switch->npu0 link is shared
    assert (sim.full_recomputes > 0) == (k > 1)  # sharing forces max-min, a lone flow does not


def test_unequal_flows_share_then_the_survivor_speeds_up():
    # 3 GB and 1 GB into one 1 GB/s link: both at 0.5 until the small one ends at 2 s,
    # then the big one alone: 2 GB left at 1 GB/s -> 4 s.
    t = single_switch(3, 1e9)
    sched_steps = [make_step(np.array([1, 2]), 0, np.array([3 * 10**9, 10**9]), False, 0, 1)]
    sim = FlowSimulator(t, t.npus, Schedule(CollectiveArgs("sendrecv", 3, 1), 1, sched_steps,
                                              np.ones(1, dtype=np.int64)), EngineConfig(record=True))
    assert sim.run() == pytest.approx(4.0, rel=1e-12)
    ends = sorted(st for s in sim.done_states for st in s.t_end)
    assert ends == pytest.approx([2.0, 4.0], rel=1e-12)


@pytest.mark.parametrize("ratio", [1.0, 2.0, 4.0])
def test_oversubscribed_leaf_spine_slows_cross_leaf_transfers(ratio):
    # 2 leaves x 2 NPUs, one spine; npu0->npu2 and npu1->npu3 cross together.
    t = leaf_spine(2, 2, 1, 10e9, oversubscription=ratio)
    n = 4 * 10**9
    _, time = run(t, [step(np.array([0, 1]), np.array([2, 3]), n)])
    assert time == pytest.approx(n / 10e9 * ratio, rel=1e-12)


def test_two_to_one_doubles_large_cross_leaf_sendrecv():
    # Rank order alternates leaves, so every ring neighbour is on the other leaf: 4 flows per
    # leaf go up at once. 1:1 uplinks carry 4 x 25 GB/s, so host links limit; 2:1 halves that.
    ranks = ["npu0", "npu4", "npu1", "npu5", "npu2", "npu6", "npu3", "npu7"]
    times = {}
    for ratio in (1.0, 2.0):
        topo = leaf_spine(2, 4, 2, 25e9, 1e-6, oversubscription=ratio)
        times[ratio] = hcsim.simulate(topo, "sendrecv", "1G", ranks=ranks, routing="spray").time_s
    assert times[1.0] == pytest.approx(4e-6 + (1 << 30) / 25e9, rel=1e-12)  # 4 hops of 1 us
    assert times[2.0] - 4e-6 == pytest.approx(2 * (times[1.0] - 4e-6), rel=1e-9)


def _pair(half_duplex):
    t = Topology("pair")
    spec = NpuSpec(injection_Bps=10e9, half_duplex=True) if half_duplex else NpuSpec()
    t.add_npu("a", spec)
    t.add_npu("b", NpuSpec(local_index=1, injection_Bps=10e9, half_duplex=True) if half_duplex else NpuSpec(local_index=1))
    t.add_link("a", "b", LinkSpec(10e9))
    return t


def test_half_duplex_endpoint_halves_an_exchange():
    n = 10**9
    exchange = [step(np.array([0, 1]), np.array([1, 0]), n)]
    _, full = run(_pair(False), exchange)
    _, half = run(_pair(True), exchange)
    assert full == pytest.approx(n / 10e9, rel=1e-12)
    assert half == pytest.approx(2 * full, rel=1e-12)
    one_way = [step(0, 1, n)]
    assert run(_pair(True), one_way)[1] == pytest.approx(full, rel=1e-12)


def test_injection_limit_caps_fan_out():
    t = full_mesh(4, 10e9, injection_Bps=15e9)
    n = 3 * 10**9
    _, time = run(t, [step(np.array([0, 0, 0]), np.array([1, 2, 3]), n)])
    assert time == pytest.approx(3 * n / 15e9, rel=1e-12)


def test_hand_worked_ring_allgather_timeline():
    # p=3 ring, 1 GB/s, 2 us latency per hop, 1 us per-step overhead, 0.5 us launch; 3000 B total.
    # Each step: overhead 1 + latency 2 + 1000 B / 1 GB/s = 1 us -> 4 us; two steps; +0.5 launch.
    t = ring(3, 1e9, 2e-6)
    r = hcsim.simulate(t, "allgather", 3000, "ring", step_overhead_s=1e-6, launch_overhead_s=0.5e-6)
    assert r.time_s == pytest.approx(8.5e-6, rel=1e-12)
    tr = r.transfers
    s0 = tr[tr.step == 0]
    assert s0.ready_s.to_numpy() == pytest.approx([0.5e-6] * 3)
    assert s0.start_s.to_numpy() == pytest.approx([3.5e-6] * 3)
    assert s0.end_s.to_numpy() == pytest.approx([4.5e-6] * 3)
    assert tr[tr.step == 1].end_s.to_numpy() == pytest.approx([8.5e-6] * 3)
    assert list(r.steps.end_s) == pytest.approx([4.5e-6, 8.5e-6])
    # critical path: one transfer per step, each gated by one of the previous step
    assert list(r.critical_path.step) == [0, 1]
    # links: each forward ring link carries 2 blocks, the backward ones none
    links = r.links.set_index(["src", "dst"])
    assert links.loc[("npu0", "npu1"), "bytes"] == 2000
    assert links.loc[("npu1", "npu0"), "bytes"] == 0
    assert links.loc[("npu0", "npu1"), "utilization"] == pytest.approx(2000 / (1e9 * 8.5e-6))


def test_reductions_queue_at_the_destination():
    # mesh reducescatter p=4 on a full mesh: each rank reduces 3 incoming blocks one after another
    t = full_mesh(4, 1e9, reduce_Bps=0.5e9)
    r = hcsim.simulate(t, "reducescatter", 4000, "mesh", step_overhead_s=0)
    into0 = np.sort(r.transfers[r.transfers.dst == 0].end_s.to_numpy())
    # blocks of 1000 B arrive at 1 us and take 2 us each to reduce
    assert into0 == pytest.approx([3e-6, 5e-6, 7e-6])


def test_inline_reduce_links_skip_the_reduction_unit():
    t = full_mesh(4, 1e9, inline_reduce=True, reduce_Bps=0.5e9)
    r = hcsim.simulate(t, "reducescatter", 4000, "mesh", step_overhead_s=0)
    assert r.time_s == pytest.approx(1e-6)


def test_spray_uses_all_spines():
    # one NPU per leaf, host link 40 GB/s, 4:1 -> uplinks 10 GB/s per leaf, 2.5 GB/s per spine
    t = leaf_spine(2, 1, 4, 40e9, oversubscription=4.0)
    n = 4 * 10**9
    _, ecmp = run(t, [step(0, 1, n)], routing="ecmp")
    _, spray = run(t, [step(0, 1, n)], routing="spray")
    assert ecmp == pytest.approx(n / 2.5e9, rel=1e-12)
    assert spray == pytest.approx(n / 10e9, rel=1e-12)


def test_stuck_schedule_raises_naming_ranks(monkeypatch):
    # Safety net: if events are lost, the engine names the ranks that never finished.
    monkeypatch.setattr(FlowSimulator, "_activate", lambda self, st, idx, now: None)
    monkeypatch.setattr(Fabric, "force_full_recompute", True)  # the event-driven path, not the contention-free pass
    t = full_mesh(3, 1e9)
    with pytest.raises(StuckScheduleError, match=r"ranks 0 \(step 0\), 1 \(step 0\)"):
        hcsim.simulate(t, "allgather", "3K", "ring")


def test_schedule_with_empty_steps_and_idle_ranks():
    # tree broadcast p=5: rank 4 idles until step 2; idle ranks pass through empty steps
    r = hcsim.simulate(full_mesh(5, 1e9), "broadcast", 1000, "tree", step_overhead_s=0)
    assert r.time_s == pytest.approx(3e-6)


def test_simpy_process_composes_with_other_processes():
    import simpy

    env = simpy.Environment()
    t = full_mesh(4, 1e9)
    from hcsim.algorithms import build_schedule

    log = []

    def compute(env):
        yield env.timeout(5e-6)
        sim = FlowSimulator(t, t.npus, build_schedule("allgather", "ring", 4, 4000), EngineConfig())
        took = yield env.process(sim.process(env))
        log.append((env.now, took))

    env.process(compute(env))
    env.run()
    assert log == [(pytest.approx(8e-6), pytest.approx(3e-6))]


def test_pair_exchange_limit_halves_a_same_peer_exchange_but_not_a_ring():
    # Open MPI's TCP-like endpoint: an exchange with one peer shares one rate; a ring
    # (send to one neighbour, receive from the other) still overlaps.
    t = single_switch(4, 10e9, exchange_Bps=10e9)
    n = 10**9
    _, exchange = run(t, [step(np.array([0, 1]), np.array([1, 0]), n)])
    _, shift = run(t, [step(np.arange(4), (np.arange(4) + 1) % 4, n)])
    assert exchange == pytest.approx(2 * n / 10e9, rel=1e-12)
    assert shift == pytest.approx(n / 10e9, rel=1e-12)


def test_exchange_limit_is_the_npus_over_all_its_exchanges():
    # mesh alltoall on 3 ranks: every rank exchanges with both others at once. The limit is
    # each NPU's, over both directions and both peers: 4 n at 10 GB/s (a limit per pair
    # would leave each pair 2 n and finish in 2 n / 10 GB/s, as the links alone do)
    n = 10**9
    t = single_switch(3, 10e9, exchange_Bps=10e9)
    assert hcsim.simulate(t, "alltoall", 3 * n, "mesh", step_overhead_s=0).time_s == pytest.approx(4 * n / 10e9)
    plain = single_switch(3, 10e9)
    assert hcsim.simulate(plain, "alltoall", 3 * n, "mesh", step_overhead_s=0).time_s == pytest.approx(2 * n / 10e9)


def test_engine_limit_caps_send_plus_receive():
    t = single_switch(4, 10e9, engine_Bps=15e9)
    n = 10**9
    _, shift = run(t, [step(np.arange(4), (np.arange(4) + 1) % 4, n)])
    assert shift == pytest.approx(n / 7.5e9, rel=1e-12)  # each NPU sends and receives: 15 / 2 each
    _, one = run(t, [step(0, 1, n)])
    assert one == pytest.approx(n / 10e9, rel=1e-12)  # alone, the link limits
