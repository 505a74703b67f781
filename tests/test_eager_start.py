"""Eager messages (``MessageRegimes.start_when = "sender"``): a transfer that waits for its sender only.

Hand-worked timelines where the rendezvous rule (both ranks in the step) and the eager rule
differ, the contention-free bound under the eager rule, results without the flag unchanged,
and the flag's one-line errors.
"""

import dataclasses

import numpy as np
import pytest
import simpy

import hcsim
from hcsim.algorithms import CollectiveArgs, Schedule, build_schedule, make_step
from hcsim.calibrate import OPENMPI_TCP_EAGER_LIMIT, eager_send_regimes, ucx_rendezvous_regimes
from hcsim.corpus import transport_regimes
from hcsim.engine import EngineConfig, FlowSimulator
from hcsim.engine.regimes import MessageRegimes
from hcsim.engine.result import tables_from_engine
from hcsim.errors import HcsimError
from hcsim.topology import LinkSpec, NpuSpec, Topology, full_mesh, leaf_spine, single_switch
from tests.test_engine_properties import random_schedule, random_topology, sparse_schedule

EAGER = MessageRegimes(start_when=("sender",))
RENDEZVOUS = MessageRegimes(start_when=("both",))


def two_node_ring(per_node: int, latency_s: float, bandwidth_Bps: float = 1e9, reduce_Bps: float = np.inf) -> Topology:
    """``2 x per_node`` ranks in a ring: rank i -> i + 1 over a link of its own; the two links
    between the nodes (the last rank of a node to the first of the next) have ``latency_s``."""
    p = 2 * per_node
    t = Topology("two-node-ring")
    for i in range(p):
        t.add_npu(f"r{i}", NpuSpec(server=i // per_node, local_index=i % per_node, reduce_Bps=reduce_Bps))
    for i in range(p):
        cross = i % per_node == per_node - 1
        t.add_link(f"r{i}", f"r{(i + 1) % p}", LinkSpec(bandwidth_Bps, latency_s if cross else 0.0))
    return t


def shift_schedule(p: int, steps: int, nbytes: int, reduce: bool = False) -> Schedule:
    """``steps`` steps in each of which every rank i sends ``nbytes`` to rank i + 1."""
    r = np.arange(p)
    sched = [make_step(r, (r + 1) % p, nbytes, reduce, 0, 1) for _ in range(steps)]
    return Schedule(CollectiveArgs("sendrecv", p, 1), 1, sched, np.ones(1, dtype=np.int64), "shift")


def times(topo, sched, regimes, **cfg):
    """(run, event-driven run, contention-free time, the event-driven simulator)."""
    config = EngineConfig(message_regimes=regimes, **cfg)
    t_run = FlowSimulator(topo, topo.npus, sched, config).run()
    slow = FlowSimulator(topo, topo.npus, sched, config)
    t_slow = slow.run(simpy.Environment())  # with a clock of its own: always event-driven
    t_free = FlowSimulator(topo, topo.npus, sched, config).contention_free_time()
    return t_run, t_slow, t_free, slow


# ---------------------------------------------------------------- hand-worked timelines
# Ring of 6 (3 a node), every link 1 GB/s, 1000 B a step (1 us), 1 us step overhead: u = 2 us a
# hop; the two hops between the nodes (2 -> 3, 5 -> 0) add L = 10 us of latency.
#
# Rendezvous (both ranks in step k): a transfer starts when both its ranks finished step k - 1,
# so E_{k+1}[i] = max(E_k[i-1], E_k[i]) + u + L_{i-1}, max with max(E_k[i], E_k[i+1]) + u + L_i:
# from step 1 on, every rank is within one hop of a rank that waited for a crossing, and the
# time grows by u + L every step: K steps take K (u + L), 3 steps 36 us, 6 steps 72 us.
#
# Eager (sender in step k): rank i's send leaves when it enters and takes u of its time; the
# message reaches i + 1 u + L_i after i entered. E_{k+1}[i] = max(E_k[i] + u, E_k[i-1] + u +
# L_{i-1}). Unrolled, E_K[i] = K u + L x (the most crossings a path of K steps back from rank i
# passes, each step staying at a rank or moving to its predecessor): 3 steps reach at most one
# crossing (3 -> 2 or 0 -> 5, then two more hops inside a node): 6 + 10 = 16 us; 6 steps two
# (0 -> 5 -> 4 -> 3 -> 2 -> 1): 12 + 20 = 32 us.
@pytest.mark.parametrize("steps, both_us, sender_us", [(3, 36.0, 16.0), (6, 72.0, 32.0)])
def test_ring_of_two_nodes_by_hand(steps, both_us, sender_us):
    topo = two_node_ring(3, 10e-6)
    sched = shift_schedule(6, steps, 1000)
    for regimes, want in ((RENDEZVOUS, both_us), (EAGER, sender_us)):
        t_run, t_slow, t_free, _ = times(topo, sched, regimes, step_overhead_s=1e-6)
        assert t_run * 1e6 == pytest.approx(want, rel=1e-12)
        assert t_slow * 1e6 == pytest.approx(want, rel=1e-12)
        assert t_free * 1e6 == pytest.approx(want, rel=1e-12)


def test_ring_of_two_nodes_each_rank_by_hand():
    """Every rank's finish and every transfer's times in the eager 3-step ring above (us)."""
    topo = two_node_ring(3, 10e-6)
    _, _, _, sim = times(topo, shift_schedule(6, 3, 1000), EAGER, step_overhead_s=1e-6, record=True)
    # E_1 = [12, 2, 2, 12, 2, 2]: ranks 0 and 3 wait for a crossing (0 + 2 + 10)
    # E_2 = [14, 14, 4, 14, 14, 4]; E_3 = [16, 16, 16, 16, 16, 16] (rank 2: E_2[1] + 2 = 16)
    assert sim.finish_s * 1e6 == pytest.approx([16, 16, 16, 16, 16, 16], rel=1e-12)
    states = {s.k: s for s in sim.done_states + list(sim.states.values())}
    # step 1: ready when the sender entered; drained 2 us later; received 10 us after that across
    assert states[1].t_ready * 1e6 == pytest.approx([12, 2, 2, 12, 2, 2], rel=1e-12)
    assert states[1].t_start * 1e6 == pytest.approx([13, 3, 3, 13, 3, 3], rel=1e-12)
    assert states[1].t_end * 1e6 == pytest.approx([14, 4, 14, 14, 4, 14], rel=1e-12)


def test_the_slow_rank_delays_only_the_ranks_it_sends_to():
    """Step 0: ranks 0 and 1 exchange over a slow link; step 1: rank 2 (idle in step 0) sends
    to rank 0. Under the rendezvous rule rank 2's message waits for rank 0 to finish its slow
    step, and so does rank 2; under the eager rule it goes at once and waits in rank 0's queue,
    and rank 2 is done when its bytes have left."""
    t, sched = _late_receiver(reduce=False)
    # step 0: 0 <-> 1, 1 us of bytes + 50 us latency: rank 0 done at 51 us either way.
    # step 1: rank 2 (idle in step 0) sends 1000 B to rank 0 over a latency-free link:
    #   rendezvous: ready when rank 0 has entered (51 us), done at 52 us;
    #   eager: ready at 0 (rank 2 is there from the start), drained at 1 us, waits in rank 0's
    #   queue: rank 0 takes it as it enters step 1, at 51 us. Rank 2 leaves at 1 us.
    for regimes, want, rank2 in ((RENDEZVOUS, 52.0, 52.0), (EAGER, 51.0, 1.0)):
        t_run, t_slow, t_free, sim = times(t, sched, regimes)
        assert [t_run * 1e6, t_slow * 1e6, t_free * 1e6] == pytest.approx([want] * 3, rel=1e-12)
        assert sim.finish_s[2] * 1e6 == pytest.approx(rank2, rel=1e-12)


def _late_receiver(reduce: bool):
    """Three NPUs: step 0, ranks 0 and 1 exchange 1,000 B over a link of 50 us latency; step 1,
    rank 2 (idle in step 0) sends 1,000 B to rank 0 over a latency-free link (reduced there with
    ``reduce``, by a 1 GB/s reduction unit)."""
    t = Topology("three")
    for i in range(3):
        t.add_npu(f"n{i}", NpuSpec(local_index=i, **({"reduce_Bps": 1e9} if reduce else {})))
    t.add_link("n0", "n1", LinkSpec(1e9, 50e-6))
    t.add_link("n1", "n2", LinkSpec(1e9))
    t.add_link("n2", "n0", LinkSpec(1e9))
    steps = [make_step(np.array([0, 1]), np.array([1, 0]), 1000, False, 0, 1),
             make_step(np.array([2]), np.array([0]), 1000, reduce, 0, 1)]
    return t, Schedule(CollectiveArgs("sendrecv", 3, 1), 1, steps, np.ones(1, dtype=np.int64), "probe")


def test_an_early_message_is_reduced_only_once_its_receiver_is_there():
    """Same two steps, the step-1 message reducing at rank 0 (1 GB/s reduction unit: 1 us).
    Eager: it reaches rank 0 at 1 us but is reduced from 51 us (when rank 0 enters step 1):
    rank 0 finishes at 52 us; its sender is done when its bytes left (1 us)."""
    t, sched = _late_receiver(reduce=True)
    for regimes, want, rank2 in ((RENDEZVOUS, 53.0, 53.0), (EAGER, 52.0, 1.0)):
        t_run, t_slow, t_free, sim = times(t, sched, regimes)
        assert [t_run * 1e6, t_slow * 1e6, t_free * 1e6] == pytest.approx([want] * 3, rel=1e-12)
        assert sim.finish_s[2] * 1e6 == pytest.approx(rank2, rel=1e-12)


def test_only_the_eager_regime_starts_early():
    """A regime table eager below 64 KiB and rendezvous from it: the 1 KiB ring goes eager, the
    1 MiB one does not (the same time as with no flag at all)."""
    reg = MessageRegimes(from_bytes=(0, 65536), overhead_s=(0.0, 0.0), efficiency=(1.0, 1.0),
                         start_when=("sender", "both"))
    topo = two_node_ring(3, 10e-6)
    small, big = shift_schedule(6, 6, 1000), shift_schedule(6, 6, 1 << 20)
    assert times(topo, small, reg, step_overhead_s=1e-6)[0] * 1e6 == pytest.approx(32.0, rel=1e-12)
    plain = FlowSimulator(topo, topo.npus, big, EngineConfig(step_overhead_s=1e-6)).run()
    assert times(topo, big, reg, step_overhead_s=1e-6)[0] == plain


# ---------------------------------------------------------------- the contention-free bound
CASES = [
    ("allreduce", "ring", "64K"), ("allreduce", "hd", "4K"), ("allreduce", "rabenseifner", "256K"),
    ("allgather", "ring", "1M"), ("alltoall", "pairwise", "64K"), ("broadcast", "bmtree", "16K"),
    ("reduce", "tree", "16K"), ("reduce", "ring", "16K"), ("broadcast", "ring", "64K"),
]


def _case_schedule(op, algo, size, p):
    try:
        return build_schedule(op, algo, p, hcsim.units.parse_size(size))
    except HcsimError:
        pytest.skip(f"{op} {algo} has no schedule on {p} ranks here")


@pytest.mark.parametrize("op, algo, size", CASES)
def test_contention_free_time_is_a_lower_bound_under_the_eager_rule(op, algo, size):
    topo = leaf_spine(2, 4, 1, 25e9, 1e-6, oversubscription=4.0, reduce_Bps=20e9)
    sched = _case_schedule(op, algo, size, 8)
    t_run, t_slow, t_free, _ = times(topo, sched, EAGER, step_overhead_s=2e-6)
    assert t_run == pytest.approx(t_slow, rel=1e-9)
    assert t_free <= t_slow * (1 + 1e-9)


@pytest.mark.parametrize("op, algo, size", CASES)
def test_contention_free_time_equals_the_run_without_contention_under_the_eager_rule(op, algo, size):
    topo = full_mesh(8, 25e9, 1e-6, reduce_Bps=20e9)  # no two transfers share a link
    sched = _case_schedule(op, algo, size, 8)
    t_run, t_slow, t_free, _ = times(topo, sched, EAGER, step_overhead_s=2e-6)
    assert t_slow == pytest.approx(t_free, rel=1e-9)
    assert t_run == pytest.approx(t_free, rel=1e-9)


@pytest.mark.parametrize("seed", range(60))
def test_random_schedules_bound_and_equality_under_the_eager_rule(seed):
    """Random topologies and schedules (some with idle ranks, reductions, zero-byte transfers):
    the pass equals the event-driven run when it is taken, and bounds it always."""
    rng = np.random.default_rng(seed)
    topo = random_topology(rng)
    sched = (random_schedule if seed % 2 else sparse_schedule)(rng, topo.num_npus)
    t_run, t_slow, t_free, slow = times(topo, sched, EAGER, step_overhead_s=0.5e-6)
    assert np.isfinite(slow.finish_s).all()
    assert t_free <= t_slow * (1 + 1e-9)
    assert t_run == pytest.approx(t_slow, rel=1e-9)
    cfg = EngineConfig(message_regimes=EAGER, step_overhead_s=0.5e-6, record=True)
    fast = FlowSimulator(topo, topo.npus, sched, cfg)
    t_fast = fast.run()
    if fast.contention_free:
        assert t_free == pytest.approx(t_slow, rel=1e-9)
        assert fast.finish_s == pytest.approx(slow.finish_s, rel=1e-9)
        # the pass keeps the event-driven run's records: every transfer's ready, start and end
        recorded = FlowSimulator(topo, topo.npus, sched, cfg)
        t_rec = recorded.run(simpy.Environment())
        mine, theirs = tables_from_engine(fast, t_fast)[1], tables_from_engine(recorded, t_rec)[1]
        for col in ("ready_s", "start_s", "end_s"):
            assert mine[col].to_numpy() == pytest.approx(theirs[col].to_numpy(), rel=1e-9, abs=1e-18)
        assert fast.step_ready_s == pytest.approx(recorded.step_ready_s, rel=1e-9)
        assert fast.step_end_s == pytest.approx(recorded.step_end_s, rel=1e-9)


def test_eager_ranks_jump_idle_steps_as_they_walk():
    """A rooted reduce on 64 ranks (most ranks idle for many steps: the run indexes them and
    jumps) gives the same time as the contention-free pass on a full mesh."""
    topo = full_mesh(64, 10e9, 1e-6)
    sched = build_schedule("reduce", "tree", 64, 1 << 16)
    _, t_slow, t_free, _ = times(topo, sched, EAGER, step_overhead_s=1e-6)
    assert t_slow == pytest.approx(t_free, rel=1e-9)


@pytest.mark.parametrize("seed", range(12))
def test_eager_jumping_equals_walking_with_barriers(seed, monkeypatch):
    """Long idle runs (the run indexes the ranks' steps and jumps), incasts that contend, and
    barriers: jumping gives the walk's times and records exactly, and the pass bounds the run."""
    from hcsim.engine import des
    from tests.test_engine_skip import idle_heavy_schedule

    rng = np.random.default_rng(seed)
    p = int(rng.integers(18, 40))
    sched = idle_heavy_schedule(rng, p, barriers=bool(seed % 2))
    topo = single_switch(p, 10e9, 1e-6)
    cfg = EngineConfig(step_overhead_s=0.5e-6, message_regimes=EAGER, record=True)

    def run():
        sim = FlowSimulator(topo, topo.npus, sched, cfg)
        t = sim.run(simpy.Environment())
        states = sorted(sim.done_states + list(sim.states.values()), key=lambda s: s.k)
        return t, sim.finish_s.tolist(), [(s.k, s.t_ready.tolist(), s.t_start.tolist(), s.t_end.tolist()) for s in states]

    jumped = run()
    monkeypatch.setattr(des, "SKIP_INDEX_AFTER", 10**9)  # walk every idle step
    walked = run()
    assert jumped == walked
    free = FlowSimulator(topo, topo.npus, sched, cfg).contention_free_time()
    assert free <= jumped[0] * (1 + 1e-9)


# ---------------------------------------------------------------- without the flag: as before
def _with(topo, regimes):
    topo.defaults = dataclasses.replace(topo.defaults, message_regimes=regimes)
    return topo


_UCX = MessageRegimes(from_bytes=(0, 262144), overhead_s=(0.0, 0.0), efficiency=(1.0, 1.0),
                      local_efficiency=(1.0, 0.5), send_overhead_s=(1e-6, 0.0), send_copy_Bps=(2e9, np.inf))
_SENDS = MessageRegimes(send_overhead_s=(1e-6,), send_copy_Bps=(2e9,))


# repr of (time_s, sum of every transfer's end_s), from the engine before start_when existed
# (main at 64b3748, 2026-11-24)
@pytest.mark.parametrize("make, op, size, algo, want", [
    (lambda: leaf_spine(2, 4, 1, 25e9, 1e-6, oversubscription=2.0), "allreduce", "1M", "ring",
     ("0.00015740031999999995", "0.0092240192")),
    (lambda: _with(leaf_spine(2, 4, 1, 25e9, 1e-6, oversubscription=2.0), _UCX), "allreduce", "4M", "ring",
     ("0.0003776012799999998", "0.022436076799999993")),
    (lambda: _with(leaf_spine(2, 4, 1, 25e9, 1e-6, oversubscription=2.0), _UCX), "allgather", "64K", "ring",
     ("4.429376e-05", "0.0013094003199999999")),
    (lambda: _with(single_switch(8, 10e9, 1e-6), _SENDS), "alltoall", "256K", "pairwise",
     ("5.093760000000001e-05", "0.0016300032000000002")),
    (lambda: _with(leaf_spine(2, 4, 1, 25e9, 1e-6, reduce_Bps=5e9), _SENDS), "allreduce", "64K", "hd",
     ("4.405632000000001e-05", "0.00141052416")),
])
def test_without_the_flag_results_are_as_before_bit_for_bit(make, op, size, algo, want):
    r = hcsim.simulate(make(), op, size, algorithm=algo, step_overhead_s=2e-6)
    assert (repr(r.time_s), repr(float(r.transfers["end_s"].sum()))) == want


def test_rendezvous_everywhere_is_no_flag_at_all():
    topo = leaf_spine(2, 4, 1, 25e9, 1e-6, oversubscription=2.0)
    sched = build_schedule("allreduce", "ring", 8, 1 << 20)
    plain = FlowSimulator(topo, topo.npus, sched, EngineConfig(step_overhead_s=1e-6)).run()
    flagged = FlowSimulator(topo, topo.npus, sched, EngineConfig(step_overhead_s=1e-6,
                                                                 message_regimes=RENDEZVOUS)).run()
    assert RENDEZVOUS.trivial and not EAGER.trivial
    assert repr(flagged) == repr(plain)


# ---------------------------------------------------------------- the calibrated transports
def test_mpi_transports_send_eagerly_below_their_limits():
    ucx = ucx_rendezvous_regimes()(1e-6, 1.34e9)
    assert ucx.start_when == ("sender", "both")
    assert ucx.sender_starts([8, 262143, 262144]).tolist() == [True, True, False]
    assert eager_send_regimes()(1e-6, 2e9).start_when == ("sender",)
    tcp = transport_regimes("openmpi-tcp")(1e-6, 2e9)
    assert tcp.from_bytes == (0, OPENMPI_TCP_EAGER_LIMIT) and tcp.start_when == ("sender", "both")
    assert transport_regimes("intel-mpi")(1e-6, 2e9).start_when == ("sender",)
    assert transport_regimes("openmpi")(1e-6, 2e9).start_when == ("sender", "both")
    # without the start rule: what the fits had before it (start_when None)
    assert eager_send_regimes(eager_start=False)(1e-6, 2e9).start_when is None
    assert ucx_rendezvous_regimes(eager_start=False)(1e-6, 2e9).start_when is None


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "64K"])
def test_bad_eager_limit_is_a_one_line_error(bad):
    with pytest.raises(HcsimError) as e:
        eager_send_regimes(eager_limit=bad)
    assert "\n" not in str(e.value) and "eager_limit" in str(e.value)


# ---------------------------------------------------------------- bad values
@pytest.mark.parametrize("value, field", [
    (("eager",), "message_regimes[0].start_when"),
    ("sender", "message_regimes.start_when"),
    (("sender", "both"), "message_regimes.start_when"),
    ((None,), "message_regimes[0].start_when"),
    ((1,), "message_regimes[0].start_when"),
    (5, "message_regimes.start_when"),
])
def test_bad_start_when_is_a_one_line_error(value, field):
    with pytest.raises(HcsimError) as e:
        MessageRegimes(start_when=value)
    msg = str(e.value)
    assert "\n" not in msg and field in msg and "both" in msg and "sender" in msg
