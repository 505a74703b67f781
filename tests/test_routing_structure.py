"""Routing from kept per-node layers gives exactly the routes the pairwise search gave.

The reference below is the pairwise bidirectional search and the route assembly as they were
before routing kept layers per node and read a pair's meeting nodes off set intersections
(commit 61ea6f7), copied unchanged in substance: every test compares the current code with
it, path for path and in order (the ECMP hash picks by index), on random small fabrics of
every kind, every node pair, both policies and several seeds. The last test pins
``simulate`` results on built-in topologies to the numbers the code gave before the change.
"""

from __future__ import annotations

import hashlib
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hcsim
from hcsim.topology import (
    Topology,
    full_mesh,
    leaf_spine,
    load_topology,
    ring,
    single_switch,
    tiered_mesh,
    torus,
)
from hcsim.topology.routing import MAX_PATHS, SearchCache, ecmp_index
from hcsim.topology.spec import LinkSpec, NpuSpec

# ---- the reference: the pairwise search and route assembly as of commit 61ea6f7 -------------


def _ref_grow_layer(front, adj, seen):
    nxt: dict[int, list] = {}
    for u in front:
        for v, link in adj[u]:
            if v not in seen:
                nxt.setdefault(v, []).append((u, link))
    seen.update(nxt)
    return sorted(nxt)


def _ref_walks(start, goal, steps, limit):
    if start == goal:
        return [[]]
    out, links, frames = [], [], [iter(steps[start])]
    while frames:
        step = next(frames[-1], None)
        if step is None:
            frames.pop()
            if links:
                links.pop()
            continue
        node, link = step
        links.append(link)
        if node == goal:
            out.append(list(links))
            links.pop()
            if len(out) >= limit:
                break
        else:
            frames.append(iter(steps[node]))
    return out


def ref_paths(out_adj, in_adj, src, dst, max_paths=MAX_PATHS):
    """Minimum-hop paths src -> dst as link tuples, in the pairwise search's order."""
    if src == dst:
        return [()]
    preds_f, succs_b = {src: []}, {dst: []}
    front_f, front_b = [src], [dst]
    while front_f and front_b:
        if sum(len(out_adj[u]) for u in front_f) <= sum(len(in_adj[v]) for v in front_b):
            front_f = _ref_grow_layer(front_f, out_adj, preds_f)
            meet = [v for v in front_f if v in succs_b]
        else:
            front_b = _ref_grow_layer(front_b, in_adj, succs_b)
            meet = [u for u in front_b if u in preds_f]
        if meet:
            break
    else:
        return []
    paths = []
    for m in meet:
        heads = [tuple(reversed(h)) for h in _ref_walks(m, src, preds_f, max_paths)]
        tails = [tuple(t) for t in _ref_walks(m, dst, succs_b, max_paths)]
        for h, t in itertools.product(heads, tails):
            paths.append(h + t)
            if len(paths) >= max_paths:
                return paths
    return paths


def ref_route(net, src, dst, policy="ecmp", seed=0, qps=1, pair=False):
    """(resources, latency, inline, bottleneck) of each path ``route`` gives, as it gave them."""
    link_paths = ref_paths(net.out_adj, net.in_adj, src, dst)
    if len(link_paths) > 1:
        lats = [sum(net.link_specs[li].latency_s for li in lp) for lp in link_paths]
        best = min(lats)
        link_paths = [lp for lp, lat in zip(link_paths, lats, strict=True) if lat <= best * (1 + 1e-12)]
    if not link_paths:
        return None
    if policy == "ecmp":
        link_paths = ([link_paths[ecmp_index(src, dst, len(link_paths), seed)]] if len(link_paths) == 1 or qps == 1
                      else [link_paths[ecmp_index(src, dst, len(link_paths), seed * 64 + q)] for q in range(qps)])
    out = []
    for lp in link_paths:
        res = list(lp)
        if src in net.tx_res:
            res.insert(0, net.tx_res[src])
        if dst in net.rx_res:
            res.append(net.rx_res[dst])
        for end in (src, dst):
            if end in net.engine_res:
                res.append(net.engine_res[end])
        if pair:
            res += [net.exchange_res[end] for end in (src, dst) if end in net.exchange_res]
        lat = float(sum(net.link_specs[li].latency_s for li in lp))
        inline = bool(lp) and all(net.link_specs[li].inline_reduce for li in lp)
        out.append((res, lat, inline, float(net.capacity_Bps[res].min())))
    return out


