"""Compiled shortest-path search (numba), for the optional ``hcsim[fast]`` extra.

:func:`search_many` is :meth:`hcsim.topology.routing.SearchCache.all_shortest_paths` for many
node pairs in one call: the same bidirectional search (the side whose current layer is cheaper
grows, forward on a tie, until the new layer meets the other side) and the same paths in the
same order (for each meeting node in index order, its walks from the source times its walks
to the destination, each walked depth first with the ways into a node in node order, the first
``max_paths`` of each and of the product). tests/test_search_kernel.py compares it with the
Python search pair by pair. Imported on first need by :mod:`hcsim.topology.model`; without
numba the Python search runs.

Why compiled: a step of a large pod routes thousands of new pairs, each a few layers of a
bidirectional search over Python sets and a join of cached walks (10-30 us a pair, about a
third of a 2,048-NPU pod allreduce's time); compiled, a pair costs its layers' links.

A side's layers are made per pair (the Python search keeps each endpoint's, shared by every
pair from or to it): a pair here costs the links its two searches scan, which on the fabrics
hcsim builds is a few hundred.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _grow(ptr, nbr, nodes, lptr, n_layers, stamp, dist, cur):  # pragma: no cover - compiled
    """Append layer ``n_layers`` (in no particular order) to the layers ``nodes[lptr[k]:lptr[k + 1]]``: the
    nodes first reached from layer ``n_layers - 1`` over the adjacency ``ptr``, ``nbr``.
    ``stamp[v] == cur`` marks the nodes this pair's side has reached, ``dist`` their layer."""
    k = n_layers - 1
    end = lptr[n_layers]
    top = end
    for q in range(lptr[k], end):
        u = nodes[q]
        for e in range(ptr[u], ptr[u + 1]):
            v = nbr[e]
            if stamp[v] != cur:
                stamp[v] = cur
                dist[v] = k + 1
                nodes[top] = v
                top += 1
    lptr[n_layers + 1] = top


@njit(cache=True)
def _layer_cost(ptr, nodes, lo, hi):  # pragma: no cover - compiled
    """Links a layer's scan reads: the degrees (in ``ptr``) of ``nodes[lo:hi]``."""
    c = 0
    for q in range(lo, hi):
        v = nodes[q]
        c += ptr[v + 1] - ptr[v]
    return c


@njit(cache=True)
def _sort(a, n):  # pragma: no cover - compiled
    """Sort ``a[:n]`` in place (insertion sort for a few: numba's sort costs more than they do)."""
    if n > 16:
        a[:n].sort()
        return
    for q in range(1, n):
        v = a[q]
        r = q - 1
        while r >= 0 and a[r] > v:
            a[r + 1] = a[r]
            r -= 1
        a[r + 1] = v


@njit(cache=True)
def _walks(m, depth, back_ptr, back_nbr, back_link, stamp, dist, cur, limit, forward, out, node, at, links):  # pragma: no cover
    """The first ``limit`` walks between a side's start and ``m`` (``depth`` links away) into
    ``out`` (one row of ``depth`` links each, in travel order), depth first from ``m`` with the
    ways into each node in the order of its adjacency ``back_*`` (node order). Returns the
    number of walks (at most ``limit``). ``node``, ``at``, ``links``: scratch of at least
    ``depth + 1`` entries."""
    if depth == 0:
        return 1
    node[0] = m
    at[0] = back_ptr[m]
    lvl = 0
    n = 0
    while lvl >= 0:
        v = node[lvl]
        e = at[lvl]
        found = False
        want = depth - lvl - 1  # the layer the next node is in
        while e < back_ptr[v + 1]:
            u = back_nbr[e]
            e += 1
            if stamp[u] == cur and dist[u] == want:
                found = True
                break
        at[lvl] = e
        if not found:
            lvl -= 1
            continue
        links[lvl] = back_link[e - 1]
        if want == 0:
            row = n
            for q in range(depth):  # travel order: forward, the start first (links collected from m back)
                out[row, q] = links[depth - 1 - q] if forward else links[q]
            n += 1
            if n >= limit:
                break
            continue
        lvl += 1
        node[lvl] = u
        at[lvl] = back_ptr[u]
    return n


