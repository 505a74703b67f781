"""Shortest-path routing with deterministic ECMP, over integer adjacency lists.

Pure functions: no SimPy, no engine state. The path search is a bidirectional breadth-first
search that stops at the first meeting layer, so a route in a large leaf-spine costs a few
hundred node visits instead of a full graph traversal.
"""

from __future__ import annotations

import contextlib
import gc
import itertools


@contextlib.contextmanager
def collector_paused():
    """Pause Python's cyclic garbage collector for a block (as it was after: a collector the
    caller had disabled stays disabled).

    Compiling a large topology, routing a large step and a run on its own clock allocate
    hundreds of thousands of short-lived tuples, lists and arrays, none in a reference cycle,
    and each of the collector's full passes scans the whole heap, the topology's graph
    included (about 80 ms a pass at 2,048 NPUs, 0.22 s on a 2,048-server pod): they freed
    nothing. Reference counting still frees everything else as it goes, a finished call's
    simulator included (its fabric refers back to it weakly), so nothing waits for the
    collector and no collection is needed first."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


GROWN = 0
"""Nodes the Python search has added to its layers in this process (its breadth-first
exploration, the bulk of its cost on a torus): :data:`hcsim.topology.model.COLD_SEARCH_GROWN`."""

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
    grown on demand: ``layers[k]`` the sorted nodes at distance k (a tuple), ``sets[k]`` the
    same as a set, ``cost[k]`` the links layer k's scan would read (the sum of its nodes'
    degrees), ``seen`` every node reached. The ways into a node (the ``(node, link)`` one
    layer closer) are read back from the other adjacency when a walk needs them, so a side
    holds only node numbers."""

    __slots__ = ("start", "nbrs", "deg", "back", "forward", "layers", "sets", "cost", "seen", "walk_cache", "link_maps")

    def __init__(self, start: int, nbrs, deg, back, forward: bool, link_maps: dict | None = None):
        self.start = start
        self.nbrs, self.deg, self.back, self.forward = nbrs, deg, back, forward
        self.link_maps = {} if link_maps is None else link_maps  # node -> {neighbour: its links}, shared
        self.layers = [(start,)]
        self.sets = [{start}]
        self.cost = [deg[start]]
        self.seen = {start}
        self.walk_cache: dict = {}

    def layer(self, k: int) -> tuple:
        """Layer ``k`` (grown, with its set and cost, if not yet)."""
        while len(self.layers) <= k:
            self.grow()
        return self.layers[k]

    def grow(self) -> int:
        """Add the next layer; returns how many nodes it holds."""
        reach: set = set()
        for u in self.layers[-1]:
            reach.update(self.nbrs[u])
        new = reach.difference(self.seen)
        self.seen |= new
        lay = tuple(sorted(new))
        self.layers.append(lay)
        self.sets.append(new)
        deg = self.deg
        self.cost.append(sum([deg[v] for v in lay]))
        return len(lay)

    def walks(self, node: int, depth: int, limit: int) -> list:
        """The first ``limit`` shortest walks between this side's start and ``node`` (at
        ``depth``), as link tuples in travel order (start first on a forward side, ``node``
        first on a backward one), cached. In the order a depth-first walk from ``node`` meets
        them, each step's ways in the order of the node one layer closer (as the search
        recorded them): near the start each node's walks are built from its ways' cached
        walks, further away (a ring's path can be 65,536 hops long) walked depth first."""
        cache = self.walk_cache.get(limit)
        if cache is None:
            cache = self.walk_cache[limit] = {self.start: [()]}
        hit = cache.get(node)
        if hit is None:
            if depth > _BUILD_DEPTH:
                hit = _walks_back(node, depth, self, limit)
                cache[node] = hit = [w[::-1] for w in hit] if self.forward else hit
            else:
                ways = _ways(node, depth, self)
                base = cache.get(ways[0][0]) if len(ways) == 1 else None
                if base is not None:  # one way in, from a node whose walks are known: extend them
                    link = ways[0][1]
                    hit = cache[node] = ([w + (link,) for w in base] if self.forward
                                         else [(link,) + w for w in base])
                else:
                    hit = _build_walks(node, depth, self, limit, cache, self.forward)
        return hit


_BUILD_DEPTH = 8
"""Walks to a node at most this far from a side's start are built from its ways' walks (kept)."""


