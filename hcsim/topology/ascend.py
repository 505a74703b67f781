"""Ascend machines. Every number cites its source in docs/facts.md (section 4) and
says whether it is a datasheet value, a measurement or an HCCL internal constant.

Rank order is pod, server (node), local index, so the NPUs of one server are consecutive
and HCCL's level 1 pairs same-index NPUs of different servers. NPUs are named ``npu<i>``
with i the global rank-order index.
"""

from __future__ import annotations

import functools
import inspect

from ..compute import ASCEND_910B, ASCEND_910C_DIE
from ..errors import ConfigError, HcsimError, bad_value
from .builders import _args, _count, _ratio, _uplink, check_size
from .model import ExecutionDefaults, Topology
from .spec import LinkSpec, NpuSpec, rate, seconds

# ---- 910B (Atlas 800T A2) -------------------------------------------------------------
# HCCS between two 910B NPUs, per direction. HCCL constant 18.3 GB/s (hcomm
# device_capacity.cc); measured 16.94 GiB/s = 18.19 GB/s per link in an 8-NPU 2 GiB hccl_test
# AllGather (docs/data/published/ascend910b_8npu_measured.csv), which agrees within 1%.
HCCS_910B_Bps = 18.3e9
# SDMA task fixed cost below 512 KB (HCCL constant, hcomm task_profiling.h).
SDMA_FIXED_s = 0.6e-6
# Notify record 1 us + notify wait 0.02 us per step (HCCL constants, task_profiling.h).
NOTIFY_s = 1.0e-6 + 0.02e-6
# Vector-core (CCE) reduce 10 GB/s (HCCL constant, task_profiling.h): used when a link
# cannot reduce inline.
CCE_REDUCE_Bps = 10e9
# One 200GE RoCE port per 910B: HCCL plans with 25.0 * 0.8 GB/s (device_capacity.cc); an
# RDMA task costs 7 us fixed (task_profiling.h), split over the NPU-NIC hops at both ends.
ROCE_910B_Bps = 25.0e9 * 0.8
RDMA_FIXED_s = 7e-6
# A switch hop on the RoCE fabric (not in FACTS: an assumption of 0.5 us per hop, stated).
SWITCH_HOP_s = 0.5e-6

# ---- 910A (Atlas 800 model 9000) --------------------------------------------------------
# HCCS 910A 10.0 GB/s (HCCL constant, device_capacity.cc); a third-party 30 GB/s per link is
# uncertain (FACTS.md s4), so the HCCL constant is the default.
HCCS_910A_Bps = 10.0e9
# PCIe gen4 x16 32 GB/s * 0.85 (HCCL constant) between the two 4-NPU groups.
PCIE4_Bps = 32e9 * 0.85
# 100GE RoCE per 910A: 12.5 * 0.8 GB/s (HCCL constant).
ROCE_910A_Bps = 12.5e9 * 0.8

# ---- A3 (Atlas 900 A3 SuperPoD, 910C = 2 dies) -------------------------------------------
# Ascend/msmodeling's A3 profile (FACTS.md s4): SIO 224 GB/s 0.2 us between the two dies;
# UB inside the supernode 196 GB/s per die, 0.5 us die to die (two switch hops of 0.25 us);
# RoCE 24.5 GB/s per die for scale-out. CloudMatrix384 (arXiv 2506.12708): 48 nodes x 8
# NPUs, 7 L1 UB switches per node, non-blocking two-tier UB Clos; < 1 us between nodes.
SIO_Bps, SIO_s = 224e9, 0.2e-6
UB_Bps, UB_HOP_s = 196e9, 0.25e-6
ROCE_A3_Bps = 24.5e9


def _defaults(step_overhead_s, launch_overhead_s):
    return ExecutionDefaults(step_overhead_s=seconds("step_overhead_s", step_overhead_s),
                             launch_overhead_s=seconds("launch_overhead_s", launch_overhead_s))


def _spec(tier, inline_reduce=False, **kw) -> LinkSpec:
    """A LinkSpec from ``<name>_Bps=..., <name>_s=...``, each checked under its argument's name."""
    (bw_name, bw), (lat_name, lat) = kw.items()
    return LinkSpec(rate(bw_name, bw), seconds(lat_name, lat), tier, inline_reduce)


def _server_size(npus_per_server):
    """(npus, nodes, links) of one 910B server: NPUs and NICs, NPU-NIC links, the HCCS mesh."""
    p = npus_per_server
    return p, 2 * p, 2 * p + p * (p - 1)


