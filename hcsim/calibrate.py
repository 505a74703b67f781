"""Fit a topology's link bandwidths (per tier), per-step overhead and launch overhead to
measured collective times, by least squares on log(time), and write the result with its
provenance.

The fit scales every link of a tier by one factor, so the topology's shape (which links
exist, their relative speeds within a tier) stays as built; the per-step and launch
overheads are fitted as values. The optimiser is a small Nelder-Mead over the logarithms of
the parameters (numpy only), started from the topology's own values.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt

import numpy as np
import pandas as pd

from .api import simulate
from .errors import (
    ConfigError,
    HcsimError,
    WorkLimitError,
    bad_value,
    check_topology,
    is_int,
    is_real,
    unknown_name,
)
from .limits import MAX_CALIBRATION_SIMULATIONS, MAX_CALIBRATION_WORK, MAX_EVALS
from .topology.io import load_topology
from .topology.spec import LinkSpec
from .validate import measured_ranks, predict_row, row_algorithm

LOG_SCALE_BOUND = 40.0
"""The fit keeps every fitted factor within e^-40..e^40 of where it started (a parameter no
point constrains cannot drift to an overflow)."""


def scaled(topo, tier_scale: dict, step_overhead_s: float, launch_scale: float = 1.0, launch_overhead_s=None):
    """A copy of ``topo`` with each tier's links scaled by ``tier_scale[tier]``, the per-step
    overhead set to ``step_overhead_s`` and every launch overhead (the default and the
    per-collective ones) scaled by ``launch_scale`` (or the default set to
    ``launch_overhead_s``); everything else in its defaults (message regimes, expansion
    modes) is kept."""
    check_topology(topo)
    if not isinstance(tier_scale, dict) or not all(is_real(v) and 0 < v < 1e30 for v in tier_scale.values()):
        raise bad_value("tier_scale", tier_scale, "a dict of tier name -> rate factor > 0")
    step_overhead_s = _seconds("step_overhead_s", step_overhead_s)
    launch_scale = _positive("launch_scale", launch_scale)
    if launch_overhead_s is not None:
        launch_overhead_s = _seconds("launch_overhead_s", launch_overhead_s)
    out = topo.copy()
    for _, _, d in out.graph.edges(data=True):
        s = d["spec"]
        if s.tier in tier_scale:
            d["spec"] = LinkSpec(s.bandwidth_Bps * tier_scale[s.tier], s.latency_s, s.tier, s.inline_reduce)
    base = topo.defaults
    launch = base.launch_overhead_s * launch_scale if launch_overhead_s is None else launch_overhead_s
    out.defaults = dataclasses.replace(
        base, step_overhead_s=step_overhead_s, launch_overhead_s=launch,
        launch_overhead_by_collective_s=tuple((c, v * launch_scale) for c, v in base.launch_overhead_by_collective_s))
    return out


def link_classes(topo) -> list[tuple[str, float]]:
    """The topology's link classes: the distinct ``(tier, bandwidth_Bps)`` of its links, sorted.
    Within a tier, links of different rates play different parts (a leaf-spine's host links and
    its uplinks; a server's memory and its NIC), so a fit may scale one class and keep the rest."""
    return sorted({(d["spec"].tier, float(d["spec"].bandwidth_Bps)) for _, _, d in topo.graph.edges(data=True)})


def rank_link_classes(topo) -> set[tuple[str, float]]:
    """The :func:`link_classes` of the links with an NPU (a rank) at one end: each rank's own
    attachment, which every transfer it makes crosses (a CPU rank's share of its node's memory,
    a GPU's NVLink), as opposed to links deeper in the network (a node's NIC, an uplink)."""
    g = topo.graph
    return {(d["spec"].tier, float(d["spec"].bandwidth_Bps)) for u, v, d in g.edges(data=True)
            if g.nodes[u].get("kind") == "npu" or g.nodes[v].get("kind") == "npu"}


NETWORK_LINK_WORK = 2_000_000_000
"""Most rank-pair x link tests :func:`network_links` makes (ranks squared times links): about ten
seconds of numpy; the corpus's largest MPI topology (288 ranks, 592 links) needs 49 million."""


def network_links(topo) -> list[tuple[str, str]]:
    """The links of ``topo``'s network tier: those a minimum-hop path (the routes the engine takes)
    between two ranks on different servers may cross and no such path between two ranks of one
    server does. On a leaf-spine cluster built with a node per leaf, each node's uplink to the
    spine and back; on a rail-optimised one, each GPU's link to its rail switch; on one server,
    none. Sorted, as ``(src, dst)`` pairs of the directed links.

    Examples
    --------
    >>> from hcsim.topology import leaf_spine
    >>> network_links(leaf_spine(2, 2, 1, 10e9, npus_per_server=2))
    [('leaf0', 'spine0'), ('leaf1', 'spine0'), ('spine0', 'leaf0'), ('spine0', 'leaf1')]
    """
    import networkx as nx

    g = topo.graph
    npus = [n for n, d in g.nodes(data=True) if d.get("kind") == "npu"]
    server = np.array([topo.npu_spec(n).server for n in npus])
    if len(set(server.tolist())) < 2:
        return []
    edges = list(g.edges())
    if len(npus) ** 2 * len(edges) > NETWORK_LINK_WORK:
        raise WorkLimitError(f"network_links: {len(npus)} ranks and {len(edges)} links are "
                             f"{len(npus) ** 2 * len(edges):,} tests, more than NETWORK_LINK_WORK = "
                             f"{NETWORK_LINK_WORK:,}")
    nodes = {n: i for i, n in enumerate(g.nodes)}
    far = 1 << 30
    out_d = np.full((len(npus), len(nodes)), far, dtype=np.int64)  # hops from each rank to each node
    in_d = np.full((len(npus), len(nodes)), far, dtype=np.int64)  # hops from each node to each rank
    rev = g.reverse(copy=False)
    for i, n in enumerate(npus):
        for m, h in nx.single_source_shortest_path_length(g, n).items():
            out_d[i, nodes[m]] = h
        for m, h in nx.single_source_shortest_path_length(rev, n).items():
            in_d[i, nodes[m]] = h
    pair = out_d[:, [nodes[n] for n in npus]]  # hops from rank s to rank t
    same = server[:, None] == server[None, :]
    found = []
    for u, v in edges:
        on = (out_d[:, nodes[u], None] + 1 + in_d[None, :, nodes[v]]) == pair  # (u, v) on a shortest s -> t path
        if on[~same].any() and not on[same].any():
            found.append((u, v))
    return sorted(found)


def with_network_latency_s(topo, latency_s: float, links=None):
    """A copy of ``topo`` with ``latency_s`` on each of its :func:`network_links` (or ``links``),
    every other link and every default as it was: a message between two servers pays it on each
    network link its path crosses (twice on a leaf-spine cluster: up and down), one inside a
    server none of it."""
    return _set_latency(topo.copy(), network_links(topo) if links is None else links, latency_s)


def _set_latency(topo, links, latency_s: float):
    """``topo`` with ``latency_s`` on each of ``links``, in place; returns it."""
    g = topo.graph
    for u, v in links:
        s = g.edges[u, v]["spec"]
        g.edges[u, v]["spec"] = LinkSpec(s.bandwidth_Bps, float(latency_s), s.tier, s.inline_reduce)
    return topo


SLOWER_PROBE = 0.1
"""With ``prefer_rank_links``, ``fit="bottleneck"`` also tries the ranks' own link classes at
this factor: one the largest point crosses that does not limit it as built (a CPU rank's memory
share under a slower NIC) limits it once this much slower, and is then a candidate too."""

RANK_LINK_MARGIN = 0.01
"""With ``prefer_rank_links``, ``fit="bottleneck"`` fits a class deeper in the network instead
of the ranks' own links only when it leaves an RMS log error lower by more than this (1%): when
both fit the points, the ranks' own rate is fitted and the network keeps its spec rates."""


SPEC_PULL_TOLERANCE = 0.01
"""After the fit, each fitted scale is moved back toward the topology as built (scale 1) as far as
no calibration point's prediction moves by more than this (1%, in log time): a rate that stops
binding beyond some value (a rank's link once the NIC behind it is slower) is left where the
points stop telling, not wherever the optimiser wandered in the flat part (:func:`_pull_to_spec`)."""

PULL_ELASTICITY = 0.1
"""... and only as far as the points' predictions hardly depend on the scale there: a move of
``d`` in log scale may move a point by at most this times ``d`` in log time. A rate that binds a
point (time inversely proportional to it: elasticity 1) stays as fitted; a rate that has stopped
binding (elasticity near 0) is pulled."""

PULL_STEPS = 8
"""Bisection steps of :func:`_pull_to_spec` per fitted scale (a factor 2^-8 of its log scale)."""

UNPINNED_LAUNCH_TOLERANCE = 1e-3
"""With ``launch_overlap`` (a call costs the larger of its launch and its device time), a fitted launch below
every calibration point's device time binds none of them, and the points say nothing of it: the fit gives the
topology's own launch back where that moves no point by more than this (0.1%, in log time), and reports
``launch_pinned`` False."""


RANK_REDUCE_RATIO = 4.0
"""With ``rank_reduce_ratio``, the rate at which a CPU rank reduces what it receives, as a multiple
of its own link's rate (its transfer rate through the node's memory). A shared-memory transfer
is a copy in and a copy out (the sender reads its buffer and writes the shared segment, the
receiver reads the segment and writes its buffer: four memory streams a byte, as STREAM counts
a Copy as a read and a write); reducing the received block into the destination instead of
copying it there adds one stream (the destination is read as well: a STREAM Add reads two and
writes one), a quarter of the transfer's, with the block just received still in cache. So a
rank reduces at four times its transfer rate, and a reduce-scatter step costs 1.25 times a copy
step. Used by the corpus for MPI ranks (:data:`hcsim.corpus.CPU_RANK_TRANSPORTS`)."""


CACHE_LINE_BYTES = 64
"""The x86 cache line: the unit every load and store moves between a core and memory (Intel 64 and
IA-32 Architectures Optimization Reference Manual; the corpus's MPI nodes are Xeons)."""

BLOCK_OPERATION_LINES = 3
"""Cache lines of memory traffic one block-at-a-time copy costs a CPU rank however small the block:
a line of the source read, a line of the destination read for ownership and that line written back
(a write-allocate copy moves three streams where it copies two: McCalpin's STREAM notes on counting
bytes). With :data:`CACHE_LINE_BYTES`, 192 bytes at the rank's share of its node's memory
bandwidth (the topology's rank links as built: a spec figure, not the fitted rate). Used for the
datatype work of MPI libraries' Bruck alltoall (:func:`block_operation_seconds`); not a fitted
number, but its use for blocks that sit in cache is a hypothesis (docs/validation.md, change 25)."""


def block_operation_seconds(operations: int, rank_Bps: float) -> float:
    """Seconds ``operations`` block-at-a-time copies take one CPU rank whose share of its node's
    memory bandwidth is ``rank_Bps``: :data:`BLOCK_OPERATION_LINES` cache lines of
    :data:`CACHE_LINE_BYTES` each.

    Examples
    --------
    Open MPI's Bruck alltoall on 64 ranks (640 block operations) on a CSD3 cclake rank (8.8 GB/s):

    >>> round(block_operation_seconds(640, 8.8e9) * 1e6, 2)
    13.96
    """
    if not is_int(operations) or operations < 0:
        raise bad_value("operations", operations, "a whole number >= 0")
    return int(operations) * BLOCK_OPERATION_LINES * CACHE_LINE_BYTES / _positive("rank_Bps", rank_Bps, 1e15)


def _positive(name: str, value, upper: float = 1e30) -> float:
    """``value`` as a float in (0, upper], or a one-line error naming ``name``."""
    if not is_real(value) or not 0 < float(value) <= upper:
        raise bad_value(name, value, f"a number above 0, at most {upper:g}")
    return float(value)


def _seconds(name: str, value, upper: float = 1e6) -> float:
    """``value`` as seconds in [0, upper], or a one-line error naming ``name``."""
    if not is_real(value) or not 0 <= float(value) <= upper:
        raise bad_value(name, value, f"seconds from 0 to {upper:g}")
    return float(value)


def with_rank_reduce(topo, ratio: float):
    """``topo`` with every NPU's ``reduce_Bps`` set to ``ratio`` times the rate of its own
    link (the slowest link leaving it), in place; returns it. A CPU rank's link stands for its
    transfers through its node's memory, and its reductions go through the same memory
    (:data:`RANK_REDUCE_RATIO`).

    Examples
    --------
    >>> from hcsim.topology import single_switch
    >>> t = with_rank_reduce(single_switch(2, 1e9), 4.0)
    >>> t.npu_spec(t.npus[0]).reduce_Bps
    4000000000.0
    """
    check_topology(topo)
    ratio = _positive("rank_reduce_ratio", ratio, 1e3)
    g = topo.graph
    for n, d in g.nodes(data=True):
        if d.get("kind") != "npu":
            continue
        rates = [e["spec"].bandwidth_Bps for _, _, e in g.out_edges(n, data=True)]
        if rates:
            d["spec"] = dataclasses.replace(d["spec"], reduce_Bps=ratio * min(rates))
    return topo


def class_scaled(topo, klass: tuple[str, float], factor: float, step_overhead_s: float):
    """A copy of ``topo`` with the links of one :func:`link_classes` class scaled by ``factor``
    and the per-step overhead set to ``step_overhead_s``; everything else kept."""
    check_topology(topo)
    factor = _positive("factor", factor)
    step_overhead_s = _seconds("step_overhead_s", step_overhead_s)
    out = topo.copy()
    for _, _, d in out.graph.edges(data=True):
        s = d["spec"]
        if (s.tier, float(s.bandwidth_Bps)) == klass:
            d["spec"] = LinkSpec(s.bandwidth_Bps * factor, s.latency_s, s.tier, s.inline_reduce)
    out.defaults = dataclasses.replace(topo.defaults, step_overhead_s=step_overhead_s)
    return out


NCCL_LL_EFFICIENCY = 0.25
"""NCCL's ring LL protocol moves data at a quarter of the link rate in its own cost model for
an allreduce or any multi-node collective (NVIDIA/nccl src/graph/tuning.cc, as read in a 2.2x
version with MNNVL support, ``ncclTopoTuneModel``: ring + LL ``busBw * 1.0/4.0``; some later
versions use 0.5; LL sends 8-byte words of 4 data bytes and 4 flag bytes)."""

NCCL_LL_HOP_LATENCY_S = {"nvlink": 0.6e-6, "net": 2.7e-6}
"""NCCL's latency of one ring step under LL, per hop kind: ``hwLat`` Ring LL = 0.6 us over NVLink and
2.7 us over the network (NVIDIA/nccl src/graph/tuning.cc, ``hwLatencies``, read at 5067397c,
2026-06-11: NVLink Ring {LL, LL128, Simple} = {0.6, 1.9, 3.4}, network {2.7, 4.0, 14.0} us).
The corpus gives it as the per-step overhead of an NVLink-only NCCL system
(:data:`hcsim.corpus.CITED_STEP_TRANSPORTS`) and fits the per-call launch cost instead."""

NCCL_LL128_LATENCY_RATIO = {"nvlink": 1.9 / 0.6}
"""How much longer a ring step takes under NCCL's LL128 protocol than under LL, per hop kind where
NCCL enables LL128 by default: ``hwLat`` NVLink Ring LL128 = 1.9 us against LL's 0.6 (tuning.cc,
as :data:`NCCL_LL_HOP_LATENCY_S`). NCCL enables LL128 by default where the ring's paths inside a
node are NVLink (``typeIntra <= PATH_NVB``) on Volta and later GPUs (``ncclTopoTuneModel``, the same
commit); between nodes it also asks that each GPU reach its NIC within a PCIe switch (``typeInter <=
PATH_PXB``, or by PXN on Hopper), which the corpus's network systems do not say, so the network hop
has no entry: it keeps LL and Simple."""

NCCL_LL128_EFFICIENCY = 0.92
"""LL128's share of Simple's rate in NCCL's model: ring + LL128 ``busBw * 0.92`` ("120.0/128.0": 120
data bytes in each 128-byte line; tuning.cc, the same commit), capped per channel at
``perChMaxRingLL128Bws`` (Hopper 36.7 GB/s, which 16 or more channels keep from binding)."""

NCCL_SIMPLE_LATENCY_RATIO = {"nvlink": 3.4 / 0.6, "net": 14.0 / 2.7}
"""How much longer a ring step takes under NCCL's Simple protocol than under LL, per hop kind:
``hwLat`` Ring {LL, Simple} = {0.6, 3.4} us over NVLink and {2.7, 14.0} us over the network
(NVIDIA/nccl src/graph/tuning.cc, the same version)."""


def _user_regimes(regimes, step_overhead_s: float, link_Bps: float):
    """``regimes(step_overhead_s, link_Bps)``, a caller's function: what it raises, or a result
    that is not a :class:`~hcsim.engine.regimes.MessageRegimes`, becomes one line."""
    from .engine.regimes import MessageRegimes

    allowed = "a callable (step_overhead_s, link_Bps) -> MessageRegimes"
    try:
        out = regimes(step_overhead_s, link_Bps)
    except HcsimError:
        raise
    except Exception as exc:  # a caller's function: its failure, in one line
        raise bad_value("regimes", getattr(regimes, "__name__", type(regimes).__name__),
                        f"{allowed} (it raised {type(exc).__name__}: {exc})") from None
    if not isinstance(out, MessageRegimes):
        raise bad_value("regimes", getattr(regimes, "__name__", type(regimes).__name__),
                        f"{allowed} (it returned {type(out).__name__})")
    return out


NCCL_RING_BASE_LATENCY_S = (6.6e-6, 14.0e-6, 8.4e-6)
"""NCCL's base latency of one ring call, per protocol (LL, LL128, Simple): ``baseLat`` Ring = {6.6, 14.0,
8.4} us (NVIDIA/nccl src/graph/tuning.cc, read at 5067397c, as :data:`hcsim.corpus.NCCL_NVLINK_TUNER`),
paid once a call on top of ``hwLat`` per step; :func:`nccl_protocol_regimes` gives it as the regimes'
``call_overhead_s``."""


def nccl_protocol_regimes(hop: str, ll_efficiency: float = NCCL_LL_EFFICIENCY, base_latency: bool = False):
    """NCCL's protocols as message regimes, for :func:`calibrate`'s ``regimes``.

    The fitted (or given) per-step overhead is LL's step; below the first crossover a message
    runs LL (that overhead, ``ll_efficiency`` of the rate), above the last Simple (the overhead
    times :data:`NCCL_SIMPLE_LATENCY_RATIO` for ``hop``, the full rate), and over NVLink, where
    NCCL enables it by default, LL128 between them (the overhead times
    :data:`NCCL_LL128_LATENCY_RATIO`, :data:`NCCL_LL128_EFFICIENCY` of the rate). Each crossover
    is where the two protocols cost one message alike on the rate ``B`` of the hop, as NCCL's tuner
    picks the faster: between overheads ``a1 < a2`` and shares ``e1 < e2``,
    ``m* = (a2 - a1) B / (1/e1 - 1/e2)``. For ``"nvlink"``, ``B`` is the fitted link rate
    :func:`calibrate` passes; for ``"net"`` it is the rate of the links between servers
    (:func:`network_links`, the slowest of them, as the fit leaves them): the builder's
    ``crossover_links`` is ``"network"``, and :func:`calibrate` passes that rate in place of the
    fitted class's where the topology has such links. The two are the same where the fit picks
    the network's links; where it picks NVLink (a node whose NVLink, not its NICs, bounds the
    largest point), the fitted NVLink rate would put the network protocols' crossovers as many
    times too high as NVLink is faster than the NICs (docs/validation.md, change 52).

    Parameters
    ----------
    hop : {"nvlink", "net"}
        The hop NCCL's ring steps cross (its ``hwLat`` row).
    ll_efficiency : float
        LL's share of Simple's rate, in (0, 1): :data:`NCCL_LL_EFFICIENCY` (NCCL's ``busBw / 4``)
        unless NCCL's absolute LL cap binds first (:func:`hcsim.corpus.nccl_ll_efficiency`).
    base_latency : bool
        Whether a call pays its protocol's base latency once (:data:`NCCL_RING_BASE_LATENCY_S`, as
        ``call_overhead_s``; a fitted launch then takes what is left of the smallest call). Off by
        default: measured on the corpus and not kept (docs/validation.md, change 47). The
        crossovers stay where one step's costs cross: with the base latency a call of s steps would
        cross later, by (difference of the bases) / s a step, which is left out.

    Examples
    --------
    >>> reg = nccl_protocol_regimes("net")(10e-6, 25e9)
    >>> reg.from_bytes[1], reg.efficiency
    (348765, (0.25, 1.0))
    >>> nccl_protocol_regimes("net", 0.125)(10e-6, 25e9).from_bytes[1]
    149470
    >>> nv = nccl_protocol_regimes("nvlink")(0.6e-6, 400e9)
    >>> nv.from_bytes, nv.efficiency
    ((0, 178507, 6900000), (0.25, 0.92, 1.0))
    """
    from .engine.regimes import MessageRegimes

    if not is_real(ll_efficiency) or not 0 < ll_efficiency < 1:
        raise bad_value("ll_efficiency", ll_efficiency, "a number between 0 and 1 (LL's share of Simple's rate)")
    if not isinstance(hop, str) or hop not in NCCL_SIMPLE_LATENCY_RATIO:
        raise unknown_name("hop", hop, NCCL_SIMPLE_LATENCY_RATIO)
    r, e = NCCL_SIMPLE_LATENCY_RATIO[hop], float(ll_efficiency)
    r128 = NCCL_LL128_LATENCY_RATIO.get(hop)

    def crossing(a1, a2, e1, e2, step_overhead_s, link_Bps):
        return max(1, int((a2 - a1) * step_overhead_s * link_Bps / (1 / e1 - 1 / e2)))

    ll, ll128, simple = NCCL_RING_BASE_LATENCY_S

    def build(step_overhead_s: float, link_Bps: float):
        if r128 is not None:
            t1 = crossing(1.0, r128, e, NCCL_LL128_EFFICIENCY, step_overhead_s, link_Bps)
            t2 = crossing(r128, r, NCCL_LL128_EFFICIENCY, 1.0, step_overhead_s, link_Bps)
            if t1 < t2:  # else an LL share so high that LL128 is never the cheapest: LL, then Simple
                return MessageRegimes(from_bytes=(0, t1, t2),
                                      overhead_s=(0.0, (r128 - 1) * step_overhead_s, (r - 1) * step_overhead_s),
                                      efficiency=(e, NCCL_LL128_EFFICIENCY, 1.0),
                                      call_overhead_s=(ll, ll128, simple) if base_latency else None)
        return MessageRegimes(from_bytes=(0, crossing(1.0, r, e, 1.0, step_overhead_s, link_Bps)),
                              overhead_s=(0.0, (r - 1) * step_overhead_s), efficiency=(e, 1.0),
                              call_overhead_s=(ll, simple) if base_latency else None)

    if hop == "net":
        build.crossover_links = "network"
    return build


RCCL_BASE_LATENCY_S = {"LL": 12.0e-6, "Simple": 17.0e-6}
"""RCCL's base latency of one collective kernel, per protocol: ``baseLat`` Ring {LL, LL128, Simple} =
{12.0, 12.0, 17.0} us (ROCm/rccl src/graph/tuning.cc, read at commit 0cbce2a7, 2024-10-24), the part
of its cost model paid once per call whatever the step count. The corpus's MI300X topology takes LL's
as its launch overhead; :func:`rccl_msccl_regimes` adds Simple's difference."""

RCCL_HW_LATENCY_RATIO = 2.1 / 0.8
"""How much longer a step takes under RCCL's Simple protocol than under LL between GPUs of one node:
``hwLat`` NVLINK Ring {LL, Simple} = {0.8, 2.1} us in ``tuning_model_5`` (ROCm/rccl src/graph/tuning.cc,
the same commit), the tuning model RCCL's topology table gives an 8-GPU node whose GPUs are all linked
to each other by xGMI (``rome_model_79`` in src/graph/rome_models.cc: 7 links a GPU, ``tuning=5``,
``mscclEnabled=1``)."""

MSCCL_ALLPAIRS_SIMPLE_FROM = 524288
"""The allreduce size from which RCCL's MSCCL all-pairs programs for 8 GPUs run the Simple protocol
instead of LL (out of place): ``allreduce-allpairs-8n-ll-32tb-op.xml`` (LL, ``minBytes`` 0 to
``maxBytes`` 65536), ``allreduce-allpairs-8n-ll-64tb-op.xml`` (LL, 65537 to 524287),
``allreduce-allpairs-8n-simple-op.xml`` (Simple, 524288 to 16777216), ROCm/rccl tools/msccl-algorithms
at the same commit. Each of those programs sends each peer 1/8 of the buffer, reduces, and sends
each peer the reduced 1/8 (hcsim's ``mesh``), so the switch is at 65536-byte messages."""

MSCCL_ALLPAIRS_MAX_BYTES = 16777216
"""The largest allreduce (out of place) RCCL runs with an MSCCL all-pairs program on 8 GPUs (the
Simple program's ``maxBytes``; :data:`MSCCL_ALLPAIRS_SIMPLE_FROM`); a larger one runs RCCL's own
kernels."""

MSCCL_ALLPAIRS_CHUNKS = 256
"""MSCCL runs a program only if the element count divides into its ``nchunksperloop`` (RCCL
src/misc/msccl/msccl_lifecycle.cc, ``mscclInternalSchedulerSelectAlgo``: ``count % nChunksPerLoop ==
0``); the all-pairs LL program for 8 GPUs up to 64 KiB has 256 (512 above), so an allreduce of fewer
than 256 elements (1 KiB of fp32) runs RCCL's own kernels."""

LL_DATA_SHARE = 0.5
"""The share of an LL line that is data: NCCL's and RCCL's LL protocol sends 8-byte words of 4 data
bytes and a 4-byte flag (``union ncclLLFifoLine``, src/include/devcomm.h in NVIDIA/nccl and
ROCm/rccl)."""


def rccl_msccl_regimes(ranks: int = 8):
    """RCCL's LL and Simple protocols on an 8-GPU MI300X node as message regimes, for
    :func:`calibrate`'s ``regimes``, for an allreduce run as hcsim's ``mesh`` (two steps, each sending
    every peer 1/p of the buffer: the message is the buffer over p), as
    :func:`hcsim.corpus.rccl_msccl_rule` runs it from 256 elements up.

    Three regimes, each priced with RCCL's own cost model (a base latency per call,
    :data:`RCCL_BASE_LATENCY_S`, plus a latency per hop, the fitted per-step overhead being LL's and
    Simple's :data:`RCCL_HW_LATENCY_RATIO` times it), the extra over the topology's launch (LL's base
    latency) and the mesh's two step overheads split over the two steps:

    * below 65,536-byte messages (an allreduce below :data:`MSCCL_ALLPAIRS_SIMPLE_FROM`): MSCCL's
      all-pairs program under LL, two hops, at :data:`LL_DATA_SHARE` of the rate;
    * up to 2 MiB messages (the buffer up to :data:`MSCCL_ALLPAIRS_MAX_BYTES`): the all-pairs
      program under Simple, two hops, the full rate: ``17 + 2 x Simple hop`` a call;
    * above: RCCL's own rings under Simple, whose 2(p - 1) = 14 hops the mesh's two steps stand in
      for (the bytes of RCCL's channels, on every link): ``17 + 14 x Simple hop`` a call.

    Nothing is fitted here: the per-step overhead and the rate are the calibration's two parameters.

    Examples
    --------
    >>> reg = rccl_msccl_regimes()(0.5e-6, 45e9)
    >>> reg.from_bytes, reg.efficiency
    ((0, 65536, 2097153), (0.5, 1.0, 1.0))
    >>> [round(v * 1e6, 4) for v in reg.overhead_s]
    [0.0, 3.3125, 11.1875]
    """
    from .engine.regimes import MessageRegimes

    if not is_int(ranks) or ranks != 8:
        raise bad_value("ranks", ranks, "8 (RCCL's MSCCL all-pairs programs are for 8 GPUs)")
    hops = 2  # the all-pairs program, as hcsim's mesh: a reduce-scatter hop and an allgather hop
    ring_hops = 2 * (ranks - 1)
    extra_base = RCCL_BASE_LATENCY_S["Simple"] - RCCL_BASE_LATENCY_S["LL"]
    r = RCCL_HW_LATENCY_RATIO

    def build(step_overhead_s: float, link_Bps: float):
        step_overhead_s, _ = _send_costs(step_overhead_s, link_Bps)
        a = step_overhead_s
        return MessageRegimes(
            from_bytes=(0, MSCCL_ALLPAIRS_SIMPLE_FROM // ranks, MSCCL_ALLPAIRS_MAX_BYTES // ranks + 1),
            overhead_s=(0.0, (extra_base + hops * r * a - hops * a) / hops,
                        (extra_base + ring_hops * r * a - hops * a) / hops),
            efficiency=(LL_DATA_SHARE, 1.0, 1.0))

    return build


UCX_RNDV_SEND_NBR_THRESH = 256 * 1024
"""The message size from which UCX sends a ``ucp_tag_send_nbr()`` message by rendezvous instead of
eagerly: ``RNDV_SEND_NBR_THRESH``, default "256k", "Threshold for switching from eager to rendezvous
protocol in ucp_tag_send_nbr()" (openucx/ucx src/ucp/core/ucp_context.c, the configuration table of
the 1.x releases that have that call; an auto-tuned ``RNDV_THRESH`` applies to the other sends).
Open MPI's pml ucx sends every standard-mode blocking ``MPI_Send`` with it (``mca_pml_ucx_send`` calls
``mca_pml_ucx_send_nbr`` where ``HAVE_DECL_UCP_TAG_SEND_NBR``: open-mpi/ompi
ompi/mca/pml/ucx/pml_ucx.c, 4.0 series), and coll_tuned's ring allreduce, recursive doubling, neighbour
exchange, Bruck and pairwise exchange all send with blocking sends (``ompi_coll_base_sendrecv``); its
linear alltoall's ``isend`` stays below 3,000 bytes a peer. So on Open MPI with UCX every message of
these algorithms from 256 KiB up is a rendezvous one. The step in the measured times: CSD3's
allgather 4 -> 8 MiB (neighbour exchange's pairs of blocks 128 -> 256 KiB) x3.85, alltoall 8 ->
16 MiB (pairwise's blocks 128 -> 256 KiB) x2.67; AlaSKA's with Open MPI 4.0.3 x1.30 and x1.08, where
twice the bytes would take x2."""

UCX_RNDV_LOCAL_Bps = 0.67e9
"""What a rank moves by UCX rendezvous inside its node, bytes per second, with 32 ranks a node
all doing it (a single kernel copy, CMA, in place of eager's copy-in/copy-out through a shared
segment). Measured, not cited: CSD3's 64 MiB allgather over InfiniBand (Open MPI 3.1.6, neighbour
exchange, 1 MiB pairs: 63 MiB a rank in 98.38 ms, 0.67 GB/s), the first Open MPI run of the corpus; a
hypothesis the other three Open MPI runs test. Their 64 MiB allgathers take 96.41 ms (AlaSKA,
InfiniBand, Open MPI 4.0.3), 97.60 ms (AlaSKA over RoCE) and 98.91 ms (CSD3 over RoCE): the same
rate within 2% on two node types whose memory differs 1.8 times (153.6 and 281.6 GB/s a node) and
over NICs that differ 4 times, while their eager rates differ: not a memory or a link rate but the
transport's."""


MPI_EAGER_PROTOCOL = """What an eager message is, for :func:`eager_send_regimes` and :func:`ucx_rendezvous_regimes`:
the MPI standard leaves it to the library whether a standard-mode send is buffered: "MPI may buffer
outgoing messages. In such a case, the send call may complete before a matching receive is invoked"
(MPI-1.1, section 3.4, Communication Modes, https://netlib.org/mpi/mpi-report/node40.html). Below an
eager limit the libraries do: the whole message is sent when the sender posts it, and a message that
arrives before its receive is posted waits in the receiver's unexpected-message queue (the Linux
kernel's InfiniBand tag-matching notes, docs.kernel.org/infiniband/tag_matching.html: "The Eager
protocol - the complete message is sent when the send is processed by the sender"); above it a
rendezvous (request, clear-to-send, data) makes the sender wait for its receiver. In hcsim that is a
regime's ``start_when`` (:class:`hcsim.engine.regimes.MessageRegimes`): ``"sender"`` below the limit."""

OPENMPI_TCP_EAGER_LIMIT = 64 * 1024
"""Open MPI's TCP transport's eager limit, bytes: ``btl_tcp_eager_limit``, "Maximum size (in bytes,
including header) of 'short' messages", default 65536 (``mca_btl_tcp_module.super.btl_eager_limit =
64*1024`` in open-mpi/ompi opal/mca/btl/tcp/btl_tcp_component.c; ``ompi_info`` prints the same default).
With the header, a message of 64 KiB is past it: a message is eager below 64 KiB."""


def ucx_rendezvous_regimes(local_Bps: float = UCX_RNDV_LOCAL_Bps, threshold: int = UCX_RNDV_SEND_NBR_THRESH,
                           eager_sends: bool = True, eager_start: bool = True):
    """Open MPI over UCX's eager and rendezvous protocols as message regimes, for
    :func:`calibrate`'s ``regimes``.

    Below ``threshold`` (:data:`UCX_RNDV_SEND_NBR_THRESH`) a message goes eagerly at the
    fitted rates: with ``eager_start`` (default) it starts as soon as its sender is ready and
    waits at its receiver if the receiver is not (``start_when = "sender"``, :data:`MPI_EAGER_PROTOCOL`),
    and with ``eager_sends`` (default) a sender's eager messages of one step go out one after
    another (:func:`eager_send_regimes`); from the threshold on, a message waits for both its
    ranks (a rendezvous), and one inside a node (its two ranks on one server) moves at ``local_Bps``
    (:data:`UCX_RNDV_LOCAL_Bps`), expressed as a ``local_efficiency`` of the fitted rank-link rate,
    while one between nodes (an RDMA read by the NIC) keeps the links' rates. No handshake cost is
    added (two step overheads against a transfer of at least 256 KiB).

    Examples
    --------
    >>> reg = ucx_rendezvous_regimes()(1e-6, 1.34e9)
    >>> reg.from_bytes, reg.local_efficiency, reg.send_overhead_s, reg.start_when
    ((0, 262144), (1.0, 0.5), (1e-06, 0.0), ('sender', 'both'))
    """
    from .engine.regimes import MessageRegimes

    local_Bps = _positive("local_Bps", local_Bps, 1e15)
    if not is_int(threshold) or not 0 < threshold <= 1 << 50:
        raise bad_value("threshold", threshold, "a whole number of bytes from 1 to 2**50")
    threshold = int(threshold)

    def build(step_overhead_s: float, link_Bps: float):
        step_overhead_s, link_Bps = _send_costs(step_overhead_s, link_Bps)
        sends = {"send_overhead_s": (step_overhead_s, 0.0), "send_copy_Bps": (link_Bps, np.inf)} if eager_sends else {}
        start = {"start_when": ("sender", "both")} if eager_start else {}
        return MessageRegimes(from_bytes=(0, int(threshold)), overhead_s=(0.0, 0.0), efficiency=(1.0, 1.0),
                              local_efficiency=(1.0, float(min(1e6, max(1e-6, local_Bps / link_Bps)))), **sends,
                              **start)

    return build


def eager_send_regimes(*, eager_limit: int | None = None, eager_start: bool = True):
    """An MPI library's eager sends as message regimes, for :func:`calibrate`'s ``regimes``.

    A sender's messages of one step go out one after another, each costing the sender's CPU
    the fitted per-step overhead (LogGP's o) and a copy of its bytes at the fitted link rate
    (an eager message is copied out within the send call; with several peers in a step, as in a
    linear alltoall, the k-th starts after the first k-1 have been sent): only steps in which a
    rank sends to two or more peers change by it. With ``eager_start`` (default) an eager
    message starts as soon as its sender is ready and waits at its receiver if the receiver is
    not (``start_when = "sender"``, :data:`MPI_EAGER_PROTOCOL`), so a late rank holds up only
    the ranks it sends to.

    ``eager_limit`` (bytes): messages from it on wait for both ranks (a rendezvous; they keep the
    one-after-another sends); None (default): every message is eager. The corpus gives Open MPI's
    TCP transport its cited limit (:data:`OPENMPI_TCP_EAGER_LIMIT`); for Intel MPI no limit is
    cited (its eager threshold depends on its fabric provider and version), so every message is
    taken as eager, an assumption: the rows where the start rule moves the most, messages of a
    few KiB or less, are below any eager limit an MPI library ships.

    Examples
    --------
    >>> reg = eager_send_regimes()(1e-6, 2e9)
    >>> reg.send_overhead_s, reg.send_copy_Bps, reg.start_when
    ((1e-06,), (2000000000.0,), ('sender',))
    >>> eager_send_regimes(eager_limit=65536)(1e-6, 2e9).start_when
    ('sender', 'both')
    """
    from .engine.regimes import MessageRegimes

    if eager_limit is not None and (not is_int(eager_limit)
                                    or not 0 < eager_limit <= 1 << 50):
        raise bad_value("eager_limit", eager_limit, "a whole number of bytes from 1 to 2**50, or None")
    eager_limit = None if eager_limit is None else int(eager_limit)

    def build(step_overhead_s: float, link_Bps: float):
        step_overhead_s, link_Bps = _send_costs(step_overhead_s, link_Bps)
        if eager_limit is None:
            return MessageRegimes(from_bytes=(0,), overhead_s=(0.0,), efficiency=(1.0,),
                                  send_overhead_s=(step_overhead_s,), send_copy_Bps=(link_Bps,),
                                  start_when=("sender",) if eager_start else None)
        return MessageRegimes(from_bytes=(0, int(eager_limit)), overhead_s=(0.0, 0.0), efficiency=(1.0, 1.0),
                              send_overhead_s=(step_overhead_s,) * 2, send_copy_Bps=(link_Bps,) * 2,
                              start_when=("sender", "both") if eager_start else None)

    return build


def _send_costs(step_overhead_s: float, link_Bps: float) -> tuple[float, float]:
    """A fit candidate's step overhead and link rate, kept within what a regime takes (0 to 1 s;
    1 B/s to 1e15 B/s): a candidate outside is a poor fit, not an error."""
    return float(min(max(step_overhead_s, 0.0), 1.0)), float(min(max(link_Bps, 1.0), 1e15))


def _class_name(klass: tuple[str, float]) -> str:
    return f"{klass[0]}@{klass[1] / 1e9:g}GBps"


def _pull_to_spec(predict, x, indices, tolerance: float = SPEC_PULL_TOLERANCE,
                  elasticity: float = PULL_ELASTICITY, steps: int = PULL_STEPS):
    """``x`` with each log scale in ``indices`` moved toward 0 (the topology as built) as far as
    every point's prediction (``predict(x)``: log errors) stays within ``tolerance`` of the fit's,
    and within ``elasticity`` times the move, and the number of predictions that took.

    Two points fix a rate only where it binds: past the value at which another link limits the
    point instead, any larger scale fits as well, and a least-squares optimiser stops anywhere
    in that flat region (a scale of x25 or x395,475). The smallest departure from the built
    rate that the points demand is the answer they support. A scale the points pin down (a
    point's time inversely proportional to it) does not move: any step toward spec moves that
    point by about as much as the step, more than ``elasticity`` times it. Each scale's
    elasticity is measured from where its own pull starts, so the order of ``indices`` does not
    matter.

    Examples
    --------
    A point limited by ``min(2^x, 4)`` (a rate that stops binding above 4):

    >>> f = lambda z: np.array([-np.log(min(np.exp(z[0]), 4.0))])
    >>> x, n = _pull_to_spec(f, np.array([np.log(25.0)]), [0])
    >>> round(float(np.exp(x[0])), 1), n
    (4.0, 10)
    """
    x = np.clip(np.array(x, float), -LOG_SCALE_BOUND, LOG_SCALE_BOUND)  # a scale as the fit uses it
    fitted = start = predict(x)
    evals = 1
    for k, i in enumerate(indices):
        if x[i] == 0.0:
            continue
        if k:  # the predictions where this scale's pull starts (an earlier one may have moved them)
            start = predict(x)
            evals += 1

        def close(t, i=i, start=start):
            z = x.copy()
            z[i] = x[i] * t
            pred = predict(z)
            return (float(np.max(np.abs(pred - fitted))) <= tolerance and
                    float(np.max(np.abs(pred - start))) <= elasticity * abs(x[i]) * (1 - t))

        evals += 1
        if close(0.0):
            x[i] = 0.0
            continue
        lo, hi = 0.0, 1.0
        for _ in range(steps):
            mid = (lo + hi) / 2
            evals += 1
            if close(mid):
                hi = mid
            else:
                lo = mid
        x[i] *= hi
    return x, evals


def _nelder_mead(f, x0, steps, max_evals=300, tol=1e-7):
    n = len(x0)
    pts = [np.asarray(x0, float)] + [np.asarray(x0, float) + np.eye(n)[i] * steps[i] for i in range(n)]
    vals = [f(p) for p in pts]
    evals = n + 1
    while evals < max_evals:
        order = np.argsort(vals)
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        if abs(vals[-1] - vals[0]) <= tol * (abs(vals[0]) + tol):
            break
        centroid = np.mean(pts[:-1], axis=0)
        refl = centroid + (centroid - pts[-1])
        fr = f(refl)
        evals += 1
        if fr < vals[0]:
            exp = centroid + 2 * (centroid - pts[-1])
            fe = f(exp)
            evals += 1
            pts[-1], vals[-1] = (exp, fe) if fe < fr else (refl, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = refl, fr
        else:
            con = centroid + 0.5 * (pts[-1] - centroid)
            fc = f(con)
            evals += 1
            if fc < vals[-1]:
                pts[-1], vals[-1] = con, fc
            else:  # shrink towards the best
                pts = [pts[0]] + [pts[0] + 0.5 * (p - pts[0]) for p in pts[1:]]
                vals = [vals[0]] + [f(p) for p in pts[1:]]
                evals += n
    best = int(np.argmin(vals))
    return pts[best], vals[best], evals


def calibrate(topology, measured: pd.DataFrame, *, tiers=None, algorithm="auto", max_evals: int = 300,
              source: str | None = None, max_simulations: int = MAX_CALIBRATION_SIMULATIONS,
              max_work: int = MAX_CALIBRATION_WORK, fit: str = "tiers", regimes=None,
              prefer_rank_links: bool = False, fixed_cost: str = "step",
              rank_reduce_ratio: float | None = None):
    """Fit tier bandwidths and overheads of ``topology`` to ``measured`` collective times.

    The fit starts from the topology as it is (its regimes, per-collective launch costs and
    NPU limits kept) and fits only the tiers the measured points exercise: a tier whose
    doubling moves no prediction is left as built and listed in ``tiers_unused``. Nelder-Mead
    never leaves a point worse than where it started, so the error after is at most the error
    before, but for the pull toward the built rates that follows it (:func:`_pull_to_spec`), which
    may move each point by up to :data:`SPEC_PULL_TOLERANCE`.

    Parameters
    ----------
    topology : str, Path or Topology
    measured : DataFrame
        ``collective, size_bytes, time_us`` and optionally ``ranks`` and ``algorithm``
        (:func:`hcsim.backends.load_measured`).
    tiers : list of str, optional
        Tiers to consider (default: every tier the topology has).
    algorithm : str
        What ran. ``"auto"`` (default): each row's own ``algorithm`` where the file records
        it (hcsim's measured CSVs do), else HCCL's choice.
    max_evals : int
        Evaluations of the whole measured set the optimiser may use.
    max_simulations : int
        Work bound: the optimiser stops after this many simulated points in all (evaluations
        x points; :data:`hcsim.limits.MAX_CALIBRATION_SIMULATIONS`, a few seconds for an
        8-NPU server); the report's ``evaluation_limit`` says which bound applied.
    max_work : int
        Work bound in engine units (each simulation's ``Result.config["work"]``, route searches
        included, summed over every simulation; :data:`hcsim.limits.MAX_CALIBRATION_WORK`, a few
        seconds): the
        first prediction prices an evaluation, the optimiser gets what the bound leaves
        (``evaluation_limit_by`` names the bound that applied), and a fit that cannot afford
        even its first simplex is refused with :class:`~hcsim.errors.WorkLimitError`.
    source : str, optional
        Where the measurements came from (a file name), kept in the provenance.
    fit : {"tiers", "bottleneck"}
        What is fitted. ``"tiers"`` (default): one bandwidth factor per tier the points use,
        the per-step overhead and a launch factor. ``"bottleneck"``: two parameters, for a fit
        on two points (a small and a large one): the per-step overhead and one factor on the
        links of one :func:`link_classes` class: of the classes whose doubling moves the largest
        point's prediction, the one whose fit (Nelder-Mead, restarted once from its end) leaves
        the least error (on a tie, the one doubling moved most); every other link keeps the rate
        the topology gives it and the launch overheads are kept. A rate fitted on a point that
        one kind of link bounds then does not move links of another kind (a node's NIC when the
        point ran over its memory).
    regimes : callable, optional
        With ``fit="bottleneck"``: ``regimes(step_overhead_s, link_Bps) -> MessageRegimes``, the
        transport's message regimes as a function of the two fitted values (the per-step
        overhead and the fitted class's link rate; where the callable itself has the attribute
        ``crossover_links = "network"``, as :func:`nccl_protocol_regimes` ``("net")`` gives it (a wrapper such as
        ``functools.partial`` or a lambda must copy it), and the topology has links between servers, the slowest
        of those as fitted instead), set on every candidate topology the fit tries and on the result
        (:func:`nccl_protocol_regimes`). None: the topology's own.
    prefer_rank_links : bool
        With ``fit="bottleneck"``, for ranks that are CPU processes (MPI): the ranks' own links
        (:func:`rank_link_classes`; a CPU rank's share of its node's memory, which stands for
        its copies and reductions, a rate no spec sheet gives) are also tried slowed
        (:data:`SLOWER_PROBE`) and are fitted unless a class deeper in the network fits the
        points better by :data:`RANK_LINK_MARGIN`; when two points cannot tell the ranks'
        rate from a NIC's, the NIC keeps its line rate (a CPU cluster's 1 MiB allreduce is as
        slow over a 25 Gb/s port as over 100 Gb/s InfiniBand). Not for accelerators, whose own
        links (NVLink, HCCS) have line rates too: a NIC-bound GPU ring would be charged to its
        NVLink. Default False.
    fixed_cost : {"step", "launch", "network"}
        With ``fit="bottleneck"``, which fixed cost is the second parameter. ``"step"`` (default):
        the per-step overhead. ``"launch"``: the launch overhead, one per call (the common one set,
        each per-collective one scaled with it), the per-step overhead kept as the topology gives
        it: for a library whose per-step costs are its own cited constants (HCCL's notify and
        SDMA task costs) and whose floor above them is paid once per call (HCCL's HOST-mode
        launch), so that a collective of more steps does not pay a small point's whole floor
        again in every step. ``"network"``: a latency on each link of the network tier
        (:func:`network_links`: the links a path between two servers crosses and a path inside
        one does not), the per-step overhead and the launch overheads kept as the topology
        gives them: for many ranks per server (MPI), whose steps inside a server cost far less
        than those crossing the network, so that only the crossing messages pay the network's
        fixed cost. Refused on a topology with one server.
    rank_reduce_ratio : float, optional
        With ``fit="bottleneck"``, for CPU ranks: every candidate the fit tries (and the result)
        has its ranks reduce at this multiple of their own link's rate (:func:`with_rank_reduce`,
        :data:`RANK_REDUCE_RATIO`), so a reducing point's time is split between the ranks'
        transfers and their reductions and the fitted rate is the transfer rate alone. None
        (default): the topology's own reduction rates.

    Returns
    -------
    (Topology, dict)
        The calibrated topology and a report: fitted values, residuals per point (log
        error), RMS log error before and after, evaluations used. The report is also the
        topology's ``provenance["calibration_from_measured"]``; an earlier ``calibration``
        (from point-to-point probes) is kept.

    Examples
    --------
    >>> from hcsim.topology import single_switch
    >>> truth = single_switch(4, 1e9)
    >>> pts = pd.DataFrame({"collective": "allgather", "algorithm": "ring",
    ...                     "size_bytes": [4 << 20, 16 << 20]})
    >>> pts["time_us"] = [simulate(truth, "allgather", n, "ring").time_us for n in pts.size_bytes]
    >>> fitted, rep = calibrate(single_switch(4, 2e9), pts, source="example")
    >>> rep["rms_log_error_after"] < rep["rms_log_error_before"]
    True
    """
    from .backends.parsers import check_measured

    check_measured(measured, "calibrate on")
    if not is_int(max_evals) or not 1 <= max_evals <= MAX_EVALS:
        raise bad_value("max_evals", max_evals, f"a whole number from 1 to {MAX_EVALS}")
    if not is_int(max_simulations) or max_simulations < 1:
        raise bad_value("max_simulations", max_simulations, "a whole number >= 1")
    if not is_int(max_work) or max_work < 1:
        raise bad_value("max_work", max_work, "a whole number >= 1")
    max_evals, max_simulations, max_work = int(max_evals), int(max_simulations), int(max_work)
    from .validate import check_algorithm_name

    check_algorithm_name(algorithm)
    if not isinstance(fit, str) or fit not in ("tiers", "bottleneck"):
        raise bad_value("fit", fit, "tiers or bottleneck")
    if not isinstance(prefer_rank_links, (bool, np.bool_)) or (prefer_rank_links and fit != "bottleneck"):
        raise bad_value("prefer_rank_links", prefer_rank_links, "True or False; True only with fit='bottleneck'")
    if not isinstance(fixed_cost, str) or fixed_cost not in ("step", "launch", "network") \
            or (fixed_cost != "step" and fit != "bottleneck"):
        raise bad_value("fixed_cost", fixed_cost, "step, launch or network; launch and network only with "
                        "fit='bottleneck'")
    if rank_reduce_ratio is not None and (fit != "bottleneck" or not is_real(rank_reduce_ratio)
                                          or not 1e-3 <= rank_reduce_ratio <= 1e3):
        raise bad_value("rank_reduce_ratio", rank_reduce_ratio,
                        "a number from 1e-3 to 1e3 (the ranks' reduction rate over their link rate), with "
                        "fit='bottleneck'; or None")
    if regimes is not None and (fit != "bottleneck" or not callable(regimes)):
        raise bad_value("regimes", regimes, "a callable (step_overhead_s, link_Bps) -> MessageRegimes, "
                        "with fit='bottleneck'")
    if source is not None and not isinstance(source, str):
        raise bad_value("source", source, "a str (where the measurements came from), or None")
    topo = load_topology(topology)
    known = {d["spec"].tier for _, _, d in topo.graph.edges(data=True)}
    if tiers is not None:
        if isinstance(tiers, str) or not isinstance(tiers, (list, tuple, set, frozenset)):
            raise bad_value("tiers", tiers, f"a list of the topology's tiers ({', '.join(sorted(known))}), or None")
        for t in tiers:
            if not isinstance(t, str) or t not in known:
                raise unknown_name("tiers", t, known)
    tiers = sorted(tiers or known)
    net_links = network_links(topo) if fixed_cost == "network" else []
    hop_links = (network_links(topo) if fit == "bottleneck" and getattr(regimes, "crossover_links", None) == "network"
                 else [])
    if fixed_cost == "network" and not net_links:
        raise bad_value("fixed_cost", fixed_cost, f"step or launch on {topo.name!r}: its ranks share one server, "
                        "so it has no network links to fit a latency on")
    net0 = max([topo.graph.edges[e]["spec"].latency_s for e in net_links] + [0.0]) or 1e-6
    d0 = topo.defaults
    base_step = d0.step_overhead_s or 1e-6
    rows = [r for _, r in measured.iterrows()]
    points = [(r["collective"], int(r["size_bytes"]), float(r["time_us"]), measured_ranks(r),
               row_algorithm(r, algorithm)) for r in rows]

    work = [0]  # engine work (instants + flow-rate updates) of the last prediction
    # bounded work: the first prediction prices one evaluation; the fit needs the probes (one per
    # tier), the prediction before and after, and at least a Nelder-Mead simplex (tiers + 3)
    n_max = len(tiers) + 2
    probes = len(link_classes(topo)) + (len(rank_link_classes(topo)) if prefer_rank_links else 0) \
        if fit == "bottleneck" else len(tiers)
    need = 1 + probes + 2 + 2 * n_max + 1

    def too_costly(cost: str):
        return WorkLimitError(
            f"max_work = {max_work}: one prediction of the {len(points)} measured points on {topo.name!r} {cost} "
            "(hcsim.limits.MAX_WORK's units, route searches included), and a fit "
            f"needs at least {need} predictions; use fewer or smaller points, a smaller topology, "
            "or raise max_work (--max-work)")

    def predict(cand, cap=None):  # a row the topology cannot run is named (predict_row)
        # the engine's whole count of each call (Result.config["work"]): its events and flow
        # updates, and the rank pairs it routes: a candidate is a new topology, so each of its
        # calls routes afresh, most of a small call's cost; the first prediction stops as soon as
        # it has cost more than a fit can afford (``cap``)
        results, work[0] = [], 0
        for i, (r, (c, n, _t, k, a)) in enumerate(zip(rows, points, strict=True)):
            res = predict_row(i, r, simulate, cand, c, n, a, ranks=k, verify=False, record=False)
            results.append(res)
            work[0] += res.config.get("work", 50 * res.config.get("instants", 0))
            if cap is not None and work[0] > cap:
                raise too_costly(f"passed {work[0]:,} units of engine work after {i + 1} of them")
        return np.array([np.log(res.time_us / t) for res, (_, _, t, _, _) in zip(results, points, strict=True)])

    start = predict(topo, cap=max_work // need)
    per_eval = max(1, work[0])
    budget = max_work // per_eval - (1 + probes + 2) - n_max  # a shrink may run n past the limit
    if budget < n_max + 1:
        raise too_costly(f"costs {per_eval} units of engine work")
    launch0 = d0.launch_overhead_s or 1e-6  # a launch cost of 0 starts the fit at 1 us
    klass = None
    if fit == "bottleneck":
        runs = {(c, n, k, a) for c, n, _, k, a in points}
        if len(runs) < 2:  # one call, however often measured: any split of its time between the two fits it
            (c, n, k, a), = runs
            raise bad_value("measured points", f"{len(points)} of one call ({c}, {n} B"
                            + (f", {k} ranks" if k else "") + ")",
                            "points of 2 calls or more for fit='bottleneck', best a small and a large size (it "
                            "fits a per-step overhead and a link rate: one call's time cannot tell them apart)")
        largest = int(np.argmax([n for _, n, _, _, _ in points]))
        shifts = {k: np.abs(predict(class_scaled(topo, k, 2.0, d0.step_overhead_s)) - start)
                  for k in link_classes(topo)}
        # the classes that limit the largest point; else (an NPU's endpoint cap limits it) those
        # that limit any point, most first; a class no point depends on is never fitted
        candidates = (sorted((k for k in shifts if shifts[k][largest] > 1e-9), key=lambda k: -shifts[k][largest])
                      or sorted((k for k in shifts if shifts[k].max() > 1e-9), key=lambda k: -shifts[k].sum()))
        own = rank_link_classes(topo) if prefer_rank_links else set()
        # the ranks' own links also when they would limit the largest point slower (a CPU rank's
        # memory share under a slower NIC): then fitted unless a deeper class fits clearly better
        candidates += [k for k in sorted(own) if k not in candidates and np.abs(
            predict(class_scaled(topo, k, SLOWER_PROBE, d0.step_overhead_s)) - start)[largest] > 1e-9]
        if not candidates:
            raise ConfigError(f"fit = 'bottleneck': no link of {topo.name!r} limits any measured point (NPU "
                              "endpoint caps or latency do); use fit='tiers'")
        klass = candidates[0]
        used = [klass[0]]

        def unpack(x):
            x = np.clip(x, -LOG_SCALE_BOUND, LOG_SCALE_BOUND)
            if fixed_cost == "launch":  # the launch fitted, the step as built
                return {klass[0]: float(np.exp(x[0]))}, float(d0.step_overhead_s), float(np.exp(x[1]))
            if fixed_cost == "network":  # the network's latency fitted (x[1]), the step as built
                return {klass[0]: float(np.exp(x[0]))}, float(d0.step_overhead_s), 1.0
            return {klass[0]: float(np.exp(x[0]))}, float(base_step * np.exp(x[1])), 1.0

        def net_latency(x):
            return float(net0 * np.exp(np.clip(x[1], -LOG_SCALE_BOUND, LOG_SCALE_BOUND)))

        def build(x):
            scale, step, f = unpack(x)
            out = class_scaled(topo, klass, scale[klass[0]], step)
            if fixed_cost == "network":
                _set_latency(out, net_links, net_latency(x))
            if fixed_cost == "launch":
                out.defaults = dataclasses.replace(
                    out.defaults, launch_overhead_s=launch0 * f,
                    launch_overhead_by_collective_s=tuple((c, v * f) for c, v in d0.launch_overhead_by_collective_s))
            if rank_reduce_ratio is not None:
                with_rank_reduce(out, float(rank_reduce_ratio))
            if regimes is not None:
                rate_Bps = klass[1] * scale[klass[0]]
                if hop_links:  # a network hop's protocols cross over at its own rate (nccl_protocol_regimes)
                    rate_Bps = min(out.graph.edges[e]["spec"].bandwidth_Bps for e in hop_links)
                out.defaults = dataclasses.replace(out.defaults, message_regimes=_user_regimes(regimes, step, rate_Bps))
            return out
    else:
        # only the tiers some point depends on: doubling an unused tier moves nothing
        used = [t for t in tiers if np.max(np.abs(predict(scaled(topo, {t: 2.0}, d0.step_overhead_s)) - start)) > 1e-9]

        def unpack(x):
            x = np.clip(x, -LOG_SCALE_BOUND, LOG_SCALE_BOUND)
            scale = {t: float(np.exp(x[i])) for i, t in enumerate(used)}
            return scale, float(base_step * np.exp(x[len(used)])), float(np.exp(x[len(used) + 1]))

        def build(x):
            scale, step, f = unpack(x)
            return scaled(topo, scale, step, f, launch0 * f)

    def loss(x):
        return float(np.mean(predict(build(x)) ** 2))

    x0 = np.zeros(2 if klass else len(used) + 2)
    if d0.launch_overlap and fixed_cost == "launch" and klass:
        # a launch that overlaps the device work (ExecutionDefaults.launch_overlap) moves no point until it passes
        # the point's device time, a flat region the simplex cannot leave from below: start it (the common launch
        # and any per-collective one, by one factor) at the fastest point's time if it is below that, where it
        # binds that point whatever its device time (half of it, as before, was still flat wherever the fastest
        # point's device time passed it: a sweep of large sizes only)
        x0[1] = np.log(max(1.0, 1e-6 * min(t for _, _, t, _, _ in points) / launch0))
    before = predict(build(x0))
    bounds = {"max_evals": max_evals, "max_simulations": max(1, max_simulations // len(points)),
              "max_work": budget}
    limit_by = min(bounds, key=bounds.get)
    limit = bounds[limit_by]
    n_scales = 1 if klass else len(used)
    pull = (PULL_STEPS + 2) * n_scales  # the pull toward the built rates, after the fit (_pull_to_spec's most)
    pulls = limit - pull >= max(2 * pull, n_max + 1)  # only where the fit keeps at least twice what the pull takes
    limit -= pull if pulls else 0
    if klass is None:
        x, _, evals = _nelder_mead(loss, x0, [0.5] * len(x0), limit)
    else:  # each class that moves the largest point, fitted, restarted once; the best fit wins
        # (with prefer_rank_links, a class deeper in the network over the ranks' own links only by
        # RANK_LINK_MARGIN); the runs share the one limit (it bounds the whole fit): each may use what is left, less
        # a simplex (3 evaluations, a shrink may add 2) for every run after it
        best, evals = {}, 0
        runs = 2 * len(candidates)
        for j, k in enumerate(candidates):
            klass = k
            xk, fk, ek = _nelder_mead(loss, x0, [0.5, 0.5], max(3, limit - evals - 5 * (runs - 2 * j - 1)))
            evals += ek
            xk, fk, ek2 = _nelder_mead(loss, xk, [0.25, 0.25], max(3, limit - evals - 5 * (runs - 2 * j - 2)))
            evals += ek2
            group = k in own
            if group not in best or fk < best[group][1] - 1e-12:
                best[group] = (xk, fk, k)
        deeper, ranks_own = best.get(False), best.get(True)
        pick = ranks_own if ranks_own is not None and (
            deeper is None or np.sqrt(deeper[1]) >= np.sqrt(ranks_own[1]) - RANK_LINK_MARGIN) else deeper
        x, _, klass = pick
        used = [klass[0]]
    fitted_log_scales = np.clip(np.array(x[:n_scales], float), -LOG_SCALE_BOUND, LOG_SCALE_BOUND)
    if pulls:
        x, pull_evals = _pull_to_spec(lambda z: predict(build(z)), x, range(n_scales))
        evals += pull_evals
        limit += pull
    moved = bool(pulls and np.any(x[:n_scales] != fitted_log_scales))  # the pull returns x clipped
    after = predict(build(x))
    pinned = None
    if d0.launch_overlap and fixed_cost == "launch" and klass:
        # an overlapped launch binds only the points whose device time it passes; if none, it is wherever the
        # simplex left it in the flat region below them (every smaller call would then cost it): the topology's own
        pinned = True
        if x[1] != 0:
            free = np.array(x, dtype=float)
            free[1] = 0.0
            unpinned = predict(build(free))
            if np.max(np.abs(unpinned - after)) <= UNPINNED_LAUNCH_TOLERANCE:
                x, after, pinned = free, unpinned, False
    scale, step, f = unpack(x)
    fitted = build(x)
    if not topo.name.endswith("-calibrated"):
        fitted.name = f"{topo.name}-calibrated"
    launch_us = (d0.launch_overhead_s if klass and fixed_cost in ("step", "network") else launch0 * f) * 1e6
    report = {"measured_points": len(points), "source": source, "fit": fit, "prefer_rank_links": prefer_rank_links,
              "fixed_cost": fixed_cost,
              **({"network_latency_us": net_latency(x) * 1e6, "network_links": len(net_links)}
                 if fixed_cost == "network" else {}),
              "rank_reduce_ratio": None if rank_reduce_ratio is None else float(rank_reduce_ratio),
              "tier_bandwidth_scale": {} if klass else scale,
              "link_scale": {_class_name(klass): scale[klass[0]]} if klass else {},
              "tiers_unused": [t for t in tiers if t not in used], "step_overhead_us": step * 1e6,
              "pulled_to_spec": moved,
              "scale_before_pull": {(_class_name(klass) if klass else t): float(np.exp(np.clip(v, -LOG_SCALE_BOUND,
                                    LOG_SCALE_BOUND))) for t, v in zip(used, fitted_log_scales, strict=True)},
              "launch_overhead_us": launch_us, "launch_scale": f,
              **({} if pinned is None else {"launch_pinned": pinned}),
              "rms_log_error_topology": float(np.sqrt(np.mean(start ** 2))),
              "rms_log_error_before": float(np.sqrt(np.mean(before ** 2))),
              "rms_log_error_after": float(np.sqrt(np.mean(after ** 2))),
              "residuals": [{"collective": c, "algorithm": a, "size_bytes": n, "measured_us": t,
                             "log_error": float(e)} for (c, n, t, _, a), e in zip(points, after, strict=True)],
              "evaluations": evals, "evaluation_limit": limit, "evaluation_limit_by": limit_by,
              "work_per_evaluation": per_eval, "algorithm": algorithm,
              "date": _dt.date.today().isoformat(), "method": "least squares on log(time), Nelder-Mead"}
    fitted.provenance = {**topo.provenance, "calibration_from_measured": report}
    return fitted, report
