"""The fabric's compiled starts and drains (``_kernels.start_flows``, ``drain_due``): the same
near set, drains and demand sums as the numpy form, so the same run to the last bit."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hcsim.engine import EngineConfig, FlowSimulator, des, fairshare
from tests.test_drain_index import _Checked
from tests.test_engine_properties import random_schedule, random_topology

pytest.importorskip("numba")


def _run(topo, sched, cfg, fabric_cls, compiled):
    with pytest.MonkeyPatch.context() as mp:
        if compiled:
            mp.setattr(fairshare, "KERNEL_PAIRS", 0)  # every recomputation compiled, and so the book
        else:
            mp.setattr(fairshare, "_KERNEL", False)  # the numpy form throughout
            mp.setattr(fairshare, "_HOT_KERNEL", False)
        fabric = fabric_cls(topo.compiled(), cfg.max_flow_updates, cfg.max_work)
        sim = FlowSimulator(topo, topo.npus, sched, cfg, fabric=fabric)
        t = sim.run()
    return t, sim.finish_s.copy(), fabric


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_compiled_book_drains_what_a_full_scan_drains_and_equals_numpy(seed):
    rng = np.random.default_rng(seed)
    topo = random_topology(rng)
    sched = random_schedule(rng, topo.num_npus)
    cfg = EngineConfig(step_overhead_s=0.5e-6, routing=str(rng.choice(["ecmp", "spray"])))
    t, finish, fabric = _run(topo, sched, cfg, _Checked, True)
    t_np, finish_np, plain = _run(topo, sched, cfg, des.Fabric, False)
    assert plain._book is None
    assert t == t_np
    assert np.array_equal(finish, finish_np, equal_nan=True)
    if fabric.full_recomputes:
        assert fabric._book is not None


def test_compiled_book_on_a_pod_gives_the_numpy_run():
    """A 64-NPU pod allreduce (thousands of flows, mesh and NHR phases): the same time, bit for
    bit, with every recomputation, start and drain compiled as with none."""
    import hcsim
    from hcsim.topology import load_topology

    topo = load_topology("atlas900-a2-pod", servers=8, servers_per_leaf=2)
    used = []
    start = des.Fabric.add_flows

    def watched(fabric, *args):
        used.append(fabric._book is not None)
        return start(fabric, *args)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fairshare, "KERNEL_PAIRS", 0)
        mp.setattr(des.Fabric, "add_flows", watched)
        fast = hcsim.simulate(topo, "allreduce", "64MiB", "auto", max_work=None)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fairshare, "_KERNEL", False)
        mp.setattr(fairshare, "_HOT_KERNEL", False)
        plain = hcsim.simulate(topo, "allreduce", "64MiB", "auto", max_work=None)
    assert sum(used) > 10
    assert fast.time_s == plain.time_s
