"""Generic topology builders: ring, full mesh, single switch, leaf-spine, torus, tiered mesh.

Each checks its arguments (types and ranges, one line naming the argument), counts the NPUs,
nodes and directed links it would make *before* it makes them -- refusing beyond
:data:`~hcsim.limits.MAX_NPUS`, :data:`~hcsim.limits.MAX_NODES` or
:data:`~hcsim.limits.MAX_LINKS` with the count and the limit -- and returns a
:class:`~hcsim.topology.model.Topology` whose NPUs are named ``npu<i>`` in rank order.
Bandwidths are per direction, in bytes per second.
"""

from __future__ import annotations

import itertools
import math

from ..errors import ConfigError, WorkLimitError, bad_value, is_int, shown
from ..limits import MAX_LINKS, MAX_NODES, MAX_NPUS
from .model import Topology
from .spec import LINK_TIERS, LinkSpec, NpuSpec, choice, flag, integer, rate, real, seconds

NPU_KEYWORDS = ("reduce_Bps", "injection_Bps", "ejection_Bps", "half_duplex", "exchange_Bps", "engine_Bps")
"""Endpoint fields of :class:`NpuSpec` the generic builders pass on (``**npu_kwargs``)."""


def _count(field, value, minimum=1):
    """An integer argument >= ``minimum`` (no upper bound here: the size check bounds it)."""
    return integer(field, value, minimum)


def _big(n: int) -> str:
    """``n`` with thousands separators, or its order of magnitude when it is absurd."""
    return f"{n:,}" if n < 10**15 else f"about 10^{int(n.bit_length() * math.log10(2))}"


def check_size(builder: str, args: str, npus: int, nodes: int, links: int) -> None:
    """Refuse, before building, a topology of more than MAX_NPUS NPUs, MAX_NODES nodes or
    MAX_LINKS directed links: ``args = ...: <builder> would make N links; at most ...``
    (``args`` names the arguments that set the size, see :func:`_args`)."""
    for count, limit, name, noun in ((npus, MAX_NPUS, "MAX_NPUS", "NPUs"), (nodes, MAX_NODES, "MAX_NODES", "nodes"),
                                     (links, MAX_LINKS, "MAX_LINKS", "directed links")):
        if count > limit:
            raise WorkLimitError(f"{args}: {builder} would make {_big(count)} {noun}; at most {limit:,} "
                                 f"(hcsim.limits.{name}): build a smaller topology")


def _args(**kw) -> str:
    return ", ".join(f"{k} = {shown(v)}" for k, v in kw.items())


def _npu_spec(builder: str, npu_kwargs: dict) -> dict:
    """Check the endpoint keywords a generic builder forwards to NpuSpec (once, not per NPU)."""
    for k, v in npu_kwargs.items():
        if k not in NPU_KEYWORDS:
            raise bad_value(k, v, f"not a parameter of {builder}; NPU endpoint keywords: {', '.join(NPU_KEYWORDS)}")
    NpuSpec(**npu_kwargs)
    return npu_kwargs


def _link(bandwidth_Bps, latency_s, tier, inline_reduce=False, names=("bandwidth_Bps", "latency_s")) -> LinkSpec:
    """A LinkSpec from builder arguments, each checked under the argument's own name."""
    return LinkSpec(rate(names[0], bandwidth_Bps), seconds(names[1], latency_s), choice("tier", tier, LINK_TIERS),
                    flag("inline_reduce", inline_reduce))


def _ratio(field: str, value) -> float:
    """A finite ratio > 0 (oversubscription)."""
    allowed = "a finite ratio > 0 (1 = non-blocking, 2 = 2:1)"
    v = real(field, value, allowed)
    if not (math.isfinite(v) and v > 0):
        raise bad_value(field, value, allowed)
    return v


def _uplink(bandwidth_Bps: float, latency_s: float, tier: str, field: str, value) -> LinkSpec:
    """A derived uplink (capacity from an oversubscription ratio), refused under that ratio's name."""
    try:
        return LinkSpec(bandwidth_Bps, latency_s, tier)
    except ConfigError:
        raise bad_value(field, value, f"makes an uplink of {bandwidth_Bps:g} B/s, outside the bandwidth range") from None


