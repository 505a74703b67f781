"""Property: on a contention-free topology the event-driven engine reproduces every
algorithm's closed form, and every schedule passes the semantic verifier (p = 2..64)."""

import pytest
from helpers import mesh_topology
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hcsim
from hcsim.algorithms import REGISTRY
from hcsim.algorithms.cost import log2_floor
from hcsim.algorithms.multiring import ring_strides

PAIRS = [(c, a) for c, algos in REGISTRY.items() for a, spec in algos.items() if not spec.in_network]
"""Every algorithm but the in-network ones (nvls), which need a switch that reduces: their own property below."""


def even_size(p: int, k: int) -> int:
    """A size every chunking of these algorithms splits evenly (p, p' = 2^floor(log2 p), p*p)."""
    # x2: double ring halves every block; x its ring count: multiring splits every block in that many parts
    return 2 * len(ring_strides(p)) * p * p * (1 << log2_floor(p)) * k


@pytest.mark.parametrize("collective,algorithm", PAIRS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(p=st.integers(2, 64), k=st.integers(1, 64),
       bw=st.sampled_from([1e9, 18.3e9, 200e9]), lat=st.sampled_from([0.0, 0.6e-6, 5e-6]),
       red=st.sampled_from([float("inf"), 10e9, 3e9]), ovh=st.sampled_from([0.0, 1.02e-6, 20e-6]),
       launch=st.sampled_from([0.0, 10e-6]), data=st.data())
def test_event_driven_equals_closed_form(collective, algorithm, p, k, bw, lat, red, ovh, launch, data):
    topo = mesh_topology(p, bw, lat, red)
    root = data.draw(st.integers(0, p - 1))
    size = even_size(p, k)
    kw = dict(root=root, step_overhead_s=ovh, launch_overhead_s=launch)
    des = hcsim.simulate(topo, collective, size, algorithm, verify=True, record=False, **kw)
    ana = hcsim.simulate(topo, collective, size, algorithm, mode="analytical", verify=False, **kw)
    assert des.time_s == pytest.approx(ana.time_s, rel=1e-9, abs=0)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(p=st.integers(2, 40), n=st.integers(1, 64 << 20), bw=st.sampled_from([1e9, 450e9]),
       lat=st.sampled_from([0.0, 0.6e-6]), ovh=st.sampled_from([0.0, 1.02e-6]), launch=st.sampled_from([0.0, 10e-6]),
       eff=st.sampled_from([0.74, 0.85, 1.0]))
def test_in_network_allreduce_equals_its_closed_form(p, n, bw, lat, ovh, launch, eff):
    """nvls on a single switch that reduces in the network (its only contention-free home)."""
    from hcsim.topology import single_switch

    topo = single_switch(p, bw, lat, in_network_efficiency=eff)
    kw = dict(step_overhead_s=ovh, launch_overhead_s=launch)
    des = hcsim.simulate(topo, "allreduce", n, "nvls", verify=True, record=False, **kw)
    ana = hcsim.simulate(topo, "allreduce", n, "nvls", mode="analytical", verify=False, **kw)
    cost = hcsim.algorithms.get_algorithm("allreduce", "nvls").cost
    closed = launch + cost(hcsim.algorithms.CollectiveArgs("allreduce", p, n),
                           hcsim.algorithms.AlphaBetaGamma(ovh + lat, 1 / (eff * bw), 0.0))
    assert des.time_s == pytest.approx(closed, rel=1e-9, abs=0)
    assert ana.time_s == pytest.approx(closed, rel=1e-9, abs=0)


def test_closed_forms_match_hccl_documented_formulas():
    # HCCL docs (FACTS.md s1), p = 8, alpha = 1 us, beta = 1/10 GB/s, gamma = 1/5 GB/s, n = 64 MiB
    from hcsim.algorithms import AlphaBetaGamma, CollectiveArgs, get_algorithm

    a, b, g, n, p = 1e-6, 1 / 10e9, 1 / 5e9, 64 << 20, 8
    m = AlphaBetaGamma(a, b, g)

    def cost(coll, algo, p=p):
        return get_algorithm(coll, algo).cost(CollectiveArgs(coll, p, n), m)

    assert cost("allreduce", "ring") == pytest.approx(2 * (p - 1) * a + 2 * (p - 1) / p * n * b + (p - 1) / p * n * g)
    assert cost("allreduce", "mesh") == pytest.approx(2 * a + 2 * n / p * b + (p - 1) / p * n * g)
    assert cost("allreduce", "hd") == pytest.approx(2 * 3 * a + 2 * (p - 1) / p * n * b + (p - 1) / p * n * g)
    # non-power-of-two H-D_R, p = 6, p' = 4: (2 floor(log p) + 2) a + (2(p'-1)/p' + 2) n b + ((p'-1)/p' + 1) n g
    pp = 4
    assert cost("allreduce", "hd", 6) == pytest.approx(6 * a + (2 * (pp - 1) / pp + 2) * n * b + ((pp - 1) / pp + 1) * n * g)
    assert cost("broadcast", "ring") == pytest.approx((p - 1) * (a + n * b))
    assert cost("broadcast", "star") == pytest.approx(a + n * b)
    assert cost("alltoall", "pairwise") == pytest.approx((p - 1) * a + (p - 1) * n / p * b)
    assert cost("allgather", "hd") == pytest.approx(3 * a + (p - 1) / p * n * b)  # Thakur: lg p a + (p-1)/p n b
    assert cost("broadcast", "tree") == pytest.approx(3 * (a + n * b))
    assert cost("broadcast", "bmtree") == pytest.approx(3 * (a + n * b))
    assert cost("allreduce", "rd") == pytest.approx(3 * (a + n * (b + g)))  # Thakur: lg p (a + n b + n g)
    assert cost("allreduce", "rd", 6) == pytest.approx(3 * (a + n * (b + g)) + a + n * b)  # 2 levels + fold, unfold


def test_rabenseifner_keeps_the_big_halves_between_neighbours():
    # same bytes as H-D_R, distances reversed: equal on one switch; on a leaf-spine with a thin
    # uplink (leaves of 4) H-D_R sends n/2 per rank across it first, Rabenseifner only n/8
    from hcsim.topology import leaf_spine, single_switch

    n = 1 << 20
    flat = single_switch(8, 1e9)
    assert hcsim.simulate(flat, "allreduce", n, "rabenseifner", verify=True).time_s == pytest.approx(
        hcsim.simulate(flat, "allreduce", n, "hd").time_s, rel=1e-12)
    thin = leaf_spine(2, 4, 1, 1e9, oversubscription=4)  # hosts 1 GB/s, each leaf's uplink 1 GB/s
    fast = hcsim.simulate(thin, "allreduce", n, "rabenseifner", verify=True).time_s
    slow = hcsim.simulate(thin, "allreduce", n, "hd").time_s
    # hand-worked, RS then its mirror AG: distance 1 (n/2), 2 (n/4), then 4 across the uplink,
    # which the leaf's 4 ranks share (4 x n/8) -- against 4 x n/2 across it first, then n/4, n/8
    assert fast == pytest.approx(2 * (n / 2 + n / 4 + 4 * n / 8) / 1e9, rel=1e-9)
    assert slow == pytest.approx(2 * (4 * n / 2 + n / 4 + n / 8) / 1e9, rel=1e-9)


def test_open_mpi_binomial_broadcast_shares_each_senders_link():
    # hand-worked, p = 8 on one switch, links B: the root's 3 sends share its link (3 n/B),
    # then rank 1 sends to 3 and 5 together (2 n/B), then rank 3 to 7 (n/B): 6 n/B in all,
    # where the one-child-per-step binomial tree takes 3 n/B
    from hcsim.topology import single_switch

    bw, n = 1e9, 1 << 20
    topo = single_switch(8, bw)
    assert hcsim.simulate(topo, "broadcast", n, "bmtree", verify=True).time_s == pytest.approx(6 * n / bw)
    assert hcsim.simulate(topo, "broadcast", n, "tree").time_s == pytest.approx(3 * n / bw)


def test_uneven_sizes_stay_within_a_byte_per_chunk_of_the_closed_form():
    topo = mesh_topology(7, 10e9, 1e-6, 5e9)
    for algo in (a for a, spec in REGISTRY["allreduce"].items() if not spec.in_network):  # no NVLS switch
        des = hcsim.simulate(topo, "allreduce", 1_000_003, algo)
        ana = hcsim.simulate(topo, "allreduce", 1_000_003, algo, mode="analytical")
        assert des.time_s == pytest.approx(ana.time_s, rel=1e-5)


@pytest.mark.parametrize("bitmap", [True, False])
def test_path_parameters_reads_repeated_pairs_in_new_arrays_once_and_right(bitmap, monkeypatch):
    """Steps that repeat an earlier step's pairs in new arrays (A, B, then A again, reducing)
    are listed once by content; the third step's reduction must be charged to pairs A (whose
    receiver reduces slowly), not to the last pairs listed (B)."""
    import dataclasses

    import numpy as np

    import hcsim.analytical as an
    from hcsim.algorithms.registry import CollectiveArgs
    from hcsim.algorithms.schedule import Schedule, make_step
    from hcsim.analytical import path_parameters
    from hcsim.topology import single_switch

    if not bitmap:  # the path for more than 8,192 ranks: each distinct step content sorted once
        monkeypatch.setattr(an, "PAIR_BITMAP", 0)
    topo = single_switch(4, 25e9, 1e-6, reduce_Bps=1e10)
    slow = topo.npus[1]
    topo.graph.nodes[slow]["spec"] = dataclasses.replace(topo.npu_spec(slow), reduce_Bps=1e9)

    def sched(third_reduces: bool):
        steps = [make_step(np.array([0]), np.array([1]), 100, False, 0, 1),   # A: into the slow NPU
                 make_step(np.array([2]), np.array([3]), 100, False, 0, 1),   # B
                 make_step(np.array([0]), np.array([1]), 100, third_reduces, 0, 1)]  # A again
        return Schedule(CollectiveArgs("sendrecv", 4, 1), 1, steps, np.ones(1, dtype=np.int64), "probe")

    plain = path_parameters(topo, topo.npus, sched(False), inline_reduce=False)
    reducing = path_parameters(topo, topo.npus, sched(True), inline_reduce=False)
    assert plain.gamma_s_per_B == 0.0
    assert reducing.gamma_s_per_B == pytest.approx(1 / 1e9)
    assert (reducing.alpha_s, reducing.beta_s_per_B) == (plain.alpha_s, plain.beta_s_per_B)


@pytest.mark.parametrize("collective,algo,servers", [("allreduce", "ring", ()), ("allreduce", "hd", ()),
                                                     ("alltoall", "mesh", ()), ("reduce", "tree", ()),
                                                     ("gather", "ring", ()), ("allreduce", "ring/hd", (4,) * 4),
                                                     ("reducescatter", "mesh/ring", (4,) * 4)])
def test_schedule_pairs_bitmap_equals_sorting(collective, algo, servers, monkeypatch):
    """The two ways of listing a schedule's pairs (a boolean map up to 8,192 ranks, sorted step
    contents above) give the same pairs and reducing flags."""
    import numpy as np

    import hcsim.analytical as an
    from hcsim.algorithms import build_schedule

    sched = build_schedule(collective, algo, 16, 1 << 16, root=3, servers=servers)
    pairs, red = an._schedule_pairs(sched, 16)
    monkeypatch.setattr(an, "PAIR_BITMAP", 0)
    pairs2, red2 = an._schedule_pairs(sched, 16)
    assert np.array_equal(pairs, pairs2) and np.array_equal(red, red2) and len(pairs) > 0
