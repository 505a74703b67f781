"""The engine's bottleneck classes, kept up to date as paths are added, are what ``np.unique`` of
every path's bottleneck gives (values and each path's class)."""

import numpy as np
import pytest

import hcsim
from hcsim.engine.des import Fabric
from tests.test_routing_structure import random_topology


@pytest.mark.parametrize("seed", range(30))
def test_bottleneck_classes_grow_as_np_unique_gives_them(seed):
    rng = np.random.default_rng(seed)
    topo = random_topology(["random", "leaf_spine", "a2_pod", "torus"][seed % 4], rng)
    net = topo.compiled()
    fabric = Fabric(net)
    n = topo.num_npus
    pairs = [(s, d) for s in range(n) for d in range(n) if s != d]
    rng.shuffle(pairs)
    k = 0
    while k < len(pairs):
        step = int(rng.integers(1, 6))
        for s, d in pairs[k:k + step]:
            try:
                net.route(s, d, str(rng.choice(["ecmp", "spray"])), 0, 1, bool(rng.integers(2)))
            except hcsim.errors.TopologyError:  # unreachable: nothing added
                pass
        k += step
        fabric._refresh_paths()
        values, classes = np.unique(net.paths.arrays()[4], return_inverse=True)
        assert np.array_equal(fabric._bw_values, values)
        assert np.array_equal(fabric._path_bw_class, classes)
        assert fabric._path_bw_class.dtype == classes.dtype


@pytest.mark.parametrize("seed", range(20))
def test_path_matrix_grown_in_place_equals_a_fresh_conversion(seed):
    """Paths added between calls with the same pad (the engine's case): rows written after the
    old ones, widths growing now and then, the buffer reused or reallocated."""
    from hcsim.topology.model import PathStore

    rng = np.random.default_rng(seed)
    store, fresh = PathStore(), PathStore()
    views = []
    for chunk in range(12):
        for _ in range(int(rng.integers(0, 9))):
            res = [int(x) for x in rng.integers(0, 50, size=int(rng.integers(0, 2 + chunk // 3)))]
            store.add(res, 0.0, False, 1.0)
            fresh.add(res, 0.0, False, 1.0)
        got = store.matrix(99)
        fresh._matrix = None
        want = fresh.matrix(99)
        assert got.shape == want.shape and np.array_equal(got, want)
        views.append((got, got.copy()))
    for view, copy in views:  # a view handed out earlier still reads what it read then
        assert np.array_equal(view, copy)
