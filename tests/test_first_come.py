"""The contention-free pass's reduction units, first come first served, computed in numpy rounds
(hcsim.engine.des._first_come) give the same bits as one transfer at a time."""

import math

import numpy as np
import pytest

from hcsim.engine.des import _ROUND_MIN, _first_come


def _one_by_one(dst, here, cost):
    ends, free = np.empty(len(dst)), {}
    for i in range(len(dst)):
        d = int(dst[i])
        ends[i] = max(free.get(d, -math.inf), here[i]) + cost[i]
        free[d] = ends[i]
    return ends


@pytest.mark.parametrize("seed", range(40))
def test_rounds_match_the_loop_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    dst = rng.integers(0, int(rng.integers(1, 400)), n)
    here = rng.random(n) * 10.0 ** -int(rng.integers(0, 7))
    if seed % 2:  # ties in arrival: service by index
        here = np.round(here, 4)
    cost = rng.random(n) * 10.0 ** -int(rng.integers(3, 8))
    order = np.lexsort((np.arange(n), here, dst))
    got, looped = _first_come(dst[order], here[order], cost[order])
    assert np.array_equal(got.view(np.int64), _one_by_one(dst[order], here[order], cost[order]).view(np.int64))
    assert 0 <= looped < n


def test_many_destinations_run_in_rounds_and_one_destination_in_a_loop():
    n = 4 * _ROUND_MIN
    here, cost = np.linspace(0.0, 1.0, n), np.full(n, 0.5)
    _, looped = _first_come(np.arange(n), here, cost)  # one reduction each: one round
    assert looped == 0
    ends, looped = _first_come(np.zeros(n, dtype=np.int64), here, cost)  # all queue on one unit
    assert looped == n - 1
    assert ends[-1] == pytest.approx(0.5 * n)  # back to back from the first arrival at 0
