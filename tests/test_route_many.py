"""``route_many`` gives what ``route`` gives pair by pair: the same path ids, the same path store."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hcsim
from tests.test_routing_structure import KINDS, random_topology

OPTIONS = (("ecmp", 0, 1), ("ecmp", 7, 1), ("ecmp", 3, 4), ("spray", 0, 1), ("spray", 5, 1))


def _store(net):
    p = net.paths
    return p.res_ptr, p.res, p.latency_s, p.inline_reduce, p.bottleneck_Bps


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(KINDS))
def test_route_many_equals_route_pair_by_pair(seed, kind):
    _compare(seed, kind)


@pytest.mark.parametrize("seed", range(40))
def test_route_many_equals_route_on_explicit_graphs(seed):
    """User-like graphs: end resources (injection, engine, exchange limits) below some links'."""
    _compare(seed, "random")


def _compare(seed, kind):
    rng = np.random.default_rng(seed)
    topo = random_topology(kind, rng)
    one, many = topo.compiled(), random_topology(kind, np.random.default_rng(seed)).compiled()
    n = topo.num_npus
    for policy, ecmp_seed, qps in OPTIONS:
        m = int(rng.integers(1, 4 * n * n + 1))
        src = rng.integers(0, n, m).tolist()
        dst = rng.integers(0, n, m).tolist()
        pair = rng.integers(0, 2, m).astype(bool).tolist()
        keep = [k for k in range(m) if src[k] != dst[k]]
        src, dst, pair = [src[k] for k in keep], [dst[k] for k in keep], [pair[k] for k in keep]
        want, err = [], None
        for s, d, p in zip(src, dst, pair, strict=True):
            try:
                want.append(one.route(s, d, policy, ecmp_seed, qps, p))
            except hcsim.errors.TopologyError as e:
                err = e
                break
        got = []
        if err is None:
            many.route_many(src, dst, pair, policy, ecmp_seed, qps, out=got)
        else:
            with pytest.raises(hcsim.errors.TopologyError, match="unreachable"):
                many.route_many(src, dst, pair, policy, ecmp_seed, qps, out=got)
        assert got == want
        assert _store(many) == _store(one)
        if err is not None:
            return


def test_route_many_refuses_an_unknown_policy():
    net = random_topology("switch", np.random.default_rng(0)).compiled()
    with pytest.raises(ValueError, match="routing"):
        net.route_many([0], [1], [False], "bogus")


def test_route_many_stops_where_after_raises():
    """A work bound raising after pair k leaves pairs 0..k routed, the store as route() left it."""
    topo = random_topology("leaf_spine", np.random.default_rng(3))
    one, many = topo.compiled(), random_topology("leaf_spine", np.random.default_rng(3)).compiled()
    n = topo.num_npus
    pairs = [(s, d) for s in range(n) for d in range(n) if s != d]
    stop = len(pairs) // 2
    want = [one.route(s, d) for s, d in pairs[:stop + 1]]

    def after(k, ids):
        if k == stop:
            raise RuntimeError("bound")

    got = [("kept",)]
    with pytest.raises(RuntimeError, match="bound"):
        many.route_many([s for s, _ in pairs], [d for _, d in pairs], [False] * len(pairs), out=got, after=after)
    assert got == [("kept",)] + want
    assert _store(many) == _store(one)