def routed(net, ids):
    """What the path store holds for path ids ``ids``, in ``ref_route``'s form."""
    p = net.paths
    return [(p.res[p.res_ptr[i]:p.res_ptr[i + 1]], p.latency_s[i], p.inline_reduce[i], p.bottleneck_Bps[i])
            for i in ids]


# ---- random fabrics ------------------------------------------------------------------------


def _spec(rng, tier="generic"):
    # few distinct latencies, so equal-hop paths tie on latency and the latency filter cuts some
    return LinkSpec(float(rng.choice([10e9, 25e9, 50e9])), float(rng.choice([0.5e-6, 1e-6, 2e-6])), tier,
                    bool(rng.integers(2)))


def random_graph(rng) -> Topology:
    """User-YAML-like explicit graph: NPUs multi-homed onto switches, switch-switch links, some
    one-way links, NPU-NPU links, NPUs and switches declared interleaved; maybe disconnected."""
    t = Topology("random")
    n_npu, n_sw = int(rng.integers(2, 12)), int(rng.integers(1, 7))
    names = [f"n{i}" for i in range(n_npu)] + [f"s{i}" for i in range(n_sw)]
    for i in rng.permutation(len(names)):
        name = names[i]
        if name[0] == "n":
            kw = {}
            if rng.random() < 0.3:
                kw = {"injection_Bps": 20e9, "ejection_Bps": 15e9}
            if rng.random() < 0.2:
                kw["exchange_Bps"] = 12e9
            if rng.random() < 0.2:
                kw["engine_Bps"] = 30e9
            t.add_npu(name, NpuSpec(**kw))
        else:
            t.add_node(name, "switch")
    sw = [f"s{i}" for i in range(n_sw)]
    for i in range(n_npu):  # multi-homed NPUs
        for s in rng.choice(sw, size=int(rng.integers(0, min(3, n_sw) + 1)), replace=False):
            _link(t, rng, f"n{i}", str(s))
    for a, b in itertools.combinations(names, 2):  # extra links anywhere, sparse
        if rng.random() < 0.12:
            _link(t, rng, a, b)
    return t


def _link(t, rng, a, b):
    one_way = rng.random() < 0.15
    if one_way and rng.random() < 0.5:
        a, b = b, a
    if t.graph.has_edge(a, b) or (not one_way and t.graph.has_edge(b, a)):
        return
    t.add_link(a, b, _spec(rng), bidirectional=not one_way)


def random_topology(kind, rng) -> Topology:
    if kind == "leaf_spine":
        per_leaf, rails = int(rng.integers(1, 5)), bool(rng.integers(2))  # rails: a spine per NPU index
        return leaf_spine(int(rng.integers(2, 5)), per_leaf, per_leaf if rails else int(rng.integers(1, 4)), 25e9,
                          1e-6, oversubscription=float(rng.choice([1.0, 2.0, 3.0])),
                          npus_per_server=int(rng.choice([1, 2])) if per_leaf % 2 == 0 else 1, rails=rails)
    if kind == "a2_pod":
        return load_topology("atlas900-a2-pod", servers=int(rng.integers(1, 5)),
                             servers_per_leaf=int(rng.integers(1, 4)), spines=int(rng.integers(1, 4)),
                             oversubscription=float(rng.choice([1.0, 2.0])))
    if kind == "a3":
        return load_topology("atlas900-a3-superpod", servers=int(rng.integers(1, 3)))
    if kind == "a9000":
        return load_topology("atlas800-9000", servers=int(rng.integers(1, 3)))
    if kind == "torus":
        return torus(tuple(int(x) for x in rng.integers(2, 5, size=int(rng.integers(2, 4)))), 1e9, 1e-6)
    if kind == "tiered":
        return tiered_mesh((int(rng.integers(2, 4)), int(rng.integers(1, 4)), int(rng.integers(1, 3))), 1e9)
    if kind == "ring":
        return ring(int(rng.integers(2, 12)), 1e9, bidirectional=bool(rng.integers(2)))
    if kind == "mesh":
        return full_mesh(int(rng.integers(2, 7)), 1e9)
    if kind == "switch":
        return single_switch(int(rng.integers(2, 9)), 1e9)
    return random_graph(rng)


KINDS = ["leaf_spine", "a2_pod", "a3", "a9000", "torus", "tiered", "ring", "mesh", "switch", "random", "random"]


def _all_pairs(n):
    return [(a, b) for a in range(n) for b in range(n)]