def _build_walks(node, depth, side, limit, cache, forward) -> list:
    """Walks to ``node`` as its ways' walks extended by one link (each way's in turn, the first
    ``limit`` in all), every node on the way computed once and kept in ``cache``."""
    stack = [(node, depth)]
    while stack:
        v, k = stack[-1]
        if v in cache:
            stack.pop()
            continue
        ways = _ways(v, k, side)
        missing = [(u, k - 1) for u, _ in ways if u not in cache]
        if missing:
            stack += missing
            continue
        stack.pop()
        out = []
        for u, link in ways:
            step = (link,)
            for w in cache[u]:
                out.append(w + step if forward else step + w)
                if len(out) >= limit:
                    break
            if len(out) >= limit:
                break
        cache[v] = out
    return cache[node]


def _ways(v: int, k: int, side) -> list:
    """The ways into ``v`` (at depth ``k`` >= 1) from layer ``k - 1`` of ``side``: ``(node, link)``
    sorted by node (stable, so parallel links keep their adjacency order). A switch with hundreds
    of links next to a layer of a few nodes: each of those looked up in the switch's links by
    neighbour (the same ways, in the same order: a layer is sorted, and a neighbour's links keep
    their adjacency order)."""
    back = side.back[v]
    prev = side.sets[k - 1]
    if len(prev) < len(back):
        links = side.link_maps.get(v)
        if links is None:
            links = side.link_maps[v] = _link_map(back)
        return [(u, link) for u in side.layers[k - 1] if u in links for link in links[u]]
    ways = [w for w in back if w[0] in prev]
    if len(ways) > 1:
        ways.sort(key=_first)
    return ways


def _first(way):
    return way[0]


def _link_map(adj) -> dict:
    """``{neighbour: [links]}`` of one node's adjacency list, each neighbour's links in list order."""
    out: dict = {}
    for u, link in adj:
        got = out.get(u)
        if got is None:
            out[u] = [link]
        else:
            got.append(link)
    return out


def _walks_back(node: int, depth: int, side, limit: int) -> list:
    """:func:`_walks` over the ways :func:`_ways` reads back: from ``node`` at ``depth`` to
    layer 0, as tuples of links in walk order."""
    if depth == 0:
        return [()]
    out, links = [], []
    frames = [iter(_ways(node, depth, side))]
    while frames:
        step = next(frames[-1], None)
        if step is None:
            frames.pop()
            if links:
                links.pop()
            continue
        v, link = step
        links.append(link)
        k = depth - len(links)
        if k == 0:
            out.append(tuple(links))
            links.pop()
            if len(out) >= limit:
                break
        else:
            frames.append(iter(_ways(v, k, side)))
    return out


