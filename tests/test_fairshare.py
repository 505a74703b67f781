"""Max-min fair sharing against hand-worked allocations."""

import numpy as np
import pytest

from hcsim.engine.fairshare import max_min_rates


def rates(flows, caps):
    pf, pr = [], []
    for f, res in enumerate(flows):
        pf += [f] * len(res)
        pr += list(res)
    return max_min_rates(np.array(pf), np.array(pr), np.array(caps, dtype=float), len(flows))


def test_k_flows_on_one_link_get_a_kth_each():
    for k in (1, 2, 3, 7):
        assert rates([[0]] * k, [21.0]) == pytest.approx([21.0 / k] * k)


def test_bottlenecked_flow_frees_capacity_for_the_others():
    # link 0 (30) shared by three flows; flow 2 also crosses link 1 (5): it gets 5, others 12.5
    assert rates([[0], [0], [0, 1]], [30.0, 5.0]) == pytest.approx([12.5, 12.5, 5.0])


def test_classic_parking_lot():
    # links A, B each 10; flow 0 crosses both, flow 1 only A, flow 2 only B: all get 5
    assert rates([[0, 1], [0], [1]], [10.0, 10.0]) == pytest.approx([5.0, 5.0, 5.0])
    # B has 20: flow 2 takes the 15 that flow 0 (limited by A) leaves
    assert rates([[0, 1], [0], [1]], [10.0, 20.0]) == pytest.approx([5.0, 5.0, 15.0])


def test_no_resource_over_capacity_and_every_flow_bottlenecked():
    rng = np.random.default_rng(1)
    for _ in range(50):
        n_res, n_flows = 6, 9
        caps = rng.uniform(1, 10, n_res)
        flows = [sorted(set(rng.choice(n_res, rng.integers(1, 4)).tolist())) for _ in range(n_flows)]
        r = rates(flows, caps)
        load = np.zeros(n_res)
        for f, res in enumerate(flows):
            load[res] += r[f]
        assert (load <= caps * (1 + 1e-9)).all()
        # max-min: each flow crosses a saturated resource where it has the largest rate
        for f, res in enumerate(flows):
            ok = [abs(load[x] - caps[x]) < 1e-9 * caps[x] and
                  r[f] >= max(r[g] for g, rg in enumerate(flows) if x in rg) - 1e-9 for x in res]
            assert any(ok)


def test_counting_rounds_equal_the_plain_progressive_filling_bit_for_bit():
    """max_min_rates keeps per-resource counts between rounds; the plain form recounts every
    live pair each round. Same arithmetic in the same order: identical rates, also with
    infinite resources and with hundreds of distinct rates."""
    from hcsim.engine.fairshare import max_min_rates_reference

    rng = np.random.default_rng(7)
    for trial in range(400):
        n_res, n_flows = int(rng.integers(1, 40)), int(rng.integers(1, 300 if trial % 10 == 0 else 40))
        caps = (rng.choice([1.0, 3.0, 10.0, 25e9, 18.3e9], n_res) if trial % 2 else rng.uniform(1, 10, n_res))
        caps[rng.random(n_res) < 0.1] = np.inf
        caps[0] = 7.0  # every flow crosses at least one finite resource
        pf, pr = [], []
        for f in range(n_flows):
            res = set(rng.choice(n_res, int(rng.integers(1, 5))).tolist()) | {0} if rng.random() < 0.2 else \
                set(rng.choice(n_res, int(rng.integers(1, 5))).tolist())
            if np.isinf(caps[list(res)]).all():
                res.add(0)
            pf += [f] * len(res)
            pr += sorted(res)
        pf, pr = np.array(pf), np.array(pr)
        assert np.array_equal(max_min_rates(pf, pr, caps, n_flows), max_min_rates_reference(pf, pr, caps, n_flows))


def test_compiled_kernel_and_numpy_give_the_same_rates_on_large_problems(monkeypatch):
    """Problems above KERNEL_PAIRS go to the numba kernel when it is installed: its rates must
    be the numpy form's bit for bit (and the numpy form is always there as the fallback)."""
    from hcsim.engine import fairshare

    rng = np.random.default_rng(11)
    cases = []
    for _ in range(6):
        n_flows, n_res = int(rng.integers(1500, 4000)), int(rng.integers(50, 900))
        pf = np.repeat(np.arange(n_flows), 4)
        pr = rng.integers(0, n_res, pf.size)
        caps = rng.choice([25e9, 18.3e9, 200e9, 7.5e9], n_res)
        cases.append((pf, pr, caps, n_flows))
    compiled = [max_min_rates(*c) for c in cases]
    monkeypatch.setattr(fairshare, "_KERNEL", False)  # the numpy form
    for c, got in zip(cases, compiled, strict=True):
        assert c[0].size >= fairshare.KERNEL_PAIRS
        assert np.array_equal(got, max_min_rates(*c))
        assert np.array_equal(got, fairshare.max_min_rates_reference(*c))
