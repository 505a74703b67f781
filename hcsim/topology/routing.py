"""Shortest-path routing with deterministic ECMP, over integer adjacency lists.

Pure functions: no SimPy, no engine state. The path search is a bidirectional breadth-first
search that stops at the first meeting layer, so a route in a large leaf-spine costs a few
hundred node visits instead of a full graph traversal.
"""

from __future__ import annotations

import itertools

ROUTING_POLICIES = ("ecmp", "spray")
"""``ecmp``: one hashed path per node pair; ``spray``: a transfer splits over every equal-cost path."""

MAX_PATHS = 64
"""Most equal-cost paths kept per node pair (the first ones in a deterministic order)."""


def all_shortest_paths(out_adj, in_adj, src: int, dst: int, max_paths: int = MAX_PATHS):
    """All minimum-hop paths from ``src`` to ``dst`` as tuples of link indices.

    Parameters
    ----------
    out_adj, in_adj : list of list of (int, int)
        ``out_adj[u]`` lists ``(v, link)`` for links u->v; ``in_adj[v]`` lists ``(u, link)``.
    src, dst : int
        Node indices, ``src != dst``.
    max_paths : int
        Keep at most this many paths, in a deterministic order.

    Returns
    -------
    list of tuple of int
        Empty if ``dst`` cannot be reached.
    """
    if src == dst:
        return [()]
    # preds_f[v]: (u, link) with u one hop closer to src; succs_b[v]: (w, link) one hop closer to dst.
    preds_f = {src: []}
    succs_b = {dst: []}
    front_f, front_b = [src], [dst]
    while front_f and front_b:
        # Grow the side whose next layer is cheaper to scan (a switch has a large fan-out).
        if sum(len(out_adj[u]) for u in front_f) <= sum(len(in_adj[v]) for v in front_b):
            front_f = _grow_layer(front_f, out_adj, preds_f)
            meet = [v for v in front_f if v in succs_b]
        else:
            front_b = _grow_layer(front_b, in_adj, succs_b)
            meet = [u for u in front_b if u in preds_f]
        if meet:
            break
    else:
        return []

    # Paths through each meeting node m: the ways back to src times the ways on to dst, each
    # walked depth first in the order the search recorded them (the first ``max_paths`` of each
    # suffice). Iterative: a ring's path can be 65,536 hops long.
    paths = []
    for m in meet:
        heads = [tuple(reversed(h)) for h in _walks(m, src, preds_f, max_paths)]
        tails = [tuple(t) for t in _walks(m, dst, succs_b, max_paths)]
        for h, t in itertools.product(heads, tails):
            paths.append(h + t)
            if len(paths) >= max_paths:
                return paths
    return paths


class _Side:
    """BFS layers from one node over one adjacency (forward: out-links; backward: in-links),
    grown on demand: ``layers[k]`` the sorted nodes at distance k, ``depth`` and ``ways`` (the
    ``(node, link)`` one layer closer, in scan order) for every node reached, ``cost[k]`` the
    links layer k's scan would read. Exactly what :func:`all_shortest_paths` grows, kept."""

    __slots__ = ("start", "adj", "layers", "depth", "ways", "cost", "walk_cache")

    def __init__(self, start: int, adj):
        self.start = start
        self.adj = adj
        self.layers = [[start]]
        self.depth = {start: 0}
        self.ways = {start: []}
        self.cost = [len(adj[start])]
        self.walk_cache: dict = {}

    def meet(self, k: int, other: _Side, j: int) -> list:
        """Nodes of layer k that ``other`` reached within j layers, in layer order (sorted)."""
        front = self.layer(k)
        if sum(len(x) for x in other.layers[:j + 1]) < len(front):  # scan the smaller side
            depth = self.depth
            return sorted(v for lay in other.layers[:j + 1] for v in lay if depth.get(v) == k)
        depth = other.depth
        return [v for v in front if depth.get(v, j + 1) <= j]

    def walks(self, node: int, limit: int) -> list:
        """:func:`_walks` from ``node`` back to this side's start (cached)."""
        key = (node, limit)
        hit = self.walk_cache.get(key)
        if hit is None:
            hit = self.walk_cache[key] = _walks(node, self.start, self.ways, limit)
        return hit

    def layer(self, k: int) -> list:
        while len(self.layers) <= k:
            front = self.layers[-1]
            nxt = _grow_layer(front, self.adj, self.ways) if front else []
            d = len(self.layers)
            for v in nxt:
                self.depth[v] = d
            self.layers.append(nxt)
            self.cost.append(sum(len(self.adj[u]) for u in nxt))
        return self.layers[k]


