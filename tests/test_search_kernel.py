"""The compiled search (``hcsim.topology._search_kernel``) gives the Python search's paths, in its
order, pair by pair; and ``route_many`` with it gives what it gives without it."""

import contextlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hcsim.topology import load_topology, model
from hcsim.topology.routing import MAX_PATHS, SearchCache
from tests.test_route_many import _compare, _store
from tests.test_routing_structure import KINDS, random_topology

kernel = pytest.importorskip("hcsim.topology._search_kernel")


@contextlib.contextmanager
def _forced():
    """Every route_many call on the compiled search (from one new pair on)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(model, "COMPILED_SEARCH_PAIRS", 1)
        mp.setattr(model, "COLD_SEARCH_PAIRS", 1)
        yield


def _search(net, srcs, dsts, max_paths=MAX_PATHS):
    csr = [a for adj in (net.out_adj, net.in_adj) for a in model._csr(adj)]
    pair_ptr, path_ptr, links = kernel.search_many(*csr, np.array(srcs, dtype=np.int64),
                                                   np.array(dsts, dtype=np.int64), max_paths)
    return [[tuple(links[path_ptr[q]:path_ptr[q + 1]].tolist()) for q in range(pair_ptr[k], pair_ptr[k + 1])]
            for k in range(len(srcs))]


def _pairs(net, rng, count=600):
    n = len(net.node_names)
    src, dst = rng.integers(0, n, count).tolist(), rng.integers(0, n, count).tolist()
    src[:5] = dst[:5]  # a node to itself too
    return src, dst


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(KINDS))
def test_compiled_search_gives_the_python_search_paths_in_order(seed, kind):
    rng = np.random.default_rng(seed)
    net = random_topology(kind, rng).compiled()
    src, dst = _pairs(net, rng)
    cache = SearchCache(net.out_adj, net.in_adj)
    for limit in (MAX_PATHS, 1, 2, 3):  # the MAX_PATHS cut, smaller
        got = _search(net, src, dst, limit)
        assert got == [cache.all_shortest_paths(a, b, limit) for a, b in zip(src, dst, strict=True)]


def test_compiled_search_on_a_pod_with_every_kind_of_pair():
    """A 64-NPU pod over several leaves and spines: direct, same-leaf, cross-leaf, cross-rail
    pairs, and pairs from and to NICs and switches."""
    net = load_topology("atlas900-a2-pod", servers=8, servers_per_leaf=2, spines=3).compiled()
    n = len(net.node_names)
    src, dst = zip(*[(a, b) for a in range(n) for b in range(n)], strict=True)
    cache = SearchCache(net.out_adj, net.in_adj)
    assert _search(net, src, dst) == [cache.all_shortest_paths(a, b) for a, b in zip(src, dst, strict=True)]


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(KINDS))
def test_route_many_with_the_compiled_search_equals_route(seed, kind):
    """Every route_many call searches compiled (from one pair on): the same ids and store as
    ``route`` pair by pair, the unreachable pair refused where route() refuses it."""
    with _forced():
        _compare(seed, kind)  # test_route_many's comparison, the compiled search forced


@pytest.mark.parametrize("stop", [0, 5, 17, 40])
def test_compiled_route_many_stops_where_after_raises(stop):
    """A work bound raising after pair k: pairs 0..k routed, the store as route() left it, also
    when later pairs repeat earlier ones and some were routed before the call."""
    topo = load_topology("atlas900-a2-pod", servers=4, servers_per_leaf=2, spines=2)
    one, many = topo.compiled(), load_topology("atlas900-a2-pod", servers=4, servers_per_leaf=2, spines=2).compiled()
    n = topo.num_npus
    pairs = [(s, d) for s in range(n) for d in range(n) if s != d and (s + d) % 3 == 0]
    pairs = pairs[:30] + pairs[:10] + pairs[30:]
    for s, d in pairs[3:6]:
        one.route(s, d)
    many.route_many([s for s, _ in pairs[3:6]], [d for _, d in pairs[3:6]], [False] * 3)
    want = [one.route(s, d) for s, d in pairs[:stop + 1]]

    def after(k, ids):
        if k == stop:
            raise RuntimeError("bound")

    got = [("kept",)]
    with _forced():
        with pytest.raises(RuntimeError, match="bound"):
            many.route_many([s for s, _ in pairs], [d for _, d in pairs], [False] * len(pairs), out=got, after=after)
        assert got == [("kept",)] + want
        assert _store(many) == _store(one)
        rest = [one.route(s, d) for s, d in pairs]  # and routing goes on from there as it would have
        assert many.route_many([s for s, _ in pairs], [d for _, d in pairs], [False] * len(pairs)) == rest
        assert _store(many) == _store(one)


def test_the_compiled_search_starts_once_python_searches_have_grown_enough(monkeypatch):
    """In a process that has not imported numba, calls of a few hundred pairs use the Python
    search until it has grown COLD_SEARCH_GROWN nodes (a 3-D torus's star pairs: 9.8 s of Python
    search before, 1.8 s with this), then the compiled one (the same paths in the same order)."""
    import sys

    pytest.importorskip("numba")
    from hcsim.topology import _search_kernel, model, routing  # noqa: F401 (loaded: no numba import below)

    monkeypatch.delenv("HCSIM_NO_NUMBA", raising=False)
    monkeypatch.setattr(model, "_SEARCH", None)
    monkeypatch.delitem(sys.modules, "numba")
    monkeypatch.setattr(routing, "GROWN", model.COLD_SEARCH_GROWN - 1)
    assert model._compiled_search(300) is False
    monkeypatch.setattr(routing, "GROWN", model.COLD_SEARCH_GROWN)
    assert model._compiled_search(300) is True
