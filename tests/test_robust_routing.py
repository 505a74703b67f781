"""Routing takes any integer kind: a numpy ECMP seed or node index gives the same routes as
the Python int (issue 12: ``ecmp_seed=np.int64(5)`` overflowed the ECMP hash)."""

import numpy as np
import pytest

import hcsim
from hcsim.topology.builders import leaf_spine
from hcsim.topology.routing import ecmp_index


@pytest.mark.parametrize("kind", [np.int64, np.uint32, np.int32, np.uint64])
def test_numpy_ecmp_seed_routes_as_the_python_int(kind):
    topo = leaf_spine(2, 2, 2, 10e9)
    want = hcsim.simulate(leaf_spine(2, 2, 2, 10e9), "allreduce", 8, "ring", ecmp_seed=5)
    got = hcsim.simulate(topo, "allreduce", 8, "ring", ecmp_seed=kind(5))
    assert got.time_s == want.time_s and type(got.time_s) is float
    analytical = hcsim.simulate(topo, "allreduce", 8, "ring", mode="analytical", ecmp_seed=kind(5))
    assert analytical.time_s == hcsim.simulate(topo, "allreduce", 8, "ring", mode="analytical", ecmp_seed=5).time_s


def test_ecmp_index_takes_numpy_integers():
    for seed in (0, 5, 2**32 - 1):
        want = ecmp_index(3, 7, 4, seed)
        assert ecmp_index(np.int64(3), np.int64(7), np.int64(4), np.uint32(seed)) == want
        assert type(ecmp_index(np.int64(3), 7, 4, np.int64(seed))) is int
