"""The engine's near set of flows (the slots that may drain soon) finds exactly the flows a full
scan of every slot finds, and its earliest drain time is the true one, on random contended runs."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hcsim.engine import EngineConfig, FlowSimulator, des
from tests.test_engine_properties import random_schedule, random_topology


class _Checked(des.Fabric):
    """A fabric that checks, at every instant and next-time query, what the near set stands for."""

    checks = 0

    def next_time(self):
        t = super().next_time()
        assert self._min_end == float(self.s_end.min())
        return t

    def _drain(self, now, tol):
        want = np.flatnonzero(self.s_end <= now + tol)
        before = self.s_active.copy()
        super()._drain(now, tol)
        got = np.flatnonzero(before & ~self.s_active)
        assert got.tolist() == want.tolist()
        _Checked.checks += 1

    def instant(self, now):
        super().instant(now)
        near = self._near
        assert np.unique(near).size == near.size
        assert (np.flatnonzero(self.s_near) == np.sort(near)).all()
        due = np.flatnonzero(self.s_end <= self._near_T)
        assert np.isin(due, near).all()


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_near_set_drains_what_a_full_scan_drains(seed):
    rng = np.random.default_rng(seed)
    topo = random_topology(rng)
    sched = random_schedule(rng, topo.num_npus)
    cfg = EngineConfig(step_overhead_s=0.5e-6, routing=str(rng.choice(["ecmp", "spray"])))
    fabric = _Checked(topo.compiled(), cfg.max_flow_updates, cfg.max_work)
    t = FlowSimulator(topo, topo.npus, sched, cfg, fabric=fabric).run()
    plain = FlowSimulator(topo, topo.npus, sched, cfg, fabric=des.Fabric(topo.compiled(), cfg.max_flow_updates))
    assert t == plain.run()  # the same event-driven run without the checks


def test_near_set_over_many_flows():
    """A 64-server pod allreduce: thousands of flows, the near set rebuilt many times."""
    import hcsim
    from hcsim.topology import load_topology

    _Checked.checks = 0
    topo = load_topology("atlas900-a2-pod", servers=8, servers_per_leaf=2)
    real = des.Fabric
    des.Fabric = _Checked
    try:
        r = hcsim.simulate(topo, "allreduce", "64MiB", "auto", max_work=None)
    finally:
        des.Fabric = real
    assert _Checked.checks > 10
    assert r.time_us == hcsim.simulate(topo, "allreduce", "64MiB", "auto", max_work=None).time_us
