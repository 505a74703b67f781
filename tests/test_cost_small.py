"""Closed forms with a plain-Python path for small p (a sweep prices hundreds of sizes) give
the numpy form's result bit for bit."""

import numpy as np

from hcsim.algorithms import nonuniform, pairwise
from hcsim.algorithms.cost import AlphaBetaGamma
from hcsim.algorithms.registry import make_args


def _abg(rng):
    return AlphaBetaGamma(float(rng.choice([0.0, 1e-6, 3.3e-7, 2.5e-5])),
                          float(rng.choice([1 / 25e9, 1 / 18.3e9, 1 / 1e8])), 0.0)


def test_binomial_scatter_small_equals_numpy(monkeypatch):
    rng = np.random.default_rng(0)
    cases = []
    for p in range(2, 65):
        for t in range(6):
            n = int(rng.integers(p, 1 << 34)) if t % 2 else p * int(rng.integers(1, 1 << 20))
            cases.append((p, make_args("scatter", p, n, int(rng.integers(0, p))), _abg(rng)))
    small = [nonuniform._binomial_time(p, a, s, m) for p, a, m in cases for s in (-1, 1)]
    monkeypatch.setattr(nonuniform, "_SMALL_P", 0)  # the numpy form
    assert small == [nonuniform._binomial_time(p, a, s, m) for p, a, m in cases for s in (-1, 1)]


def test_pairwise_alltoallv_small_equals_numpy():
    rng = np.random.default_rng(1)
    for p in range(2, 65, 3):
        for t in range(4):
            if t % 2:
                mat = rng.integers(0, 1 << int(rng.integers(1, 40)), (p, p))
                mat[0, 1] += 1
                a = make_args("alltoallv", p, 1, 0, (), (), mat)
            else:
                a = make_args("alltoallv", p, int(rng.integers(1, 1 << 33)))
            m = _abg(rng)
            sizes, i, enter = np.asarray(a.send_matrix, dtype=np.int64), np.arange(p), np.zeros(p)
            for k in range(1, p):
                to = (i + k) % p
                end = np.maximum(enter, enter[to]) + (m.alpha_s + sizes[i, to] * m.beta_s_per_B)
                enter = np.maximum(end, end[(i - k) % p])
            assert pairwise.cost_alltoallv(a, m) == float(enter.max())