class SearchCache:
    """Per-node BFS layers shared by every route search from or to that node.

    A rank talks to a handful of peers per step and to the same ones again in later steps and
    calls, so each node's layers are grown once instead of once per pair. The searches replay
    :func:`all_shortest_paths` step for step (same growth order, same meeting layer, same path
    order), so routes and ECMP choices are identical. At most ``max_nodes`` sides are kept
    (oldest dropped first).
    """

    def __init__(self, out_adj, in_adj, max_nodes: int = 8192):
        self.out_adj, self.in_adj = out_adj, in_adj
        self.max_nodes = max_nodes
        self._fwd: dict[int, _Side] = {}
        self._bwd: dict[int, _Side] = {}

    def _side(self, table, node, adj) -> _Side:
        side = table.get(node)
        if side is None:
            if len(table) >= self.max_nodes:
                del table[next(iter(table))]
            side = table[node] = _Side(node, adj)
        return side

    def all_shortest_paths(self, src: int, dst: int, max_paths: int = MAX_PATHS):
        """As :func:`all_shortest_paths` (the same list, in the same order)."""
        if src == dst:
            return [()]
        f = self._side(self._fwd, src, self.out_adj)
        b = self._side(self._bwd, dst, self.in_adj)
        i = j = 0
        while f.layer(i) and b.layer(j):
            if f.cost[i] <= b.cost[j]:
                i += 1
                meet = f.meet(i, b, j)
            else:
                j += 1
                meet = b.meet(j, f, i)
            if meet:
                return _join(meet, f, b, max_paths)
        return []


def _join(meet, f: _Side, b: _Side, max_paths):
    paths = []
    for m in meet:
        heads = [tuple(reversed(h)) for h in f.walks(m, max_paths)]
        tails = [tuple(t) for t in b.walks(m, max_paths)]
        for h, t in itertools.product(heads, tails):
            paths.append(h + t)
            if len(paths) >= max_paths:
                return paths
    return paths


def _walks(start: int, goal: int, steps, limit: int) -> list[list[int]]:
    """The first ``limit`` walks from ``start`` to ``goal`` over ``steps`` (node -> [(next,
    link)], every step one layer closer to ``goal``), depth first in ``steps``' order, as
    lists of links in walk order."""
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


def _grow_layer(front, adj, seen):
    """Next BFS layer from ``front`` over ``adj``; records every way in for each new node."""
    nxt: dict[int, list] = {}
    for u in front:
        for v, link in adj[u]:
            if v not in seen:
                nxt.setdefault(v, []).append((u, link))
    seen.update(nxt)
    return sorted(nxt)


def ecmp_index(src: int, dst: int, n_paths: int, seed: int = 0) -> int:
    """Deterministic ECMP choice for a flow between two nodes (a fixed integer hash).

    The same (src, dst, seed) always takes the same path, as a switch hashing a fixed
    5-tuple does; a different seed models a different source port. Arguments may be any
    integers (numpy's included): the hash runs on Python ints, so it never overflows.
    """
    if n_paths <= 1:
        return 0
    src, dst, seed, n_paths = int(src), int(dst), int(seed), int(n_paths)
    x = (src * 0x9E3779B97F4A7C15 + dst * 0xC2B2AE3D27D4EB4F + seed * 0x165667B19E3779F9) & (2**64 - 1)
    x ^= x >> 29
    x = (x * 0xBF58476D1CE4E5B9) & (2**64 - 1)
    x ^= x >> 32
    return int(x % n_paths)
