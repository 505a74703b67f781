"""The compiled recomputation (``_kernels.hot_max_min_kernel``) against the plain forms.

The engine's recomputation shares the hot resources max-min among the flows crossing them,
each capped at its path's bottleneck. The compiled form finds those flows itself and groups
the caps of equal bottlenecks; it must give the numpy form's rates bit for bit, and so the
same run, to the last bit, as the numpy engine (and the full recomputation to 1e-9).
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hcsim.engine import EngineConfig, FlowSimulator, fairshare
from hcsim.engine.fairshare import _SAT_RTOL, max_min_rates_reference
from tests.test_engine_properties import random_schedule, random_topology, run


def contended_sendrecv(rng):
    """A random leaf-spine and one step of random sends across it (its uplinks contended)."""
    from hcsim.algorithms import CollectiveArgs, Schedule, make_step
    from hcsim.topology import leaf_spine

    topo = leaf_spine(int(rng.integers(2, 5)), int(rng.integers(2, 6)), int(rng.integers(1, 3)), 25e9, 1e-6,
                      oversubscription=float(rng.choice([1.0, 2.0, 3.0])))
    p = topo.num_npus
    n = int(rng.integers(p, 4 * p))
    src = rng.integers(0, p, n)
    dst = (src + rng.integers(1, p, n)) % p
    steps = [make_step(src, dst, rng.integers(1, 40, n) * 100_000, np.zeros(n, dtype=bool), 0, 1)]
    return topo, Schedule(CollectiveArgs("sendrecv", p, 1), 1, steps, np.ones(1, dtype=np.int64), "random")


def rates_from_scratch(fabric, active):
    """The compiled max-min filling of the fabric's ``active`` slots from scratch."""
    from hcsim.engine import _kernels

    scratch = np.full(fabric.pad + 1, -1, dtype=np.int64)
    rates, _ = _kernels.hot_max_min_kernel(
        fabric._path_mat, fabric.s_path[active], fabric.res_demand > fabric._hot_Bps, fabric.capacity,
        fabric._path_bw, fabric._path_bw_class, fabric._bw_values, scratch, _SAT_RTOL)
    return rates

pytest.importorskip("numba")


def plain_recomputation(path_mat, paths, hot, capacity, bw):
    """What ``Fabric._recompute_rates`` asks of max-min, in the plainest form."""
    rates = bw[paths].copy()
    flows = [i for i, p in enumerate(paths) if hot[path_mat[p]].any()]
    if not flows:
        return rates, 0
    hot_ids = np.flatnonzero(hot)
    local = {int(r): j for j, r in enumerate(hot_ids)}
    pf, pr = [], []
    for k, i in enumerate(flows):
        for r in path_mat[paths[i]]:
            if hot[r]:
                pf.append(k)
                pr.append(local[int(r)])
        pf.append(k)  # the flow's own cap: its path's bottleneck
        pr.append(hot_ids.size + k)
    caps = np.concatenate([capacity[hot_ids], bw[paths[flows]]])
    with np.errstate(invalid="ignore"):  # every share infinite: inf - inf on the way out
        rates[flows] = max_min_rates_reference(np.array(pf), np.array(pr), caps, len(flows))
    return rates, len(flows)


def test_kernel_equals_the_plain_recomputation_bit_for_bit():
    from hcsim.engine._kernels import hot_max_min_kernel

    rng = np.random.default_rng(3)
    for trial in range(300):
        n_res, n_paths, width = int(rng.integers(2, 30)), int(rng.integers(1, 40)), int(rng.integers(1, 6))
        pad = n_res
        capacity = np.append(rng.choice([10.0, 25.0, 7.5, 18.3, 1e9, np.inf], n_res) if trial % 2
                             else rng.uniform(1, 30, n_res), np.inf)
        path_mat = np.full((n_paths, width), pad, dtype=np.int64)
        for p in range(n_paths):
            k = int(rng.integers(1, width + 1))
            path_mat[p, :k] = rng.choice(n_res, k, replace=False) if k <= n_res else rng.choice(n_res, k)
        # a path's bottleneck: a few distinct values, as on real fabrics (sometimes none finite)
        bw = rng.choice([5.0, 10.0, 12.5, np.inf], n_paths) if trial % 3 else rng.uniform(1, 30, n_paths)
        hot = np.append(rng.random(n_res) < (0.3 if trial % 4 else 1.0), False)
        paths = rng.integers(0, n_paths, int(rng.integers(1, 60)))
        values, cls = np.unique(bw, return_inverse=True)
        local = np.full(pad + 1, -1, dtype=np.int64)
        got, n = hot_max_min_kernel(path_mat, paths, hot, capacity, bw, cls, values, local, _SAT_RTOL)
        want, n_want = plain_recomputation(path_mat, paths, hot, capacity, bw)
        assert n == n_want
        assert np.array_equal(got, want), trial
        assert (local == -1).all()  # the scratch is left clean


@settings(max_examples=120, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), routing=st.sampled_from(["ecmp", "spray"]),
       every=st.sampled_from([1, 2, 8]))