# ---- tests ---------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(KINDS))
def test_search_matches_pairwise_search_on_every_node_pair(seed, kind):
    rng = np.random.default_rng(seed)
    net = random_topology(kind, rng).compiled()
    n = len(net.node_names)
    pairs = _all_pairs(n)
    if len(pairs) > 800:
        pairs = [pairs[int(k)] for k in rng.choice(len(pairs), 800, replace=False)]
    rng.shuffle(pairs)
    cache = SearchCache(net.out_adj, net.in_adj)
    for a, b in pairs:
        assert cache.all_shortest_paths(a, b) == ref_paths(net.out_adj, net.in_adj, a, b), (a, b)
    for limit in (1, 2, 3):  # the MAX_PATHS cut, smaller
        for a, b in pairs[:200]:
            assert cache.all_shortest_paths(a, b, limit) == ref_paths(net.out_adj, net.in_adj, a, b, limit)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(KINDS))
def test_routes_match_on_every_npu_pair_policy_and_seed(seed, kind):
    rng = np.random.default_rng(seed)
    topo = random_topology(kind, rng)
    net = topo.compiled()
    npus = range(topo.num_npus)
    for src, dst in itertools.permutations(npus, 2):
        for policy, ecmp_seed, qps, pair in (("ecmp", 0, 1, False), ("ecmp", 7, 1, True), ("ecmp", 3, 4, False),
                                             ("spray", 0, 1, False), ("spray", 5, 1, True)):
            want = ref_route(net, src, dst, policy, ecmp_seed, qps, pair)
            if want is None:
                with pytest.raises(hcsim.errors.TopologyError, match="unreachable"):
                    net.route(src, dst, policy, ecmp_seed, qps, pair)
                continue
            assert routed(net, net.route(src, dst, policy, ecmp_seed, qps, pair)) == want


def test_max_paths_cut_matches_on_a_torus():
    """A 4x4x4 torus has more than 64 shortest paths between far nodes: the same 64 are kept."""
    net = torus((4, 4, 4), 1e9).compiled()
    cache = SearchCache(net.out_adj, net.in_adj)
    counts = set()
    for a, b in itertools.product(range(0, 64, 5), range(64)):
        got = cache.all_shortest_paths(a, b)
        assert got == ref_paths(net.out_adj, net.in_adj, a, b)
        counts.add(len(got))
    assert MAX_PATHS in counts  # the cut happened


@pytest.mark.parametrize("max_nodes,max_entries", [(1, 1 << 20), (3, 50), (1 << 16, 1)])
def test_dropping_kept_layers_changes_nothing_but_the_work(max_nodes, max_entries):
    net = load_topology("atlas900-a2-pod", servers=6, servers_per_leaf=2, spines=3).compiled()
    rng = np.random.default_rng(3)
    n = len(net.node_names)
    pairs = [tuple(int(x) for x in rng.choice(n, 2, replace=False)) for _ in range(800)]
    cache = SearchCache(net.out_adj, net.in_adj, max_nodes=max_nodes, max_entries=max_entries)
    for a, b in pairs + pairs[::-1]:
        assert cache.all_shortest_paths(a, b) == ref_paths(net.out_adj, net.in_adj, a, b)
    assert len(cache._fwd) <= max_nodes and len(cache._bwd) <= max_nodes
    assert len(cache._unique) <= 16 * max_nodes  # the reversed single paths are bounded too
    held = sum(len(s.seen) for s in [*cache._fwd.values(), *cache._bwd.values()])
    assert held == cache._entries
    assert held <= max(max_entries, 2 * n)  # over the bound only by the two sides in use


def test_a_pod_route_reads_a_few_layers_not_the_fabric():
    """On a 64-server pod (1,044 nodes) a rank pair's search keeps a few dozen nodes per side:
    layers stop where the two sides meet, however large the pod."""
    net = load_topology("atlas900-a2-pod", servers=64).compiled()
    cache = SearchCache(net.out_adj, net.in_adj)
    for a in range(0, 512, 7):
        for b in (a + 1, (a + 8) % 512, (a + 256) % 512, (a + 264) % 512):
            assert cache.all_shortest_paths(a, b) == ref_paths(net.out_adj, net.in_adj, a, b)
    sides = [*cache._fwd.values(), *cache._bwd.values()]
    assert max(len(s.seen) for s in sides) <= 64


