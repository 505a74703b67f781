"""Generic topology builders: ring, full mesh, single switch, leaf-spine, torus.

Each checks its arguments and returns a :class:`~hcsim.topology.model.Topology` whose NPUs
are named ``npu<i>`` in rank order. Bandwidths are per direction, in bytes per second.
"""

from __future__ import annotations

import itertools

from ..errors import bad_value
from .model import Topology
from .spec import LinkSpec, NpuSpec


def _count(field, value, minimum=1):
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise bad_value(field, value, f"an integer >= {minimum}")
    return value


def _npus(topo, n, npus_per_server, npu_kwargs):
    _count("npus_per_server", npus_per_server)
    names = []
    for i in range(n):
        name = f"npu{i}"
        topo.add_npu(name, NpuSpec(server=i // npus_per_server, local_index=i % npus_per_server, **npu_kwargs))
        names.append(name)
    return names


def ring(n: int, bandwidth_Bps: float, latency_s: float = 0.0, *, tier: str = "generic",
         bidirectional: bool = True, npus_per_server: int | None = None, **npu_kwargs) -> Topology:
    """``n`` NPUs on a ring, each joined to the next (and back if ``bidirectional``).

    Examples
    --------
    >>> ring(4, 10e9).graph.number_of_edges()
    8
    """
    _count("npus", n, 2)
    t = Topology(f"ring-{n}", f"{n} NPUs on a ring")
    names = _npus(t, n, npus_per_server or n, npu_kwargs)
    spec = LinkSpec(bandwidth_Bps, latency_s, tier)
    for i in range(n if n > 2 else 1):
        t.add_link(names[i], names[(i + 1) % n], spec, bidirectional=bidirectional)
    return t


def full_mesh(n: int, bandwidth_Bps: float, latency_s: float = 0.0, *, tier: str = "generic",
              inline_reduce: bool = False, npus_per_server: int | None = None,
              **npu_kwargs) -> Topology:
    """``n`` NPUs with a direct link between every pair (each direction ``bandwidth_Bps``).

    Every algorithm hcsim ships is contention-free here, which makes it the topology on
    which the event-driven engine must reproduce the closed forms exactly.
    """
    _count("npus", n, 2)
    t = Topology(f"fullmesh-{n}", f"{n} NPUs, a direct link between every pair")
    names = _npus(t, n, npus_per_server or n, npu_kwargs)
    spec = LinkSpec(bandwidth_Bps, latency_s, tier, inline_reduce)
    for a, b in itertools.combinations(names, 2):
        t.add_link(a, b, spec)
    return t


def single_switch(n: int, bandwidth_Bps: float, latency_s: float = 0.0, *, tier: str = "generic",
                  npus_per_server: int = 1, **npu_kwargs) -> Topology:
    """``n`` NPUs each with one link to a single non-blocking switch.

    ``latency_s`` is per hop, so an NPU-to-NPU path pays it twice.
    """
    _count("npus", n, 2)
    t = Topology(f"switch-{n}", f"{n} NPUs on one switch")
    names = _npus(t, n, npus_per_server, npu_kwargs)
    t.add_node("sw0", "switch")
    spec = LinkSpec(bandwidth_Bps, latency_s, tier)
    for name in names:
        t.add_link(name, "sw0", spec)
    return t


def leaf_spine(leaves: int, npus_per_leaf: int, spines: int, bandwidth_Bps: float,
               latency_s: float = 0.0, *, oversubscription: float = 1.0, tier: str = "roce",
               npus_per_server: int = 1, **npu_kwargs) -> Topology:
    """Two-level Clos: NPUs on leaf switches, every leaf linked to every spine.

    A leaf's uplinks together carry ``npus_per_leaf * bandwidth_Bps / oversubscription``,
    split evenly over its ``spines`` uplinks; routing spreads flows over the spines by ECMP.

    Examples
    --------
    >>> t = leaf_spine(2, 4, 2, 25e9, oversubscription=2.0)
    >>> t.link_spec("leaf0", "spine0").bandwidth_Bps / 1e9
    25.0
    """
    _count("leaves", leaves)
    _count("npus_per_leaf", npus_per_leaf)
    _count("spines", spines)
    if isinstance(oversubscription, bool) or not isinstance(oversubscription, (int, float)) or oversubscription <= 0:
        raise bad_value("oversubscription", oversubscription, "a ratio > 0 (1 = non-blocking, 2 = 2:1)")
    n = leaves * npus_per_leaf
    if n < 2:
        raise bad_value("leaves * npus_per_leaf", n, "at least 2 NPUs")
    t = Topology(f"leafspine-{leaves}x{npus_per_leaf}",
                 f"{leaves} leaves x {npus_per_leaf} NPUs, {spines} spines, {oversubscription}:1")
    names = _npus(t, n, npus_per_server, npu_kwargs)
    host = LinkSpec(bandwidth_Bps, latency_s, tier)
    up = LinkSpec(npus_per_leaf * bandwidth_Bps / oversubscription / spines, latency_s, tier)
    for s in range(spines):
        t.add_node(f"spine{s}", "switch")
    for leaf in range(leaves):
        t.add_node(f"leaf{leaf}", "switch")
        for s in range(spines):
            t.add_link(f"leaf{leaf}", f"spine{s}", up)
        for j in range(npus_per_leaf):
            t.add_link(names[leaf * npus_per_leaf + j], f"leaf{leaf}", host)
    return t


def torus(dims, bandwidth_Bps: float, latency_s: float = 0.0, *, tier: str = "generic",
          npus_per_server: int = 1, **npu_kwargs) -> Topology:
    """A 2D or 3D torus of NPUs, wrap-around links in every dimension.

    Examples
    --------
    >>> torus((4, 4), 10e9).num_npus
    16
    """
    dims = tuple(dims)
    if len(dims) not in (2, 3) or any(isinstance(d, bool) or not isinstance(d, int) or d < 2 for d in dims):
        raise bad_value("dims", dims, "2 or 3 integers >= 2, e.g. (4, 4) or (4, 4, 4)")
    coords = list(itertools.product(*(range(d) for d in dims)))
    t = Topology("torus-" + "x".join(map(str, dims)), f"{'x'.join(map(str, dims))} torus")
    names = _npus(t, len(coords), npus_per_server, npu_kwargs)
    index = {c: i for i, c in enumerate(coords)}
    spec = LinkSpec(bandwidth_Bps, latency_s, tier)
    for c in coords:
        for axis, size in enumerate(dims):
            nb = list(c)
            nb[axis] = (c[axis] + 1) % size
            u, v = names[index[c]], names[index[tuple(nb)]]
            if size == 2 and c[axis] == 1:
                continue  # a 2-long dimension has one link between its two nodes, not two
            t.add_link(u, v, spec)
    return t


def tiered_mesh(dims, bandwidth_Bps, latency_s=0.0, *, inline_reduce=False, **npu_kwargs) -> Topology:
    """Ranks on a grid (local, server[, pod]) with a direct link between every two ranks that
    differ in exactly one coordinate, with that level's bandwidth and latency.

    Every level's pairs have their own links, so hierarchical schedules are contention-free
    here: the topology on which their closed forms must hold exactly.

    Parameters
    ----------
    dims : tuple of int
        (NPUs per server, servers per pod[, pods]).
    bandwidth_Bps, latency_s : tuple of float or float
        Per level (0: inside a server, 1: between servers, 2: between pods).
    inline_reduce : tuple of bool or bool
        Per level: the level's links reduce inline.

    Examples
    --------
    >>> t = tiered_mesh((4, 2), (20e9, 5e9))
    >>> t.link_spec("npu0", "npu1").bandwidth_Bps, t.link_spec("npu0", "npu4").bandwidth_Bps
    (20000000000.0, 5000000000.0)
    """
    dims = tuple(dims)
    if len(dims) not in (2, 3) or any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in dims):
        raise bad_value("dims", dims, "(npus_per_server, servers[, pods]), integers >= 1")
    k = len(dims)

    def per_level(name, value):
        vals = tuple(value) if isinstance(value, (tuple, list)) else (value,) * k
        if len(vals) != k:
            raise bad_value(name, value, f"one value or {k} (one per level)")
        return vals

    bws, lats, inl = per_level("bandwidth_Bps", bandwidth_Bps), per_level("latency_s", latency_s), \
        per_level("inline_reduce", inline_reduce)
    specs = [LinkSpec(bws[d], lats[d], ("hccs", "roce", "roce")[d], bool(inl[d])) for d in range(k)]
    local, servers = dims[0], dims[1]
    pods = dims[2] if k == 3 else 1
    t = Topology("tiered-mesh-" + "x".join(map(str, dims)), f"{'x'.join(map(str, dims))} tiered mesh")
    coords = []
    for pod in range(pods):
        for s in range(servers):
            for lo in range(local):
                i = len(coords)
                t.add_npu(f"npu{i}", NpuSpec(server=pod * servers + s, pod=pod, local_index=lo, **npu_kwargs))
                coords.append((lo, s, pod))
    for i, a in enumerate(coords):
        for j in range(i + 1, len(coords)):
            b = coords[j]
            diff = [d for d in range(3) if a[d] != b[d]]
            if len(diff) == 1 and diff[0] < k:
                t.add_link(f"npu{i}", f"npu{j}", specs[diff[0]])
    if t.num_npus < 2:
        raise bad_value("dims", dims, "at least 2 NPUs in all")
    return t