def test_compiled_engine_equals_the_numpy_engine_bit_for_bit(seed, routing, every):
    """Random small cases, the compiled recomputation at every instant (resumed where flows
    only drained, from states kept every ``every`` rounds) against the numpy one (identical
    times), and against full recomputation over every resource (1e-9)."""
    rng = np.random.default_rng(seed)
    topo = random_topology(rng)
    sched = random_schedule(rng, topo.num_npus)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fairshare, "KERNEL_PAIRS", 0)  # every recomputation compiled
        mp.setattr(fairshare, "CHECKPOINT_EVERY", every)
        t_fast, ends_fast = run(topo, sched, routing)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fairshare, "_KERNEL", False)  # the numpy form
        mp.setattr(fairshare, "_HOT_KERNEL", False)
        t_np, ends_np = run(topo, sched, routing)
    assert t_fast == t_np
    assert np.array_equal(ends_fast, ends_np)
    t_full, ends_full = run(topo, sched, routing, full=True)
    assert t_fast == pytest.approx(t_full, rel=1e-9)
    assert ends_fast == pytest.approx(ends_full, rel=1e-9)


@pytest.mark.parametrize("every", [1, 4])
def test_a_resumed_filling_equals_a_filling_from_scratch(monkeypatch, every):
    """At every recomputation the engine resumes, the rates it leaves on the flows are those a
    filling from scratch of the same flows gives, bit for bit (random contended cases: many
    flows of random sizes on oversubscribed leaf-spines, so flows drain one after another)."""
    from hcsim.engine import des

    monkeypatch.setattr(fairshare, "KERNEL_PAIRS", 0)
    monkeypatch.setattr(fairshare, "CHECKPOINT_EVERY", every)
    checked = []
    resume = des.Fabric._recompute_compiled

    def checking(fabric, kernels, now):
        resumed = fabric._hot is not None and not fabric._hot_started
        resume(fabric, kernels, now)
        if resumed:
            active = np.flatnonzero(fabric.s_active)
            assert np.array_equal(fabric.s_rate[active], rates_from_scratch(fabric, active))
            checked.append(active.size)

    monkeypatch.setattr(des.Fabric, "_recompute_compiled", checking)
    rng = np.random.default_rng(every)
    for _ in range(12):
        run(*contended_sendrecv(rng), "ecmp")
    assert len(checked) > 50


@pytest.mark.parametrize("every", [1, 8])
def test_symmetric_phases_resume_to_the_numpy_engine_bit_for_bit(monkeypatch, every):
    """Phases where every flow runs at one rate (a mesh inside servers: one filling round)
    and flows of different sizes drain one by one, cooling their links: the resumed round
    gives the numpy engine's times bit for bit."""
    from hcsim.algorithms import CollectiveArgs, Schedule, make_step
    from hcsim.topology import leaf_spine, single_switch

    rng = np.random.default_rng(11)
    cases = [single_switch(8, 25e9, 1e-6), single_switch(6, 10e9, 0.0, injection_Bps=15e9),
             leaf_spine(2, 4, 1, 25e9, 1e-6, oversubscription=2.0)]
    for topo in cases:
        p = topo.num_npus
        src, dst = np.divmod(np.arange(p * p), p)
        keep = src != dst
        src, dst = src[keep], dst[keep]
        steps = [make_step(src, dst, rng.integers(1, 6, src.size) * 1_000_000, np.zeros(src.size, dtype=bool), 0, 1)]
        sched = Schedule(CollectiveArgs("sendrecv", p, 1), 1, steps, np.ones(1, dtype=np.int64), "mesh")
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(fairshare, "KERNEL_PAIRS", 0)
            mp.setattr(fairshare, "CHECKPOINT_EVERY", every)
            t_fast, ends_fast = run(topo, sched, "ecmp")
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(fairshare, "_KERNEL", False)
            mp.setattr(fairshare, "_HOT_KERNEL", False)
            t_np, ends_np = run(topo, sched, "ecmp")
        assert t_fast == t_np
        assert np.array_equal(ends_fast, ends_np)


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), every=st.sampled_from([1, 8]))
def test_compiled_engine_equals_the_straightforward_reference(seed, every):
    """The engine with every recomputation compiled and resumed where it can be, against the
    plain-Python event loop with textbook max-min at every event (tests/reference_engine.py):
    every rank's finish time to 1e-9."""
    from reference_engine import simulate as reference

    from tests.test_engine_properties import sparse_schedule

    rng = np.random.default_rng(seed)
    topo = random_topology(rng)
    sched = (random_schedule if seed % 2 else sparse_schedule)(rng, topo.num_npus)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fairshare, "KERNEL_PAIRS", 0)
        mp.setattr(fairshare, "CHECKPOINT_EVERY", every)
        sim = FlowSimulator(topo, topo.npus, sched, EngineConfig(step_overhead_s=0.5e-6))
        sim.run()
    assert sim.finish_s == pytest.approx(reference(topo, sched, 0.5e-6, 0.0), rel=1e-9, abs=1e-15)
