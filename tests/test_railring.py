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


@pytest.mark.parametrize("servers,local", [(1, 4), (2, 4), (2, 8), (3, 2), (4, 8), (5, 1)])
def test_orders_are_rings_that_cross_on_one_local_index(servers, local):
    orders = rail_orders(servers, local)
    p = servers * local
    assert orders.shape == (local, p)
    for c, order in enumerate(orders):
        assert sorted(order.tolist()) == list(range(p))  # every rank once
        hops = list(zip(order, np.roll(order, -1), strict=True))
        crossings = [(int(a), int(b)) for a, b in hops if a // local != b // local]
        assert len(crossings) == (servers if servers > 1 else 0)
        wraps_odd = servers % 2 == 1 and servers > 1
        same_rail = [a % local == b % local for a, b in crossings]
        # every crossing joins one local index, but for the wrap of an odd server count
        assert sum(same_rail) == len(crossings) - (1 if wraps_odd and local > 1 else 0), (c, crossings)


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
                                          (16, (8, 8), 1 << 20)])
def test_every_schedule_passes_the_semantic_verifier(collective, p, servers, n):
    verify(build_schedule(collective, "railring", p, n, servers=servers))


def test_unequal_servers_are_refused_in_one_line():
    with pytest.raises(HcsimError, match="railring needs servers of equal size"):
        build_schedule("allreduce", "railring", 6, 1 << 20, servers=(4, 2))


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
