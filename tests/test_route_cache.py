"""The per-node search cache replays the pairwise route search exactly (same paths, same order)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hcsim.topology import leaf_spine, torus
from hcsim.topology.io import load_topology
from hcsim.topology.routing import SearchCache, all_shortest_paths


def _check(net, pairs, max_nodes=8192):
    cache = SearchCache(net.out_adj, net.in_adj, max_nodes=max_nodes)
    for a, b in pairs:
        assert cache.all_shortest_paths(a, b) == all_shortest_paths(net.out_adj, net.in_adj, a, b)


def test_cache_equals_pairwise_search_on_an_a2_pod():
    net = load_topology("atlas900-a2-pod", servers=8, servers_per_leaf=2).compiled()
    rng = np.random.default_rng(1)
    n = len(net.node_names)
    pairs = [tuple(int(x) for x in rng.choice(n, 2, replace=False)) for _ in range(600)]
    _check(net, pairs)
    _check(net, pairs, max_nodes=3)  # eviction changes nothing but the work


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(["leaf_spine", "torus", "a3"]))
def test_cache_equals_pairwise_search_on_random_pairs(seed, kind):
    rng = np.random.default_rng(seed)
    if kind == "leaf_spine":
        topo = leaf_spine(int(rng.integers(2, 5)), int(rng.integers(1, 5)), int(rng.integers(1, 4)), 1e9)
    elif kind == "torus":
        topo = torus((int(rng.integers(2, 5)), int(rng.integers(2, 5))), 1e9)
    else:
        topo = load_topology("atlas900-a3-superpod", servers=2)
    net = topo.compiled()
    n = len(net.node_names)
    pairs = [tuple(int(x) for x in rng.choice(n, 2, replace=False)) for _ in range(60)]
    _check(net, pairs + pairs[::-1], max_nodes=int(rng.integers(1, 50)))