class SearchCache:
    """Per-node BFS layers shared by every route search from or to that node.

    A rank talks to a handful of peers per step and to the same ones again in later steps and
    calls, so each node's layers are grown once instead of once per pair, and a pair's search
    is then a few set intersections. The result is exactly :func:`all_shortest_paths`'s (the
    same paths in the same order, so the same ECMP choices): see :meth:`all_shortest_paths`
    for why. Sides are dropped oldest first beyond ``max_nodes`` per direction or
    ``max_entries`` nodes reached over all sides (memory stays bounded on any fabric).

    Parameters
    ----------
    out_adj, in_adj : list of list of (int, int)
        As for :func:`all_shortest_paths`; the same links both ways round.
    max_nodes : int
        Most nodes whose layers are kept, per direction.
    max_entries : int
        Most reached nodes kept over all sides together (about 0.1 kB each).
    """

    def __init__(self, out_adj, in_adj, max_nodes: int = 1 << 16, max_entries: int = 1 << 23):
        self.out_adj, self.in_adj = out_adj, in_adj
        self.max_nodes, self.max_entries = max_nodes, max_entries
        self._out_nbrs = [tuple(v for v, _ in a) for a in out_adj]
        self._in_nbrs = [tuple(u for u, _ in a) for a in in_adj]
        self._out_deg = [len(a) for a in out_adj]
        self._in_deg = [len(a) for a in in_adj]
        self._fwd: dict[int, _Side] = {}
        self._bwd: dict[int, _Side] = {}
        self._direct: dict[int, dict] = {}
        self._in_links: dict = {}  # node -> {predecessor: links}, built as walks need them
        self._unique: dict = {}  # (src, dst) -> its only shortest path (kept when links reverse)
        self._rev = None  # each link's reverse (a list), False when links do not pair up, None: not known yet
        self._out_links: dict = {}  # node -> {successor: links}
        self._entries = 0

    def _side(self, node: int, forward: bool) -> _Side:
        table = self._fwd if forward else self._bwd
        side = table.get(node)
        if side is None:
            if len(table) >= self.max_nodes:
                self._entries -= len(table.pop(next(iter(table))).seen)
            if forward:
                side = _Side(node, self._out_nbrs, self._out_deg, self.in_adj, True, self._in_links)
            else:
                side = _Side(node, self._in_nbrs, self._in_deg, self.out_adj, False, self._out_links)
            table[node] = side
            self._entries += 1
        return side

    def _trim(self, keep: tuple) -> None:
        """Drop the oldest sides but ``keep`` while more than ``max_entries`` nodes are held."""
        for table in (self._fwd, self._bwd):
            for node in list(table):
                if self._entries <= self.max_entries:
                    return
                if table[node] not in keep:
                    self._entries -= len(table.pop(node).seen)

    def _direct_link(self, src: int, dst: int):
        """The one link src -> dst, or None (none, or parallel links)."""
        links = self._direct.get(src)
        if links is None:
            links = {}
            for v, link in self.out_adj[src]:
                links[v] = None if v in links else link
            self._direct[src] = links
        return links.get(dst)

    def all_shortest_paths(self, src: int, dst: int, max_paths: int = MAX_PATHS):
        """As :func:`all_shortest_paths` (the same list, in the same order).

        That search grows the side whose next layer is cheaper (forward on a tie) until the
        new layer meets the other side, at forward depth i and backward depth j with
        i + j = d, the distance; before that no layer of one side met any of the other, so
        the meeting nodes are exactly forward layer i intersected with backward layer j
        (a node of the new layer also reached earlier by the other side would have a
        neighbour one layer back that met even earlier). So the same growth order over
        kept layers, one set intersection per step, finds the same meeting layer and nodes;
        the paths are then, for each meeting node in index order, its ways back to ``src``
        times its ways on to ``dst``, each walked depth first in node order, as there. A
        direct link is the only shortest path, found without a search.
        """
        if src == dst:
            return [()]
        link = self._direct_link(src, dst)
        if link is not None:
            return [(link,)]
        back = self._unique.get((dst, src))
        if back is not None:  # the one shortest path the other way, walked back
            rev = self._rev
            return [tuple([rev[link] for link in reversed(back)])]
        f = self._fwd.get(src) or self._side(src, True)
        b = self._bwd.get(dst) or self._side(dst, False)
        f_sets, b_sets, f_cost, b_cost = f.sets, b.sets, f.cost, b.cost
        i = j = added = 0
        paths = []
        while True:  # layer 0 of each side is its node
            if f_cost[i] <= b_cost[j]:
                i += 1
                if i == len(f_sets):
                    added += f.grow()
            else:
                j += 1
                if j == len(b_sets):
                    added += b.grow()
            if not f_sets[i].isdisjoint(b_sets[j]):
                paths = _join(sorted(f_sets[i] & b_sets[j]), i, j, f, b, max_paths)
                break
            if not f_sets[i] or not b_sets[j]:
                break  # a side ran out: dst cannot be reached
        if added:
            global GROWN
            GROWN += added
            self._entries += added
            if self._entries > self.max_entries:
                self._trim((f, b))
        if len(paths) == 1 and max_paths > 1 and self._reversible():
            if len(self._unique) >= 16 * self.max_nodes:  # bounded (1M paths by default): emptied when full
                self._unique.clear()
            self._unique[(src, dst)] = paths[0]
        return paths

    def _reversible(self) -> bool:
        """Whether every link has exactly one link back and no two links join the same nodes the
        same way (``_rev``: each link's reverse, made on first call). Then reversing is a one-to-one
        map between the shortest paths from a to b and those from b to a, so a pair with a
        single shortest path gives the other way's single path without a search."""
        if self._rev is None:
            way: dict = {}
            for u, adj in enumerate(self.out_adj):
                for v, link in adj:
                    if (u, v) in way:
                        self._rev = False  # parallel links
                        return False
                    way[(u, v)] = link
            rev = [0] * len(way)
            for (u, v), link in way.items():
                back = way.get((v, u))
                if back is None or link >= len(rev):
                    self._rev = False
                    return False
                rev[link] = back
            self._rev = rev
        return self._rev is not False


def _join(meet, i: int, j: int, f: _Side, b: _Side, max_paths: int) -> list:
    """For each meeting node in turn, its walks from ``src`` times its walks to ``dst``."""
    f_walks = f.walk_cache.get(max_paths) or {}
    b_walks = b.walk_cache.get(max_paths) or {}
    paths = []
    for m in meet:
        heads = f_walks.get(m) or f.walks(m, i, max_paths)
        tails = b_walks.get(m) or b.walks(m, j, max_paths)
        if len(heads) == 1 and len(tails) == 1:
            paths.append(heads[0] + tails[0])
            if len(paths) >= max_paths:
                return paths
            continue
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