# simulate() on built-in topologies, recorded from the code before routing kept layers
# (commit 61ea6f7): (algorithm, time_us, digest of the per-link byte table). Exact equality.
BEFORE = {
    "pod16 allreduce auto": ("mesh/nhr", 2665.010324456014, "ae8a61ef88e78161"),  # AllReduce launch 36.9 -> 30.1 us (2026-11-24)
    "pod16 alltoall spray": ("mesh/pairwise", 1161.4827905570025, "17a8fc503e22a577"),
    "pod8 alltoall seed3 qps4": ("mesh/pairwise", 897.0317952785011, "f185ec4c54635f33"),
    "pod6 allgather ring spray": ("ring", 731.9861499999994, "8c419ade94f02f80"),
    "a3 allreduce auto": ("mesh/nhr", 189.3268076263519, "32ecdb499c58df6a"),
    "a3 alltoall seed5": ("mesh/pairwise", 86.6193909152699, "df4e20a0301884f6"),
    "9000x2 allgather": ("ring/hd", 413.5759999999999, "fb56e2993db3c8c4"),
    "leafspine os3 alltoall seed1": ("mesh/pairwise", 5459.254934920369, "ee23621e6b6b152c"),
    "leafspine os3 alltoall seed3": ("mesh/pairwise", 5401.501456701498, "0baafe2dabf2053c"),
}

CASES = {
    "pod16 allreduce auto": lambda: hcsim.simulate("atlas900-a2-pod", "allreduce", "64MiB", "auto"),
    "pod16 alltoall spray": lambda: hcsim.simulate("atlas900-a2-pod", "alltoall", "16MiB", "auto",
                                                   routing="spray"),
    "pod8 alltoall seed3 qps4": lambda: hcsim.simulate(
        load_topology("atlas900-a2-pod", servers=8, servers_per_leaf=2, spines=3), "alltoall", "8MiB", "auto",
        ecmp_seed=3, qps=4),
    "pod6 allgather ring spray": lambda: hcsim.simulate(
        load_topology("atlas900-a2-pod", servers=6, servers_per_leaf=4, oversubscription=2), "allgather", "4MiB",
        "ring", routing="spray"),
    "a3 allreduce auto": lambda: hcsim.simulate("atlas900-a3-superpod", "allreduce", "16MiB", "auto"),
    "a3 alltoall seed5": lambda: hcsim.simulate("atlas900-a3-superpod", "alltoall", "4MiB", "auto", ecmp_seed=5),
    "9000x2 allgather": lambda: hcsim.simulate(load_topology("atlas800-9000", servers=2), "allgather", "4MiB", "auto"),
    "leafspine os3 alltoall seed1": lambda: hcsim.simulate(
        leaf_spine(4, 6, 3, 25e9, 1e-6, oversubscription=3), "alltoall", "32MiB", "auto", ecmp_seed=1),
    "leafspine os3 alltoall seed3": lambda: hcsim.simulate(
        leaf_spine(4, 6, 3, 25e9, 1e-6, oversubscription=3), "alltoall", "32MiB", "auto", ecmp_seed=3),
}


def _digest(r) -> str:
    rows = repr(list(zip(r.links["src"], r.links["dst"], r.links["bytes"].tolist(), strict=True)))
    return hashlib.sha256(rows.encode()).hexdigest()[:16]


@pytest.mark.parametrize("case", sorted(CASES))
def test_simulate_is_bit_identical_to_before(case):
    r = CASES[case]()
    assert (r.algorithm, r.time_us, _digest(r)) == BEFORE[case]


def test_path_store_arrays_grow_to_what_a_fresh_conversion_gives():
    """The path arrays and matrix are extended by the paths added since the last call; they
    equal a conversion of every path from scratch (widths growing, a different pad)."""
    from hcsim.topology.model import PathStore

    rng = np.random.default_rng(5)
    store = PathStore()
    for chunk in range(6):
        for _ in range(int(rng.integers(0, 5))):
            res = [int(x) for x in rng.integers(0, 50, size=int(rng.integers(0, 3 + 2 * chunk)))]
            store.add(res, float(rng.random()), bool(rng.integers(2)), float(rng.random()))
        want = (np.asarray(store.res_ptr, dtype=np.int64), np.asarray(store.res, dtype=np.int64),
                np.asarray(store.latency_s, dtype=float), np.asarray(store.inline_reduce, dtype=bool),
                np.asarray(store.bottleneck_Bps, dtype=float))
        for got, ref in zip(store.arrays(), want, strict=True):
            assert got.dtype == ref.dtype and np.array_equal(got, ref)
        lens = np.diff(want[0])
        for pad in (99, 99, 7):
            ref = np.full((len(lens), int(lens.max()) if len(lens) else 1), pad, dtype=np.int64)
            for row, (a, b) in enumerate(itertools.pairwise(store.res_ptr)):
                ref[row, :b - a] = store.res[a:b]
            got = store.matrix(pad)
            assert got.shape == ref.shape and np.array_equal(got, ref)
