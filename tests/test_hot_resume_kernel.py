"""``_kernels.hot_resume`` against ``hot_build`` from scratch, on random problems.

A resumed recomputation (flows drained, hot resources cooled) must leave every flow at the
rate a filling from scratch of the flows left gives, bit for bit. The cases lean towards the
one-round problems of symmetric phases, where every flow is held by its own cap or by a
resource that saturates with it and the drained flows' resources never saturate: there the
resume keeps the last round as it is, without refilling (the check that allows it is the
subject of these tests).
"""

import numpy as np
import pytest

from hcsim.engine.fairshare import _SAT_RTOL

pytest.importorskip("numba")


def _problem(rng, trial):
    n_res, n_paths, width = int(rng.integers(2, 24)), int(rng.integers(1, 30)), int(rng.integers(1, 5))
    pad = n_res
    kind = trial % 4
    if kind == 0:  # caps well below the resources: one round, every flow held by its cap
        capacity = rng.choice([100.0, 250.0, 400.0], n_res)
        bw = rng.choice([10.0, 10.0, 12.5], n_paths)
    elif kind == 1:  # resources shared evenly at one rate: one round, every resource saturating
        capacity = np.full(n_res, 20.0)
        bw = np.full(n_paths, 25.0)
    elif kind == 2:  # a mix: caps and resources of a few values
        capacity = rng.choice([20.0, 40.0, 400.0], n_res)
        bw = rng.choice([10.0, 20.0, np.inf], n_paths)
    else:  # anything
        capacity = rng.uniform(1, 40, n_res)
        bw = rng.uniform(1, 30, n_paths)
    capacity = np.append(capacity, np.inf)
    path_mat = np.full((n_paths, width), pad, dtype=np.int64)
    for p in range(n_paths):
        k = min(int(rng.integers(1, width + 1)), n_res)  # a path crosses a resource once
        path_mat[p, :k] = rng.choice(n_res, k, replace=False)
    hot = np.append(rng.random(n_res) < (0.6 if trial % 3 else 1.0), False)
    return pad, capacity, path_mat, bw, hot


def _from_scratch(path_mat, slots, paths, hot, capacity, bw, cls, values, n_slots, every):
    from hcsim.engine._kernels import hot_build

    local = np.full(capacity.size, -1, dtype=np.int64)
    rates, n, _ = hot_build(path_mat, slots, paths, hot, capacity, bw, cls, values, local, n_slots, every, _SAT_RTOL)
    return rates, n


@pytest.mark.parametrize("every", [1, 2, 8])
def test_resumes_equal_fillings_from_scratch(every):
    from hcsim.engine._kernels import hot_build, hot_resume

    rng = np.random.default_rng(100 + every)
    resumed = 0
    for trial in range(400):
        pad, capacity, path_mat, bw, hot = _problem(rng, trial)
        values, cls = np.unique(bw, return_inverse=True)
        n = int(rng.integers(1, 50))
        paths = rng.integers(0, path_mat.shape[0], n)
        slots = np.arange(n, dtype=np.int64)
        local = np.full(pad + 1, -1, dtype=np.int64)
        with np.errstate(invalid="ignore"):
            rates, _, state = hot_build(path_mat, slots, paths, hot, capacity, bw, cls, values, local, n, every,
                                        _SAT_RTOL)
        rate = dict(enumerate(rates.tolist()))
        left = list(range(n))
        hot = hot.copy()
        while len(left) > 1:
            k = int(rng.integers(1, max(2, len(left) // 3)))
            gone = sorted(rng.choice(left, k, replace=False).tolist())
            left = [s for s in left if s not in set(gone)]
            for s in gone:
                del rate[s]
            if rng.random() < 0.3:  # some hot resources cool
                hot[rng.choice(pad, int(rng.integers(1, 3)))] = False
            demand = hot.astype(float)
            hot_at = np.full(pad + 1, 0.5)
            with np.errstate(invalid="ignore"):
                out_slots, out_rates, n_live, *records = hot_resume(
                    np.array(gone, dtype=np.int64), demand, hot_at, *state[:17], *state[17:], _SAT_RTOL)
            state = (*state[:17], *records)
            rate.update(zip(out_slots.tolist(), out_rates.tolist(), strict=True))
            idx = np.array(left, dtype=np.int64)
            with np.errstate(invalid="ignore"):
                want, n_want = _from_scratch(path_mat, idx, paths[idx], hot, capacity, bw, cls, values, n, every)
            got = np.array([rate[s] for s in left])
            assert n_live == n_want, trial
            assert np.array_equal(got, want), (trial, got, want)
            resumed += 1
    assert resumed > 1000


@pytest.mark.parametrize("resync", [2, 3, 5])
def test_resyncs_resume_to_fillings_from_scratch(monkeypatch, resync):
    """The periodic exact resummation of the demands (every ``resync`` recomputations here)
    resumes the kept problem when no flow started since the last recomputation and no resource
    is hot outside it: at every recomputation the rates are those of a filling from scratch,
    and the run is the numpy engine's, bit for bit."""
    from hcsim.engine import des, fairshare
    from tests.test_engine_properties import random_schedule, random_topology, run
    from tests.test_hot_kernel import contended_sendrecv, rates_from_scratch

    monkeypatch.setattr(des, "_RESYNC_EVERY", resync)
    checked = []
    recompute = des.Fabric._recompute_compiled

    def checking(fabric, kernels, now):
        recompute(fabric, kernels, now)
        active = np.flatnonzero(fabric.s_active)
        assert np.array_equal(fabric.s_rate[active], rates_from_scratch(fabric, active))
        checked.append(active.size)

    rng = np.random.default_rng(resync)
    cases = []
    for _ in range(6):
        cases.append(contended_sendrecv(rng))
    for _ in range(6):
        topo = random_topology(rng)
        cases.append((topo, random_schedule(rng, topo.num_npus)))
    for topo, sched in cases:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(fairshare, "KERNEL_PAIRS", 0)  # every recomputation compiled
            mp.setattr(des.Fabric, "_recompute_compiled", checking)
            t_fast, ends_fast = run(topo, sched, "ecmp")
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(fairshare, "_KERNEL", False)  # the numpy form
            mp.setattr(fairshare, "_HOT_KERNEL", False)
            t_np, ends_np = run(topo, sched, "ecmp")
        assert t_fast == t_np
        assert np.array_equal(ends_fast, ends_np)
    assert len(checked) > 100
