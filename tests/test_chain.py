"""Pipelined chain broadcast and reduce (hcsim/algorithms/chain.py) and the engine's streamed
schedules (Schedule.streamed, Schedule.protocol_bytes): hand-worked timelines."""

from __future__ import annotations

import dataclasses

import pytest

import hcsim
from hcsim.algorithms.chain import MAX_SEGMENTS, MIN_SEGMENT_BYTES, segments
from hcsim.algorithms.registry import build_schedule
from hcsim.engine.regimes import MessageRegimes
from hcsim.errors import HcsimError
from hcsim.topology import full_mesh, single_switch
from hcsim.verify import verify

KIB = 1 << 10


def test_segments_grow_from_one_to_the_cap():
    assert segments(0) == 1 and segments(2 * MIN_SEGMENT_BYTES - 1) == 1
    assert segments(2 * MIN_SEGMENT_BYTES) == 2
    assert segments(MAX_SEGMENTS * MIN_SEGMENT_BYTES) == MAX_SEGMENTS
    assert segments(1 << 40) == MAX_SEGMENTS


@pytest.mark.parametrize("collective", ["broadcast", "reduce"])
@pytest.mark.parametrize("p,n,root", [(2, 5, 1), (3, 200 * KIB + 7, 2), (8, 3_000_001, 5), (13, 1 << 20, 0)])
def test_every_schedule_passes_the_semantic_verifier(collective, p, n, root):
    verify(build_schedule(collective, "chain", p, n, root=root))


def test_three_ranks_two_segments_by_hand():
    """3 ranks on a full mesh at 1 GB/s, 2 us a step, 1 us of latency; 128 KiB = two 64 KiB segments.
    Step 0: hop 0 carries segment 0: 2 + 1 us, then 65.536 us. Step 1: hop 1 carries segment 0 (it
    pays 3 us) while hop 0 carries segment 1 (a continuation: no overhead, no latency); the step
    ends with the slower, 3 + 65.536 us. Step 2: hop 1 carries segment 1, 65.536 us.
    Total 2 x 3 + 3 x 65.536 = 202.608 us: the closed form's (p-1) a + ((p-2) s0 + n) beta."""
    topo = full_mesh(3, 1e9, 1e-6)
    r = hcsim.simulate(topo, "broadcast", 128 * KIB, "chain", step_overhead_s=2e-6)
    assert r.time_us == pytest.approx(2 * 3 + 3 * 65.536, rel=1e-12)
    ana = hcsim.simulate(topo, "broadcast", 128 * KIB, "chain", step_overhead_s=2e-6, mode="analytical")
    assert ana.time_us == pytest.approx(r.time_us, rel=1e-12)


def test_without_streaming_every_segment_would_pay_the_step():
    """The same schedule with ``streamed=False`` pays 3 us in each of its 3 steps: 9 + 3 x 65.536 us."""
    topo = full_mesh(3, 1e9, 1e-6)
    sched = build_schedule("broadcast", "chain", 3, 128 * KIB)
    plain = dataclasses.replace(sched, streamed=False)
    r = hcsim.simulate(topo, "broadcast", 128 * KIB, lambda args: plain, step_overhead_s=2e-6)
    assert r.time_us == pytest.approx(3 * 3 + 3 * 65.536, rel=1e-12)


def test_large_buffers_stream_at_the_link_rate():
    """8 ranks, 8 GiB: 1,024 segments; the fill is 6 segments, so the time is within (p-2)/1024 of one
    buffer over one link, where the unsegmented chain takes 7 buffers' time and a star (one link
    from the root) 7 too."""
    topo = single_switch(8, 100e9)
    n = 8 << 30
    chain = hcsim.simulate(topo, "broadcast", n, "chain").time_s
    assert chain == pytest.approx(n / 100e9 * (1 + 6 / 1024), rel=1e-9)
    assert hcsim.simulate(topo, "broadcast", n, "ring", mode="analytical").time_s == pytest.approx(7 * n / 100e9)
    assert hcsim.simulate(topo, "broadcast", n, "star").time_s == pytest.approx(7 * n / 100e9, rel=1e-6)


def test_the_protocol_is_chosen_by_the_whole_call():
    """Regimes: messages below 1 MiB at half the rate with 5 us each, from 1 MiB full rate and no overhead.
    On 4 ranks the chain's protocol size is n // 3. A 3 MiB chain (48 segments of 64 KiB) runs in the
    upper regime: 3 MiB + 2 x 64 KiB over 1 GB/s; a 3 MiB - 3 B one in the lower one: 5 us on each of
    the 3 hops' first segments, every byte charged twice (47 segments, the largest 66,931 B)."""
    regimes = MessageRegimes(from_bytes=(0, 1 << 20), overhead_s=(5e-6, 0.0), efficiency=(0.5, 1.0))
    topo = single_switch(4, 1e9)
    topo.defaults = dataclasses.replace(topo.defaults, message_regimes=regimes)
    n = 3 << 20
    assert build_schedule("broadcast", "chain", 4, n).protocol_bytes == 1 << 20
    big = hcsim.simulate(topo, "broadcast", n, "chain").time_s
    assert big == pytest.approx((n + 2 * 64 * KIB) / 1e9, rel=1e-9)
    small = hcsim.simulate(topo, "broadcast", n - 3, "chain").time_s
    assert small == pytest.approx(3 * 5e-6 + 2 * (n - 3 + 2 * 66931) / 1e9, rel=1e-9)


def test_a_chain_cannot_be_a_level_of_a_composed_algorithm():
    from hcsim.topology import tiered_mesh

    topo = tiered_mesh((2, 4), (100e9, 10e9), (1e-6, 5e-6))
    with pytest.raises(HcsimError, match="level1 algorithm for broadcast = 'chain'"):
        hcsim.simulate(topo, "broadcast", 1 << 20, "ring/chain")


def test_ccl_buffer_loops_keep_streaming_inside_each_loop():
    """A job's chain broadcast through a 4 MiB buffer (two loops, a barrier between them) costs what simulate
    gives (each loop priced alone): each loop's later segments stream, the first segment after the barrier
    pays its step again."""
    from helpers import job_through_ccl_buffer

    job, alone, sched = job_through_ccl_buffer(full_mesh(4, 10e9, 1e-6), "broadcast", "chain", 8 << 20, 4 << 20)
    assert job == pytest.approx(alone, rel=1e-9)
    assert sched.streamed and sched.barriers and len(sched.protocol_bytes) == len(sched.steps)


@pytest.mark.parametrize("field, value", [("streamed", "no"), ("protocol_bytes", -5), ("protocol_bytes", float("nan")),
                                          ("protocol_bytes", (1, 2))])
def test_the_new_schedule_fields_are_checked(field, value):
    sched = build_schedule("allreduce", "ring", 4, 100 << 10)
    bad = dataclasses.replace(sched, **{field: value})
    with pytest.raises(HcsimError, match=f"schedule.{field} = "):
        hcsim.simulate(single_switch(4, 1e9), "allreduce", 100 << 10, lambda args: bad)