@njit(cache=True)
def search_many(out_ptr, out_nbr, out_link, in_ptr, in_nbr, in_link, srcs, dsts, max_paths,
                max_links=-1):  # pragma: no cover
    """Every pair's shortest paths: ``(pair_ptr, path_ptr, links)``, pair ``k``'s paths being
    ``pair_ptr[k]:pair_ptr[k + 1]`` and path ``q``'s links ``links[path_ptr[q]:path_ptr[q + 1]]``
    (none for a pair that cannot be reached, one empty path for a node to itself).

    Parameters: CSR adjacency out (``out_ptr``, ``out_nbr``, ``out_link``: node u's successors
    and the links to them, in successor order) and in (node v's predecessors), node arrays
    ``srcs``, ``dsts``, ``max_paths``, and ``max_links`` (-1: none): stop after the first pair
    that brings the links found to at least that many, so that ``pair_ptr`` then has an entry
    for each pair searched (``pair_ptr.size - 1`` of them), not for every pair."""
    n = out_ptr.size - 1
    n_pairs = srcs.size
    f_stamp = np.zeros(n, dtype=np.int64)
    b_stamp = np.zeros(n, dtype=np.int64)
    f_dist = np.zeros(n, dtype=np.int64)
    b_dist = np.zeros(n, dtype=np.int64)
    f_nodes = np.empty(n, dtype=np.int64)
    b_nodes = np.empty(n, dtype=np.int64)
    f_lptr = np.zeros(n + 2, dtype=np.int64)
    b_lptr = np.zeros(n + 2, dtype=np.int64)
    f_cost = np.zeros(n + 1, dtype=np.int64)
    b_cost = np.zeros(n + 1, dtype=np.int64)
    meet = np.empty(n, dtype=np.int64)
    pair_ptr = np.zeros(n_pairs + 1, dtype=np.int64)
    path_ptr = np.zeros(1024, dtype=np.int64)
    links = np.empty(4096, dtype=np.int64)
    n_paths = 0
    n_links = 0
    heads = np.empty((max_paths, 1), dtype=np.int64)  # a meeting node's walks from the source, to the destination
    tails = np.empty((max_paths, 1), dtype=np.int64)
    w_node = np.empty(2, dtype=np.int64)  # the walks' scratch
    w_at = np.empty(2, dtype=np.int64)
    w_links = np.empty(2, dtype=np.int64)
    for k in range(n_pairs):
        src = srcs[k]
        dst = dsts[k]
        cur = k + 1
        if src == dst:  # one empty path
            if n_paths + 2 > path_ptr.size:
                path_ptr = np.concatenate((path_ptr, np.zeros(path_ptr.size, dtype=np.int64)))
            n_paths += 1
            path_ptr[n_paths] = n_links
            pair_ptr[k + 1] = n_paths
            continue
        f_stamp[src] = cur
        f_dist[src] = 0
        f_nodes[0] = src
        f_lptr[0] = 0
        f_lptr[1] = 1
        f_cost[0] = out_ptr[src + 1] - out_ptr[src]
        nf = 1
        b_stamp[dst] = cur
        b_dist[dst] = 0
        b_nodes[0] = dst
        b_lptr[0] = 0
        b_lptr[1] = 1
        b_cost[0] = in_ptr[dst + 1] - in_ptr[dst]
        nb = 1
        i = 0
        j = 0
        n_meet = 0
        while True:
            if f_cost[i] <= b_cost[j]:
                i += 1
                if i == nf:
                    _grow(out_ptr, out_nbr, f_nodes, f_lptr, nf, f_stamp, f_dist, cur)
                    f_cost[nf] = _layer_cost(out_ptr, f_nodes, f_lptr[nf], f_lptr[nf + 1])
                    nf += 1
            else:
                j += 1
                if j == nb:
                    _grow(in_ptr, in_nbr, b_nodes, b_lptr, nb, b_stamp, b_dist, cur)
                    b_cost[nb] = _layer_cost(in_ptr, b_nodes, b_lptr[nb], b_lptr[nb + 1])
                    nb += 1
            f_lo, f_hi = f_lptr[i], f_lptr[i + 1]
            b_lo, b_hi = b_lptr[j], b_lptr[j + 1]
            if f_hi - f_lo <= b_hi - b_lo:  # the smaller layer's nodes found in the other
                for q in range(f_lo, f_hi):
                    v = f_nodes[q]
                    if b_stamp[v] == cur and b_dist[v] == j:
                        meet[n_meet] = v
                        n_meet += 1
            else:
                for q in range(b_lo, b_hi):
                    v = b_nodes[q]
                    if f_stamp[v] == cur and f_dist[v] == i:
                        meet[n_meet] = v
                        n_meet += 1
            if n_meet or f_hi == f_lo or b_hi == b_lo:
                break
        _sort(meet, n_meet)  # the meeting nodes in index order
        if n_meet:
            if heads.shape[1] < i or heads.shape[1] < j:
                w = max(i, j, 2 * heads.shape[1])
                heads = np.empty((max_paths, w), dtype=np.int64)
                tails = np.empty((max_paths, w), dtype=np.int64)
                w_node = np.empty(w + 1, dtype=np.int64)
                w_at = np.empty(w + 1, dtype=np.int64)
                w_links = np.empty(w + 1, dtype=np.int64)
            d = i + j
            made = 0
            for x in range(n_meet):
                m = meet[x]
                nh = _walks(m, i, in_ptr, in_nbr, in_link, f_stamp, f_dist, cur, max_paths, True, heads,
                            w_node, w_at, w_links)
                nt = _walks(m, j, out_ptr, out_nbr, out_link, b_stamp, b_dist, cur, max_paths, False, tails,
                            w_node, w_at, w_links)
                for h in range(nh):
                    for t in range(nt):
                        if n_paths + 2 > path_ptr.size:
                            path_ptr = np.concatenate((path_ptr, np.zeros(path_ptr.size, dtype=np.int64)))
                        if n_links + d > links.size:
                            links = np.concatenate((links, np.empty(links.size + d, dtype=np.int64)))
                        for q in range(i):
                            links[n_links + q] = heads[h, q]
                        for q in range(j):
                            links[n_links + i + q] = tails[t, q]
                        n_links += d
                        n_paths += 1
                        path_ptr[n_paths] = n_links
                        made += 1
                        if made >= max_paths:
                            break
                    if made >= max_paths:
                        break
                if made >= max_paths:
                    break
        pair_ptr[k + 1] = n_paths
        if max_links >= 0 and n_links >= max_links:
            return pair_ptr[:k + 2], path_ptr[:n_paths + 1], links[:n_links]
    return pair_ptr, path_ptr[:n_paths + 1], links[:n_links]
