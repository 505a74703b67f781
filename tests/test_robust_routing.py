"""Routing (issue 12): any integer kind gives the same routes as the Python int
(``ecmp_seed=np.int64(5)`` overflowed the ECMP hash), and a saved and reloaded topology, or
one declared in another order, routes and simulates exactly as the original (the compiled
view's order is canonical)."""

import itertools
import random

import numpy as np
import pytest

import hcsim
from hcsim.topology import LinkSpec, NpuSpec, Topology
from hcsim.topology.ascend import atlas900_a2_pod
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


# -- a saved and reloaded topology routes exactly as the original (issue 12) ---------------

def _routes(topo, seeds=(0, 1, 7), qps=(1, 4)):
    """Every NPU pair's chosen paths, as link names."""
    c = topo.compiled()
    out = {}
    for a, b in itertools.permutations(topo.npus, 2):
        for seed in seeds:
            for q in qps:
                ids = c.route(c.node_index[a], c.node_index[b], "ecmp", seed, q)
                ptr, res, *_ = c.paths.arrays()
                out[a, b, seed, q] = [[c.links[r] for r in res[ptr[i]:ptr[i + 1]] if r < c.num_links] for i in ids]
    return out


def _hand_leaf_spine(seed, leaves=3, per_leaf=2, spines=3):
    """A leaf-spine whose NPUs and switches are declared interleaved at random (each group in
    a fixed order: NPUs first is not needed) and whose links in a shuffled order, each in a
    random direction."""
    rng = random.Random(seed)
    npus = [f"npu{i}" for i in range(leaves * per_leaf)]
    switches = [f"spine{s}" for s in range(spines)] + [f"leaf{i}" for i in range(leaves)]
    kinds = sorted(rng.sample(range(len(npus) + len(switches)), len(npus)))
    t = Topology("hand-leaf-spine")
    it_npu, it_sw = iter(npus), iter(switches)
    for i in range(len(npus) + len(switches)):
        if i in kinds:
            n = next(it_npu)
            t.add_npu(n, NpuSpec(server=int(n[3:]), local_index=0))
        else:
            t.add_node(next(it_sw), "switch")
    links = [(f"npu{i}", f"leaf{i // per_leaf}") for i in range(len(npus))]
    links += [(f"leaf{i}", f"spine{s}") for i in range(leaves) for s in range(spines)]
    rng.shuffle(links)
    for u, v in links:
        if rng.random() < 0.5:
            u, v = v, u
        t.add_link(u, v, LinkSpec(10e9, 1e-6, tier="roce"))
    return t


def _same_simulations(a, b):
    for coll, algo in (("alltoall", "pairwise"), ("allreduce", "hd"), ("allgather", "mesh")):
        for seed in (0, 3):
            for routing in ("ecmp", "spray"):
                x = hcsim.simulate(a, coll, 6 * 4096, algo, ecmp_seed=seed, routing=routing, qps=2 if routing == "ecmp" else 1)
                y = hcsim.simulate(b, coll, 6 * 4096, algo, ecmp_seed=seed, routing=routing, qps=2 if routing == "ecmp" else 1)
                assert x.time_s == y.time_s, (coll, algo, seed, routing)
                assert x.links.equals(y.links)
                assert x.transfers.equals(y.transfers)


@pytest.mark.parametrize("build", [lambda: leaf_spine(3, 2, 3, 10e9, 1e-6, oversubscription=2.0),
                                   lambda: _hand_leaf_spine(1), lambda: _hand_leaf_spine(2)])
def test_save_and_load_simulates_identically(tmp_path, build):
    topo = build()
    loaded = hcsim.load_topology(hcsim.save_topology(topo, tmp_path / "t.yaml"))
    assert _routes(loaded) == _routes(topo)
    _same_simulations(topo, loaded)


def test_declaration_order_does_not_change_routes():
    """The compiled view is canonical: NPUs first, then the other nodes, each in the graph's
    order; links by their ends' indices. Where switches sit among the NPUs, and in which order
    and direction the links were declared, does not matter."""
    first = _routes(_hand_leaf_spine(1))
    for seed in (2, 3, 4):
        assert _routes(_hand_leaf_spine(seed)) == first
    _same_simulations(_hand_leaf_spine(1), _hand_leaf_spine(5))


def test_ascend_pod_round_trip_routes_identically(tmp_path):
    """The A2 PoD builder interleaves NPUs and NICs; its saved file lists the NPUs first."""
    topo = atlas900_a2_pod(servers=2)
    loaded = hcsim.load_topology(hcsim.save_topology(topo, tmp_path / "pod.yaml"))
    assert _routes(loaded, seeds=(0, 5), qps=(1,)) == _routes(topo, seeds=(0, 5), qps=(1,))
    for algo in ("ring", "hd", "mesh/nhr", "auto"):
        x = hcsim.simulate(topo, "allreduce", 1 << 20, algo, ranks=range(0, 16, 2))
        y = hcsim.simulate(loaded, "allreduce", 1 << 20, algo, ranks=range(0, 16, 2))
        assert x.time_s == y.time_s, algo
