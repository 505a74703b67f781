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