def _rail_size(servers, rails, servers_per_leaf, spines):
    """(nodes, links) the rail-aligned leaf-spine adds (every server with ``rails`` NICs)."""
    groups = -(-servers // servers_per_leaf)
    return groups * rails + spines, 2 * servers * rails + 2 * groups * rails * spines


def _server_910b(t, s, base, npus_per_server, hccs, roce, reduce_Bps, endpoint_Bps=None):
    names = []
    for i in range(npus_per_server):
        name = f"npu{base + i}"
        # compute: hcsim.compute.ASCEND_910B (msmodeling's 910B2 figures, cited there)
        t.add_npu(name, NpuSpec(server=s, local_index=i, reduce_Bps=reduce_Bps, injection_Bps=endpoint_Bps,
                                ejection_Bps=endpoint_Bps, compute=ASCEND_910B))
        t.add_node(f"nic{base + i}", "nic")
        t.add_link(name, f"nic{base + i}", roce)
        names.append(name)
    for i in range(npus_per_server):
        for j in range(i + 1, npus_per_server):
            t.add_link(names[i], names[j], hccs)
    return names


def _keywords(builder):
    """``builder`` refusing arguments it does not take in one line (a :class:`ConfigError` naming
    them and its parameters), as the generic builders refuse unknown NPU fields, not Python's
    TypeError."""
    signature = inspect.signature(builder)

    @functools.wraps(builder)
    def checked(*args, **kwargs):
        try:
            signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise ConfigError(f"{builder.__name__}: {exc}; it takes the keywords "
                              + ", ".join(signature.parameters)) from None
        return builder(*args, **kwargs)

    return checked


@_keywords
def atlas800t_a2(*, npus_per_server: int = 8, hccs_bandwidth_Bps: float = HCCS_910B_Bps,
                 hccs_latency_s: float = SDMA_FIXED_s, roce_bandwidth_Bps: float = ROCE_910B_Bps,
                 roce_latency_s: float = RDMA_FIXED_s, reduce_Bps: float = CCE_REDUCE_Bps,
                 endpoint_bandwidth_Bps: float | None = None,
                 step_overhead_s: float = NOTIFY_s, launch_overhead_s: float = 0.0) -> Topology:
    """One Atlas 800T A2 server: 8 x Ascend 910B in an HCCS full mesh, a RoCE NIC per NPU.

    HCCS links reduce inline (SDMA inline reduce, hccl docs perf_analysis), so intra-server
    reductions cost no vector-core time. The NICs reach nothing until a pod joins them.
    ``endpoint_bandwidth_Bps`` caps what one NPU sends (and receives) over all its links at
    once (None: no cap); the built-in YAML calibrates it from measurements.

    Examples
    --------
    >>> t = atlas800t_a2()
    >>> t.num_npus, t.link_spec("npu0", "npu7").bandwidth_Bps / 1e9
    (8, 18.3)
    """
    npus_per_server = _count("npus_per_server", npus_per_server, 2)
    hccs = _spec("hccs", True, hccs_bandwidth_Bps=hccs_bandwidth_Bps, hccs_latency_s=hccs_latency_s)
    roce = _spec("roce", roce_bandwidth_Bps=roce_bandwidth_Bps, roce_latency_s=roce_latency_s)
    reduce_Bps = rate("reduce_Bps", reduce_Bps, allow_inf=True)
    endpoint_bandwidth_Bps = rate("endpoint_bandwidth_Bps", endpoint_bandwidth_Bps, allow_none=True)
    check_size("atlas800t_a2", _args(npus_per_server=npus_per_server), *_server_size(npus_per_server))
    t = Topology("atlas800t-a2", f"Atlas 800T A2: {npus_per_server} x Ascend 910B, HCCS full mesh, "
                 "one 200GE RoCE NIC per NPU", _defaults(step_overhead_s, launch_overhead_s), product="910B")
    _server_910b(t, 0, 0, npus_per_server, hccs, roce, reduce_Bps, endpoint_bandwidth_Bps)
    return t


def _rail_fabric(t, nics_by_server, nic_Bps, hop_s, servers_per_leaf, spines, oversubscription, prefix=""):
    """Rail-aligned leaf-spine: NIC i of every server in a leaf group meets on leaf (group, i)."""
    servers = len(nics_by_server)
    rails = max(len(n) for n in nics_by_server)
    groups = -(-servers // servers_per_leaf)
    host = LinkSpec(nic_Bps, hop_s, "roce")
    for sp in range(spines):
        t.add_node(f"{prefix}spine{sp}", "switch")
    for g in range(groups):
        members = range(g * servers_per_leaf, min(servers, (g + 1) * servers_per_leaf))
        for rail in range(rails):
            leaf = f"{prefix}leaf{g}_{rail}"
            t.add_node(leaf, "switch")
            down = [nics_by_server[s][rail] for s in members if rail < len(nics_by_server[s])]
            for nic in down:
                t.add_link(nic, leaf, host)
            up = _uplink(len(down) * nic_Bps / oversubscription / spines, hop_s, "roce", "oversubscription",
                         oversubscription)
            for sp in range(spines):
                t.add_link(leaf, f"{prefix}spine{sp}", up)


@_keywords
def atlas900_a2_pod(*, servers: int = 16, npus_per_server: int = 8, servers_per_leaf: int = 32,
                    spines: int = 4, oversubscription: float = 1.0,
                    hccs_bandwidth_Bps: float = HCCS_910B_Bps, hccs_latency_s: float = SDMA_FIXED_s,
                    roce_bandwidth_Bps: float = ROCE_910B_Bps, nic_latency_s: float = RDMA_FIXED_s / 2,
                    switch_latency_s: float = SWITCH_HOP_s, reduce_Bps: float = CCE_REDUCE_Bps,
                    endpoint_bandwidth_Bps: float | None = None,
                    step_overhead_s: float = NOTIFY_s, launch_overhead_s: float = 0.0) -> Topology:
    """Atlas 900 A2 PoD: Atlas 800T A2 servers on a rail-aligned RoCE leaf-spine.

    NIC i of every server in a leaf group (``servers_per_leaf`` servers) meets on leaf i of
    that group, so HCCL's level-1 traffic between same-index NPUs stays on one leaf; leaves
    reach every spine with ``npus_on_leaf x 20 GB/s / oversubscription`` of uplink.

    Examples
    --------
    >>> t = atlas900_a2_pod(servers=4)
    >>> t.num_npus, t.npu_spec("npu9").server, t.npu_spec("npu9").local_index
    (32, 1, 1)
    """
    servers = _count("servers", servers)
    npus_per_server = _count("npus_per_server", npus_per_server, 2)
    servers_per_leaf = _count("servers_per_leaf", servers_per_leaf)
    spines = _count("spines", spines)
    oversubscription = _ratio("oversubscription", oversubscription)
    hccs = _spec("hccs", True, hccs_bandwidth_Bps=hccs_bandwidth_Bps, hccs_latency_s=hccs_latency_s)
    roce = _spec("roce", roce_bandwidth_Bps=roce_bandwidth_Bps, nic_latency_s=nic_latency_s)
    switch_latency_s = seconds("switch_latency_s", switch_latency_s)
    reduce_Bps = rate("reduce_Bps", reduce_Bps, allow_inf=True)
    endpoint_bandwidth_Bps = rate("endpoint_bandwidth_Bps", endpoint_bandwidth_Bps, allow_none=True)
    npus, nodes, links = _server_size(npus_per_server)
    fabric_nodes, fabric_links = _rail_size(servers, npus_per_server, servers_per_leaf, spines)
    check_size("atlas900_a2_pod", _args(servers=servers, npus_per_server=npus_per_server),
               servers * npus, servers * nodes + fabric_nodes, servers * links + fabric_links)
    t = Topology("atlas900-a2-pod", f"Atlas 900 A2 PoD: {servers} x Atlas 800T A2 ({servers * npus_per_server} "
                 f"x 910B), rail-aligned RoCE leaf-spine, {oversubscription:g}:1",
                 _defaults(step_overhead_s, launch_overhead_s), product="910B")
    nics = []
    for s in range(servers):
        base = s * npus_per_server
        _server_910b(t, s, base, npus_per_server, hccs, roce, reduce_Bps, endpoint_bandwidth_Bps)
        nics.append([f"nic{base + i}" for i in range(npus_per_server)])
    _rail_fabric(t, nics, roce.bandwidth_Bps, switch_latency_s, servers_per_leaf, spines, oversubscription)
    return t


@_keywords
def atlas800_9000(*, servers: int = 1, hccs_bandwidth_Bps: float = HCCS_910A_Bps,
                  hccs_latency_s: float = SDMA_FIXED_s, pcie_bandwidth_Bps: float = PCIE4_Bps,
                  pcie_latency_s: float = 1e-6, roce_bandwidth_Bps: float = ROCE_910A_Bps,
                  nic_latency_s: float = RDMA_FIXED_s / 2, switch_latency_s: float = SWITCH_HOP_s,
                  reduce_Bps: float = CCE_REDUCE_Bps, servers_per_leaf: int = 32, spines: int = 2,
                  step_overhead_s: float = NOTIFY_s, launch_overhead_s: float = 0.0) -> Topology:
    """Atlas 800 (model 9000): 8 x Ascend 910A as two HCCS full-mesh groups of 4, a PCIe
    switch per group joining the groups, a 100GE RoCE NIC per NPU (MindCluster docs, FACTS s4).

    ``pcie_latency_s`` (1 us per hop) is an assumption, not a cited figure. With
    ``servers > 1`` the NICs join a rail-aligned leaf-spine as in the A2 pod.

    Examples
    --------
    >>> t = atlas800_9000()
    >>> t.graph.has_edge("npu0", "npu3"), t.graph.has_edge("npu0", "npu4")
    (True, False)
    """
    servers = _count("servers", servers)
    servers_per_leaf = _count("servers_per_leaf", servers_per_leaf)
    spines = _count("spines", spines)
    hccs = _spec("hccs", hccs_bandwidth_Bps=hccs_bandwidth_Bps, hccs_latency_s=hccs_latency_s)
    pcie = _spec("pcie", pcie_bandwidth_Bps=pcie_bandwidth_Bps, pcie_latency_s=pcie_latency_s)
    roce = _spec("roce", roce_bandwidth_Bps=roce_bandwidth_Bps, nic_latency_s=nic_latency_s)
    switch_latency_s = seconds("switch_latency_s", switch_latency_s)
    reduce_Bps = rate("reduce_Bps", reduce_Bps, allow_inf=True)
    # per server: 8 NPUs, 8 NICs, 2 PCIe switches; NPU-NIC, NPU-PCIe, HCCS and PCIe-PCIe links
    fabric_nodes, fabric_links = _rail_size(servers, 8, servers_per_leaf, spines) if servers > 1 else (0, 0)
    check_size("atlas800_9000", _args(servers=servers), 8 * servers, 18 * servers + fabric_nodes,
               58 * servers + fabric_links)
    t = Topology("atlas800-9000", f"Atlas 800 model 9000: {servers} x 8 x Ascend 910A, two 4-NPU HCCS meshes "
                 "joined by PCIe, one 100GE RoCE NIC per NPU", _defaults(step_overhead_s, launch_overhead_s),
                 product="910A")
    nics = []
    for s in range(servers):
        base = 8 * s
        names = []
        for i in range(8):
            name = f"npu{base + i}"
            t.add_npu(name, NpuSpec(server=s, local_index=i, reduce_Bps=reduce_Bps))
            t.add_node(f"nic{base + i}", "nic")
            t.add_link(name, f"nic{base + i}", roce)
            names.append(name)
        for g in range(2):
            sw = f"pcie{s}_{g}"
            t.add_node(sw, "pcie")
            group = names[4 * g: 4 * g + 4]
            for i, a in enumerate(group):
                t.add_link(a, sw, pcie)
                for b in group[i + 1:]:
                    t.add_link(a, b, hccs)
        t.add_link(f"pcie{s}_0", f"pcie{s}_1", pcie)
        nics.append([f"nic{base + i}" for i in range(8)])
    if servers > 1:
        _rail_fabric(t, nics, roce.bandwidth_Bps, switch_latency_s, servers_per_leaf, spines, 1.0)
    return t


@_keywords
def atlas900_a3_superpod(*, nodes: int = 16, npus_per_node: int = 8, superpods: int = 1,
                         l2_switches: int = 7, sio_bandwidth_Bps: float = SIO_Bps, sio_latency_s: float = SIO_s,
                         ub_bandwidth_Bps: float = UB_Bps, ub_latency_s: float = UB_HOP_s,
                         roce_bandwidth_Bps: float = ROCE_A3_Bps, nic_latency_s: float = RDMA_FIXED_s / 2,
                         switch_latency_s: float = SWITCH_HOP_s, reduce_Bps: float = CCE_REDUCE_Bps,
                         spines: int = 4, step_overhead_s: float = NOTIFY_s,
                         launch_overhead_s: float = 0.0) -> Topology:
    """Atlas 900 A3 SuperPoD: nodes of 8 Ascend 910C, each NPU two dies joined by SIO; every
    die on its node's L1 UB switch plane, L1 planes joined non-blocking by ``l2_switches``
    L2 UB switches across the supernode (up to 48 nodes = 384 NPUs = 768 dies, HCCL's limit);
    a RoCE NIC per die on a rail-aligned leaf-spine joins supernodes (``superpods > 1``).

    Ranks are dies (HCCL gives each die a rank); a node is a "server" (level 0 inside it),
    a supernode a "pod" (level 2 between them). UB links reduce inline.

    Examples
    --------
    >>> t = atlas900_a3_superpod(nodes=2)
    >>> t.num_npus, t.link_spec("npu0", "npu1").tier
    (32, 'sio')
    """
    nodes = _count("nodes", nodes)
    npus_per_node = _count("npus_per_node", npus_per_node)
    superpods = _count("superpods", superpods)
    l2_switches = _count("l2_switches", l2_switches)
    spines = _count("spines", spines)
    if npus_per_node > 384:
        raise bad_value("npus_per_node", npus_per_node, "at most 384 (NPUs per supernode)")
    if nodes * npus_per_node > 384:
        raise bad_value("nodes", nodes, f"at most {384 // npus_per_node} ({384} NPUs per supernode)")
    sio = _spec("sio", True, sio_bandwidth_Bps=sio_bandwidth_Bps, sio_latency_s=sio_latency_s)
    ub = _spec("ub", True, ub_bandwidth_Bps=ub_bandwidth_Bps, ub_latency_s=ub_latency_s)
    roce = _spec("roce", roce_bandwidth_Bps=roce_bandwidth_Bps, nic_latency_s=nic_latency_s)
    switch_latency_s = seconds("switch_latency_s", switch_latency_s)
    reduce_Bps = rate("reduce_Bps", reduce_Bps, allow_inf=True)
    dies = 2 * npus_per_node
    # per supernode: L2 switches; per node: an L1 switch, its dies and their NICs; links L1-L2,
    # die-L1, die-NIC and SIO between a die pair
    fabric_nodes, fabric_links = (_rail_size(nodes * superpods, dies, nodes * superpods, spines)
                                  if superpods > 1 else (0, 0))
    check_size("atlas900_a3_superpod", _args(nodes=nodes, superpods=superpods), superpods * nodes * dies,
               superpods * (l2_switches + nodes * (1 + 2 * dies)) + fabric_nodes,
               superpods * nodes * (2 * l2_switches + 5 * dies) + fabric_links)
    t = Topology("atlas900-a3-superpod", f"Atlas 900 A3 SuperPoD: {superpods} x {nodes} nodes x {npus_per_node} "
                 "Ascend 910C (2 dies each), UB two-tier Clos, RoCE scale-out",
                 _defaults(step_overhead_s, launch_overhead_s), product="910_93")
    try:
        ub_up = LinkSpec(dies * ub.bandwidth_Bps / l2_switches, ub.latency_s, "ub", inline_reduce=True)
    except HcsimError:
        raise bad_value("l2_switches", l2_switches, "leaves the L1-L2 uplinks outside the bandwidth range") from None
    nics = []
    for pod in range(superpods):
        for k in range(l2_switches):
            t.add_node(f"ub2_{pod}_{k}", "switch")
        for node in range(nodes):
            l1 = f"ub1_{pod}_{node}"
            t.add_node(l1, "switch")
            for k in range(l2_switches):
                t.add_link(l1, f"ub2_{pod}_{k}", ub_up)
            base = (pod * nodes + node) * dies
            names = []
            for d in range(dies):
                name = f"npu{base + d}"
                # an NPU here is one 910C die: hcsim.compute.ASCEND_910C_DIE (cited there)
                t.add_npu(name, NpuSpec(server=pod * nodes + node, pod=pod, local_index=d, reduce_Bps=reduce_Bps,
                                        compute=ASCEND_910C_DIE))
                t.add_link(name, l1, ub)
                t.add_node(f"nic{base + d}", "nic")
                t.add_link(name, f"nic{base + d}", roce)
                names.append(name)
            for d in range(0, dies, 2):
                t.add_link(names[d], names[d + 1], sio)
            nics.append([f"nic{base + d}" for d in range(dies)])
    if superpods > 1:
        _rail_fabric(t, nics, roce.bandwidth_Bps, switch_latency_s, nodes * superpods, spines, 1.0, "roce_")
    return t
