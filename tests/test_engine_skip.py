"""Ranks that take no part in a run of steps jump past them (des.FlowSimulator._jump) instead
of walking them one by one; the jump must give the walk's run exactly: same finish times, same
per-transfer records, barriers and the end of the schedule respected."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hcsim.engine.des as des
from hcsim.algorithms.registry import CollectiveArgs
from hcsim.algorithms.schedule import Schedule, make_step
from hcsim.engine.des import EngineConfig, FlowSimulator
from hcsim.topology import single_switch


def idle_heavy_schedule(rng, p: int, barriers: bool) -> Schedule:
    """A chain (rank k % p sends to the next) over many steps, so most ranks idle for long runs,
    with an incast every few steps (three senders into one rank) so that flows contend and the
    event loop, not the one-pass contention-free run, does the work."""
    steps = []
    for k in range(int(rng.integers(2 * p, 4 * p))):
        a = k % p
        src, dst = [a], [(a + 1) % p]
        if rng.random() < 0.15:
            sink = int(rng.integers(0, p))
            senders = [r for r in rng.choice(p, 4, replace=False).tolist() if r != sink][:3]
            src += senders
            dst += [sink] * len(senders)
        steps.append(make_step(np.array(src), np.array(dst), rng.integers(1, 5, len(src)) * 100_000,
                               rng.random(len(src)) < 0.3, 0, 1))
    cuts = tuple(sorted({int(x) for x in rng.integers(1, len(steps), 3)})) if barriers else ()
    return Schedule(CollectiveArgs("sendrecv", p, 1), 1, steps, np.ones(1, dtype=np.int64), "chain",
                    barriers=cuts)


def run(sched, p, record=True):
    topo = single_switch(p, 10e9, 1e-6)
    sim = FlowSimulator(topo, topo.npus, sched, EngineConfig(step_overhead_s=0.5e-6, record=record))
    t = sim.run()
    # every record of every step, with its first transfer id: ready, start and end times and the
    # gating predecessor (an id), in step order
    ends = ([(s.k, s.gid0, s.t_ready.tolist(), s.t_start.tolist(), s.t_end.tolist(), s.pred.tolist())
             for s in sorted(sim.done_states, key=lambda s: s.k)] if record else None)
    return t, sim.finish_s.copy(), ends, sim.instants


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), barriers=st.booleans())
def test_jumping_idle_steps_equals_walking_them(seed, barriers):
    rng = np.random.default_rng(seed)
    p = int(rng.integers(18, 40))  # idle runs of p - 1 steps: past SKIP_INDEX_AFTER
    sched = idle_heavy_schedule(rng, p, barriers)
    jumped = run(sched, p)
    saved = des.SKIP_INDEX_AFTER
    des.SKIP_INDEX_AFTER = 10**9  # walk every idle step
    try:
        walked = run(sched, p)
    finally:
        des.SKIP_INDEX_AFTER = saved
    assert jumped[0] == walked[0]
    assert np.array_equal(jumped[1], walked[1])
    assert jumped[2] == walked[2]


def test_the_jump_is_taken_and_agrees_with_the_reference(monkeypatch):
    """On fixed seeds the jump happens (counted) in event-driven runs, and the finish times
    equal the plain reference event loop's (tests/reference_engine.py)."""
    from reference_engine import simulate as reference

    jumps = []
    real = FlowSimulator._jump
    monkeypatch.setattr(FlowSimulator, "_jump", lambda self, *a: jumps.append(1) or real(self, *a))
    contended = 0
    for seed in range(6):
        rng = np.random.default_rng(seed)
        p = 24
        sched = idle_heavy_schedule(rng, p, barriers=False)
        _, finish, _, instants = run(sched, p, record=False)
        contended += instants > 0
        topo = single_switch(p, 10e9, 1e-6)
        assert finish == pytest.approx(reference(topo, sched, 0.5e-6, 0.0), rel=1e-9, abs=1e-15)
    assert contended >= 3 and len(jumps) >= 10
