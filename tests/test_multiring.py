"""Multi-ring (hcsim/algorithms/multiring.py): k rings of coprime strides, 1/k of every block each."""

from __future__ import annotations

import pytest
from helpers import mesh_topology

import hcsim
from hcsim.algorithms.multiring import MAX_RINGS, ring_strides
from hcsim.algorithms.registry import build_schedule
from hcsim.topology import single_switch
from hcsim.verify import verify


def test_strides_are_coprime_pairs_of_opposite_rings():
    for p in range(2, 70):
        s = ring_strides(p)
        assert 1 <= len(s) <= MAX_RINGS and len(set(s)) == len(s) and s[0] == 1
        assert all(0 < x < p and __import__("math").gcd(x, p) == 1 for x in s), p
    assert ring_strides(8) == (1, 7, 3, 5) and ring_strides(2) == (1,) and ring_strides(9) == (1, 8, 2, 7, 4, 5)


@pytest.mark.parametrize("collective", ["allreduce", "allgather", "reducescatter"])
@pytest.mark.parametrize("p,n", [(2, 1000), (5, 77), (8, 8 * 4 * 1000 + 13), (12, 1 << 16)])
def test_every_schedule_passes_the_semantic_verifier(collective, p, n):
    verify(build_schedule(collective, "multiring", p, n))


def test_on_a_full_mesh_four_rings_move_a_block_in_a_quarter_of_the_time():
    """8 ranks, every pair linked at 10 GB/s, 1 us a step, no latency: an allgather of 64 MiB is 7 steps of
    (1 us + 2 MiB / 4 / 10 GB/s) with four rings, 7 of (1 us + 2 MiB / 10 GB/s) with one."""
    topo = mesh_topology(8, 10e9, 0.0, float("inf"))
    n = 64 << 20
    multi = hcsim.simulate(topo, "allgather", n, "multiring", step_overhead_s=1e-6).time_s
    one = hcsim.simulate(topo, "allgather", n, "ring", step_overhead_s=1e-6).time_s
    assert multi == pytest.approx(7 * (1e-6 + n / 8 / 4 / 10e9), rel=1e-12)
    assert one == pytest.approx(7 * (1e-6 + n / 8 / 10e9), rel=1e-12)


def test_rings_that_share_a_nic_get_no_faster_than_one_ring():
    """On one switch each rank has one link: the four rings' parts share it, so the event-driven time is the
    ring's (within the extra transfers' rounding), while the closed form, which assumes disjoint links, is
    optimistic there (as double_ring's)."""
    topo = single_switch(8, 10e9)
    n = 64 << 20
    des = hcsim.simulate(topo, "allgather", n, "multiring").time_s
    ring = hcsim.simulate(topo, "allgather", n, "ring").time_s
    ana = hcsim.simulate(topo, "allgather", n, "multiring", mode="analytical").time_s
    assert des == pytest.approx(ring, rel=1e-9)
    assert ana == pytest.approx(ring / 4, rel=1e-9)
