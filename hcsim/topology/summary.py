"""Topology summaries: counts, links per tier, bisection bandwidth."""

from __future__ import annotations

from collections import Counter

import networkx as nx

from ..errors import bad_value
from .model import Topology, _check_graph

MAX_BISECTION_LINKS = 50_000
"""Most directed links :func:`summarize` computes the bisection bandwidth for (a max flow over the
whole graph: 12 s on the 2,048-server A2 pod's 184k links); beyond, it reports none and
:func:`bisection_bandwidth_Bps` still computes it when called."""


def _checked(topo):
    """``topo`` if it is a Topology whose graph hcsim can read (else one line)."""
    if not isinstance(topo, Topology):
        raise bad_value("topology", type(topo).__name__, "a Topology")
    _check_graph(topo)
    return topo


def bisection_bandwidth_Bps(topo) -> float:
    """Max flow (bytes/s) from the first half of the NPUs (rank order) to the second half.

    Exact minimum bisection is NP-hard in general; this is the cut for the rank-order split,
    which for the regular topologies hcsim builds is the usual bisection.
    """
    npus = _checked(topo).npus
    half = len(npus) // 2
    if half == 0:
        return 0.0
    g = nx.DiGraph()
    for u, v, d in topo.graph.edges(data=True):
        g.add_edge(u, v, capacity=d["spec"].bandwidth_Bps)
    for n in npus[:half]:
        g.add_edge("__source__", n)  # no capacity attribute: infinite
    for n in npus[half:2 * half]:
        g.add_edge(n, "__sink__")
    return float(nx.maximum_flow_value(g, "__source__", "__sink__"))


def summarize(topo) -> dict:
    """Plain facts about a topology, for ``hcsim topo show``."""
    _checked(topo)
    kinds = Counter(d["kind"] for _, d in topo.graph.nodes(data=True))
    tiers: dict[str, dict] = {}
    for _, _, d in topo.graph.edges(data=True):
        s = d["spec"]
        t = tiers.setdefault(s.tier, {"links": 0, "bandwidths_GBps": set(), "latencies_us": set()})
        t["links"] += 1
        t["bandwidths_GBps"].add(round(s.bandwidth_Bps / 1e9, 6))
        t["latencies_us"].add(round(s.latency_s * 1e6, 6))
    servers = {(topo.npu_spec(n).pod, topo.npu_spec(n).server) for n in topo.npus}
    return {"name": topo.name, "description": topo.description, "npus": kinds.get("npu", 0),
            "servers": len(servers), "nodes": dict(kinds), "tiers": tiers,
            "links": topo.graph.number_of_edges(),
            "bisection_GBps": (bisection_bandwidth_Bps(topo) / 1e9
                               if topo.graph.number_of_edges() <= MAX_BISECTION_LINKS else None),
            "step_overhead_us": topo.defaults.step_overhead_s * 1e6,
            "launch_overhead_us": topo.defaults.launch_overhead_s * 1e6}


def format_summary(info: dict) -> str:
    lines = [f"topology: {info['name']}", f"  {info['description']}" if info["description"] else None,
             f"  NPUs: {info['npus']} in {info['servers']} server(s); nodes: "
             + ", ".join(f"{k} {v}" for k, v in sorted(info["nodes"].items())),
             "  directed links per tier:"]
    for tier, t in sorted(info["tiers"].items()):
        bws = ", ".join(f"{b:g}" for b in sorted(t["bandwidths_GBps"]))
        lats = ", ".join(f"{x:g}" for x in sorted(t["latencies_us"]))
        lines.append(f"    {tier:<8} {t['links']:>6} links, {bws} GB/s, {lats} us")
    if info["bisection_GBps"] is None:
        lines.append(f"  bisection bandwidth: not computed ({info['links']:,} links, more than "
                     f"{MAX_BISECTION_LINKS:,}: hcsim.topology.summary.bisection_bandwidth_Bps computes it)")
    else:
        lines.append(f"  bisection bandwidth (rank-order halves, one direction): {info['bisection_GBps']:.1f} GB/s")
    lines.append(f"  per-step overhead {info['step_overhead_us']:g} us, launch overhead {info['launch_overhead_us']:g} us")
    return "\n".join(x for x in lines if x is not None)
