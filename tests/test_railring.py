"""Rail rings (hcsim/algorithms/railring.py): one ring per local index, each crossing servers on its own rail."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import hcsim
from hcsim.algorithms.railring import rail_orders
from hcsim.algorithms.registry import build_schedule
from hcsim.errors import HcsimError
from hcsim.topology import leaf_spine, single_switch
from hcsim.verify import verify


@pytest.mark.parametrize("servers,local", [(1, 4), (2, 4), (2, 8), (3, 2), (3, 3), (3, 8), (4, 8), (5, 1), (5, 4)])
def test_orders_are_rings_that_cross_on_one_local_index(servers, local):
    orders = rail_orders(servers, local)
    p = servers * local
    assert orders.shape == (local, p)
    for c, order in enumerate(orders):
        assert sorted(order.tolist()) == list(range(p))  # every rank once
        hops = list(zip(order, np.roll(order, -1), strict=True))
        crossings = [(int(a), int(b)) for a, b in hops if a // local != b // local]
        assert len(crossings) == (servers if servers > 1 else 0)
        same_rail = [a % local == b % local for a, b in crossings]
        # every crossing joins one local index, but for the wrap of an odd server count on 2 ranks a server
        odd_pairs = servers % 2 == 1 and servers > 1 and local == 2
        assert sum(same_rail) == len(crossings) - (1 if odd_pairs else 0), (c, crossings)
    # between two servers, one direction: the L rings cross on L different rails
    for s in range(servers if servers > 1 else 0):
        rails = [int(a) % local for order in orders for a, b in zip(order, np.roll(order, -1), strict=True)
                 if a // local == s and b // local == (s + 1) % servers]
        if not (servers % 2 == 1 and local == 2):
            assert sorted(rails) == list(range(local)), (s, rails)


def test_two_servers_use_every_rail_once_each_way():
    orders = rail_orders(2, 8)
    out = {}  # (direction, rail) -> rings
    for c, order in enumerate(orders):
        for a, b in zip(order, np.roll(order, -1), strict=True):
            if a // 8 != b // 8:
                out.setdefault((int(a) // 8, int(a) % 8), []).append(c)
    assert sorted(out) == [(s, r) for s in (0, 1) for r in range(8)]
    assert all(len(v) == 1 for v in out.values())


@pytest.mark.parametrize("collective", ["allreduce", "allgather", "reducescatter"])
@pytest.mark.parametrize("p,servers,n", [(8, (4, 4), 8 * 4 * 1000 + 13), (6, (2, 2, 2), 77), (8, (), 1 << 16),
                                          (16, (8, 8), 1 << 20), (12, (4, 4, 4), 12 * 4 * 100 + 5), (5, (1,) * 5, 77),
                                          (15, (3,) * 5, 1 << 12)])
def test_every_schedule_passes_the_semantic_verifier(collective, p, servers, n):
    verify(build_schedule(collective, "railring", p, n, servers=servers))


def test_unequal_servers_are_refused_in_one_line():
    with pytest.raises(HcsimError, match="railring needs servers of equal size"):
        build_schedule("allreduce", "railring", 6, 1 << 20, servers=(4, 2))


def test_best_does_not_race_it_where_it_cannot_run():
    """6 ranks of 2 x 4 leave servers of 4 and 2: 'best' races the flat algorithms but railring (a review finding:
    it raised there), and on one server railring is the ring, so not raced there either."""
    topo = leaf_spine(2, 4, 4, 100e9, npus_per_server=4)
    r = hcsim.simulate(topo, "allreduce", 1 << 20, "best", ranks=6)
    assert r.time_us > 0
    from hcsim.hccl.selection import candidates

    assert "railring" not in candidates("allreduce", (4, 2)) and "railring" not in candidates("allreduce", (8,))


@pytest.mark.parametrize("bad", [[[0, 1, 1, 3]], [0, 1, 2, 3], [[0, 1, 2]], [], [[0, 1, 2, 4]], "x"])
def test_orders_must_be_permutations(bad):
    from hcsim.algorithms.multiring import orders_schedule
    from hcsim.algorithms.schedule import CollectiveArgs

    with pytest.raises(HcsimError, match="orders = .*permutations of the 4 ranks"):
        orders_schedule(CollectiveArgs("allgather", 4, 4096), ("ag",), bad, "x")


def test_on_one_server_it_is_the_ring():
    """Inside one server every rail ring would be the same cycle: the schedule is the ring's, and so are the
    event-driven and analytical times."""
    topo = single_switch(8, 100e9)
    topo.defaults = dataclasses.replace(topo.defaults, step_overhead_s=2e-6)
    for c in ("allreduce", "allgather", "reducescatter"):
        assert hcsim.simulate(topo, c, 64 << 20, "railring").time_s == pytest.approx(
            hcsim.simulate(topo, c, 64 << 20, "ring").time_s, rel=1e-12)
        assert hcsim.simulate(topo, c, 64 << 20, "railring", mode="analytical").time_s == pytest.approx(
            hcsim.simulate(topo, c, 64 << 20, "ring", mode="analytical").time_s, rel=1e-12)
        sched = build_schedule(c, "railring", 8, 64 << 20)
        assert sched.p == 8 and len(sched.steps[0]) == 8  # one ring: one transfer per rank a step


@pytest.mark.parametrize("servers,local", [(3, 4), (5, 3), (4, 8)])
def test_odd_and_even_server_counts_keep_one_ring_a_rail(servers, local):
    """The closed form on rails (fast links inside the servers): (p-1) steps of 2 us + (n/p)/L over one 10 GB/s rail,
    odd server counts too (their last server is entered on a third local index)."""
    topo = leaf_spine(servers, local, local, 1000e9, npus_per_server=local, rails=True, oversubscription=100.0,
                      tier="nvlink")
    topo.defaults = dataclasses.replace(topo.defaults, step_overhead_s=2e-6)
    p = servers * local
    n = p * local * 4096 * 8
    des = hcsim.simulate(topo, "allgather", n, "railring").time_s
    assert des == pytest.approx((p - 1) * (2e-6 + n / p / local / 10e9), rel=1e-9)


def test_odd_servers_of_two_ranks_share_rails_on_the_wrap():
    """3 servers x 2 ranks: no cycle keeps every crossing on one rail; the wraps route through a peer and two rings
    may share a rail, so the event-driven time is above the closed form (1.62 x here), which the docstring says."""
    topo = leaf_spine(3, 2, 2, 1000e9, npus_per_server=2, rails=True, oversubscription=100.0, tier="nvlink")
    topo.defaults = dataclasses.replace(topo.defaults, step_overhead_s=2e-6)
    n = 6 * 2 * 4096 * 8
    des = hcsim.simulate(topo, "allgather", n, "railring").time_s
    ana = hcsim.simulate(topo, "allgather", n, "railring", mode="analytical").time_s
    assert 1.2 < des / ana < 2.01


@pytest.mark.parametrize("collective,steps", [("allreduce", 14), ("allgather", 7), ("reducescatter", 7)])
def test_on_rails_each_ring_takes_its_own_rail(collective, steps):
    """2 servers x 4 ranks, links inside a server at 1 TB/s, rails at 10 GB/s (oversubscription 100), 2 us a step:
    by hand a step is 2 us + (n/8)/4 bytes over one rail (every crossing on its own rail, each way), so 14 or 7
    such steps; the event-driven, analytical and closed forms agree, and one ring (both crossings on one rail
    pair, a whole block a step) is 4 times the bandwidth part."""
    topo = leaf_spine(2, 4, 4, 1000e9, npus_per_server=4, rails=True, oversubscription=100.0, tier="nvlink")
    topo.defaults = dataclasses.replace(topo.defaults, step_overhead_s=2e-6)
    n = 64 << 20
    hand = steps * (2e-6 + n / 8 / 4 / 10e9)
    des = hcsim.simulate(topo, collective, n, "railring").time_s
    ana = hcsim.simulate(topo, collective, n, "railring", mode="analytical").time_s
    ring = hcsim.simulate(topo, collective, n, "ring").time_s
    assert des == pytest.approx(hand, rel=1e-9) and ana == pytest.approx(hand, rel=1e-9)
    assert ring == pytest.approx(steps * (2e-6 + n / 8 / 10e9), rel=1e-9)


def test_a_default_sweep_on_unequal_servers_leaves_out_what_needs_them_equal():
    """6 ranks of 2 x 4 (servers of 4 and 2): the default list raced pipeline there and raised (before this session
    too); now it leaves out pipeline and railring, and keeps them on equal servers."""
    from hcsim.algorithms.registry import REGISTRY

    equal = {a for a, spec in REGISTRY["allreduce"].items() if spec.equal_servers}
    assert equal == {"pipeline", "railring"}
    topo = leaf_spine(2, 4, 4, 100e9, npus_per_server=4)
    six = set(hcsim.sweep(topo, "allreduce", sizes=("1M", "2M"), ranks=6).algorithm)
    eight = set(hcsim.sweep(topo, "allreduce", sizes=("1M", "2M")).algorithm)
    assert six and not six & equal and equal <= eight