def _npus(topo, n, npus_per_server, npu_kwargs):
    names = []
    for i in range(n):
        name = f"npu{i}"
        topo.add_npu(name, NpuSpec(server=i // npus_per_server, local_index=i % npus_per_server, **npu_kwargs))
        names.append(name)
    return names


def _per_server(value, n):
    """``npus_per_server`` of ring and full mesh: None (all in one server) or an integer >= 1."""
    return n if value is None else _count("npus_per_server", value)


def ring(n: int, bandwidth_Bps: float, latency_s: float = 0.0, *, tier: str = "generic",
         bidirectional: bool = True, npus_per_server: int | None = None, **npu_kwargs) -> Topology:
    """``n`` NPUs on a ring, each joined to the next (and back if ``bidirectional``).

    Examples
    --------
    >>> ring(4, 10e9).graph.number_of_edges()
    8
    """
    n = integer("n", n, 2, what="a number of npus, an integer")
    bidirectional = flag("bidirectional", bidirectional)
    spec = _link(bandwidth_Bps, latency_s, tier)
    per = _per_server(npus_per_server, n)
    npu_kwargs = _npu_spec("ring", npu_kwargs)
    check_size("ring", _args(n=n), n, n, (n if n > 2 else 1) * (2 if bidirectional else 1))
    t = Topology(f"ring-{n}", f"{n} NPUs on a ring")
    names = _npus(t, n, per, npu_kwargs)
    for i in range(n if n > 2 else 1):
        t.add_link(names[i], names[(i + 1) % n], spec, bidirectional=bidirectional)
    return t


def full_mesh(n: int, bandwidth_Bps: float, latency_s: float = 0.0, *, tier: str = "generic",
              inline_reduce: bool = False, npus_per_server: int | None = None,
              **npu_kwargs) -> Topology:
    """``n`` NPUs with a direct link between every pair (each direction ``bandwidth_Bps``).

    Every algorithm hcsim ships is contention-free here, which makes it the topology on
    which the event-driven engine must reproduce the closed forms exactly.

    Examples
    --------
    >>> full_mesh(4, 10e9).graph.number_of_edges()
    12
    """
    n = integer("n", n, 2, what="a number of npus, an integer")
    spec = _link(bandwidth_Bps, latency_s, tier, inline_reduce)
    per = _per_server(npus_per_server, n)
    npu_kwargs = _npu_spec("full_mesh", npu_kwargs)
    check_size("full_mesh", _args(n=n), n, n, n * (n - 1))
    t = Topology(f"fullmesh-{n}", f"{n} NPUs, a direct link between every pair")
    names = _npus(t, n, per, npu_kwargs)
    for a, b in itertools.combinations(names, 2):
        t.add_link(a, b, spec)
    return t


def single_switch(n: int, bandwidth_Bps: float, latency_s: float = 0.0, *, tier: str = "generic",
                  npus_per_server: int = 1, in_network_efficiency: float | None = None, **npu_kwargs) -> Topology:
    """``n`` NPUs each with one link to a single non-blocking switch.

    ``latency_s`` is per hop, so an NPU-to-NPU path pays it twice. ``in_network_efficiency``: the
    switch reduces and multicasts in the network at this share of the link rate (NVLink SHARP on
    an NVSwitch: NCCL's ``nvlsEfficiency``, 0.85 Hopper, 0.74 Blackwell), which the ``nvls``
    AllReduce needs; None (default): it only forwards.

    Examples
    --------
    >>> single_switch(4, 10e9).graph.number_of_nodes()
    5
    """
    n = integer("n", n, 2, what="a number of npus, an integer")
    spec = _link(bandwidth_Bps, latency_s, tier)
    per = _count("npus_per_server", npus_per_server)
    npu_kwargs = _npu_spec("single_switch", npu_kwargs)
    check_size("single_switch", _args(n=n), n, n + 1, 2 * n)
    t = Topology(f"switch-{n}", f"{n} NPUs on one switch")
    names = _npus(t, n, per, npu_kwargs)
    t.add_node("sw0", "switch", in_network_efficiency)
    for name in names:
        t.add_link(name, "sw0", spec)
    return t


def leaf_spine(leaves: int, npus_per_leaf: int, spines: int, bandwidth_Bps: float,
               latency_s: float = 0.0, *, oversubscription: float = 1.0, tier: str = "roce",
               npus_per_server: int = 1, rails: bool = False, **npu_kwargs) -> Topology:
    """Two-level Clos: NPUs on leaf switches, every leaf linked to every spine.

    A leaf's uplinks together carry ``npus_per_leaf * bandwidth_Bps / oversubscription``,
    split evenly over its ``spines`` uplinks; routing spreads flows over the spines by ECMP.

    ``rails=True`` builds the rail-optimised variant instead (GPU servers whose every GPU has
    its own NIC: NVIDIA's DGX SuperPOD reference design cables NIC ``j`` of every server to
    rail switch ``j``; Google Cloud's A3 Mega VMs have 8 GPU NICs, one per H100). The leaf is
    the server's internal switch (NVSwitch), there are no leaf-spine links, and NPU ``j`` of
    every leaf has its own link to spine ``j`` (``spines`` must equal ``npus_per_leaf``), of
    ``bandwidth_Bps / oversubscription``: the same aggregate per leaf as the uplinks. A
    cross-leaf flow between NPUs of the same index then crosses only its own NIC (NCCL pins
    each GPU to its nearest NIC); one between different indices goes over the server's switch
    to the NPU on the destination's rail, or out of its own rail and over the destination
    server's switch (NCCL's PXN takes the first), whichever ECMP picks.

    Examples
    --------
    >>> t = leaf_spine(2, 4, 2, 25e9, oversubscription=2.0)
    >>> t.link_spec("leaf0", "spine0").bandwidth_Bps / 1e9
    25.0
    >>> r = leaf_spine(2, 4, 4, 25e9, oversubscription=2.0, rails=True)
    >>> r.link_spec("npu5", "spine1").bandwidth_Bps / 1e9, r.graph.has_edge("leaf0", "spine0")
    (12.5, False)
    """
    leaves = _count("leaves", leaves)
    npus_per_leaf = _count("npus_per_leaf", npus_per_leaf)
    spines = _count("spines", spines)
    oversubscription = _ratio("oversubscription", oversubscription)
    rails = flag("rails", rails)
    host = _link(bandwidth_Bps, latency_s, tier)
    per = _count("npus_per_server", npus_per_server)
    npu_kwargs = _npu_spec("leaf_spine", npu_kwargs)
    n = leaves * npus_per_leaf
    if n < 2:
        raise bad_value("leaves * npus_per_leaf", n, "at least 2 NPUs")
    if rails and spines != npus_per_leaf:
        raise bad_value("spines", spines, f"{npus_per_leaf} with rails=True (one rail switch per NPU index: "
                        "npus_per_leaf)")
    check_size("leaf_spine", _args(leaves=leaves, npus_per_leaf=npus_per_leaf, spines=spines),
               n, n + leaves + spines, 4 * n if rails else 2 * n + 2 * leaves * spines)
    up = _uplink(npus_per_leaf * host.bandwidth_Bps / oversubscription / spines, host.latency_s, host.tier,
                 "oversubscription", oversubscription)
    t = Topology(f"leafspine-{leaves}x{npus_per_leaf}" + ("-rails" if rails else ""),
                 f"{leaves} leaves x {npus_per_leaf} NPUs, {spines} spines, {oversubscription:g}:1"
                 + (", rail-optimised (NPU j on spine j)" if rails else ""))
    names = _npus(t, n, per, npu_kwargs)
    for s in range(spines):
        t.add_node(f"spine{s}", "switch")
    for leaf in range(leaves):
        t.add_node(f"leaf{leaf}", "switch")
        if not rails:
            for s in range(spines):
                t.add_link(f"leaf{leaf}", f"spine{s}", up)
        for j in range(npus_per_leaf):
            t.add_link(names[leaf * npus_per_leaf + j], f"leaf{leaf}", host)
            if rails:
                t.add_link(names[leaf * npus_per_leaf + j], f"spine{j}", up)
    return t


def _dims(value, minimum: int, allowed: str) -> tuple:
    """2 or 3 integers >= ``minimum`` from a tuple, list or other iterable (read at most 4)."""
    if isinstance(value, (str, bytes, dict)):
        raise bad_value("dims", value, allowed)
    try:
        dims = tuple(itertools.islice(iter(value), 4))
    except TypeError:
        raise bad_value("dims", value, allowed) from None
    if len(dims) not in (2, 3):
        raise bad_value("dims", dims, allowed)
    if any(not is_int(d) or d < minimum for d in dims):
        raise bad_value("dims", dims, allowed)
    return tuple(int(d) for d in dims)


def torus(dims, bandwidth_Bps: float, latency_s: float = 0.0, *, tier: str = "generic",
          npus_per_server: int = 1, **npu_kwargs) -> Topology:
    """A 2D or 3D torus of NPUs, wrap-around links in every dimension.

    Examples
    --------
    >>> torus((4, 4), 10e9).num_npus
    16
    """
    dims = _dims(dims, 2, "2 or 3 integers >= 2, e.g. (4, 4) or (4, 4, 4)")
    spec = _link(bandwidth_Bps, latency_s, tier)
    per = _count("npus_per_server", npus_per_server)
    npu_kwargs = _npu_spec("torus", npu_kwargs)
    n = math.prod(dims)
    check_size("torus", _args(dims=dims), n, n, n * sum(2 if d > 2 else 1 for d in dims))
    coords = list(itertools.product(*(range(d) for d in dims)))
    t = Topology("torus-" + "x".join(map(str, dims)), f"{'x'.join(map(str, dims))} torus")
    names = _npus(t, len(coords), per, npu_kwargs)
    index = {c: i for i, c in enumerate(coords)}
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
    dims = _dims(dims, 1, "(npus_per_server, servers[, pods]), integers >= 1")
    k = len(dims)

    def per_level(name, value):
        vals = tuple(value) if isinstance(value, (tuple, list)) else (value,) * k
        if len(vals) != k:
            raise bad_value(name, value, f"one value or {k} (one per level)")
        return vals

    bws, lats, inl = per_level("bandwidth_Bps", bandwidth_Bps), per_level("latency_s", latency_s), \
        per_level("inline_reduce", inline_reduce)
    specs = [LinkSpec(rate(f"bandwidth_Bps[{d}]", bws[d]), seconds(f"latency_s[{d}]", lats[d]),
                      ("hccs", "roce", "roce")[d], flag(f"inline_reduce[{d}]", inl[d])) for d in range(k)]
    npu_kwargs = _npu_spec("tiered_mesh", npu_kwargs)
    local, servers = dims[0], dims[1]
    pods = dims[2] if k == 3 else 1
    n = local * servers * pods
    if n < 2:
        raise bad_value("dims", dims, "at least 2 NPUs in all")
    check_size("tiered_mesh", _args(dims=dims), n, n, n * sum(d - 1 for d in dims))
    t = Topology("tiered-mesh-" + "x".join(map(str, dims)), f"{'x'.join(map(str, dims))} tiered mesh")
    for pod in range(pods):
        for s in range(servers):
            for lo in range(local):
                i = (pod * servers + s) * local + lo
                t.add_npu(f"npu{i}", NpuSpec(server=pod * servers + s, pod=pod, local_index=lo, **npu_kwargs))
    # Each rank's higher-numbered peers, level by level: they come out in ascending order
    # (a server's ranks, then the same local index in later servers, then in later pods).
    for pod in range(pods):
        for s in range(servers):
            for lo in range(local):
                i = (pod * servers + s) * local + lo
                for j in range(i + 1, i + local - lo):
                    t.add_link(f"npu{i}", f"npu{j}", specs[0])
                for j in range(i + local, (pod + 1) * servers * local, local):
                    t.add_link(f"npu{i}", f"npu{j}", specs[1])
                if k == 3:
                    for j in range(i + servers * local, n, servers * local):
                        t.add_link(f"npu{i}", f"npu{j}", specs[2])
    return t
