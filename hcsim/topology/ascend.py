"""Ascend machines. Every number cites its source in ../shared/FACTS.md (section 4).

Only the Atlas 800T A2 (910B) server lives here for now; the full Ascend library (910A,
A2 pods, A3 supernodes) builds on the same helpers.
"""

from __future__ import annotations

from .builders import _count
from .model import ExecutionDefaults, Topology
from .spec import LinkSpec, NpuSpec

# HCCS between two 910B NPUs, per direction. HCCL's own planning constant for 910B HCCS
# is 18.3 GB/s (hcomm src/platform/common/device_capacity.cc); a measured 8-NPU hccl_test
# AllGather of 2 GiB moved 16.94 GiB/s = 18.19 GB/s per link
# (../shared/data/ascend910b_8npu_measured.csv), which agrees within 1%.
HCCS_910B_Bps = 18.3e9
# SDMA task fixed cost below 512 KB (hcomm task_profiling.h): the per-hop cost of an HCCS copy.
SDMA_FIXED_s = 0.6e-6
# Notify record 1 us + notify wait 0.02 us (hcomm task_profiling.h): one step's handshake.
NOTIFY_s = 1.0e-6 + 0.02e-6
# Vector-core (CCE) reduce 10 GB/s (hcomm task_profiling.h), used when a link cannot reduce inline.
CCE_REDUCE_Bps = 10e9
# One 200GE RoCE port per NPU; HCCL plans with 25.0 * 0.8 GB/s for 910B RDMA
# (device_capacity.cc), and an RDMA task costs 7 us fixed (task_profiling.h).
ROCE_910B_Bps = 25.0e9 * 0.8
RDMA_FIXED_s = 7e-6


def atlas800t_a2(*, npus_per_server: int = 8, hccs_bandwidth_Bps: float = HCCS_910B_Bps,
                 hccs_latency_s: float = SDMA_FIXED_s, roce_bandwidth_Bps: float = ROCE_910B_Bps,
                 roce_latency_s: float = RDMA_FIXED_s, reduce_Bps: float = CCE_REDUCE_Bps,
                 step_overhead_s: float = NOTIFY_s, launch_overhead_s: float = 0.0) -> Topology:
    """One Atlas 800T A2 server: 8 x Ascend 910B in an HCCS full mesh, a RoCE NIC per NPU.

    HCCS links reduce inline (SDMA inline reduce, hccl docs perf_analysis), so intra-server
    reductions cost no vector-core time. The NICs hang off their NPUs and reach nothing
    until a pod builder joins them to leaf switches.

    Examples
    --------
    >>> t = atlas800t_a2()
    >>> t.num_npus, t.link_spec("npu0", "npu7").bandwidth_Bps / 1e9
    (8, 18.3)
    """
    _count("npus_per_server", npus_per_server, 2)
    t = Topology("atlas800t-a2", f"Atlas 800T A2: {npus_per_server} x Ascend 910B, HCCS full mesh, "
                 "one 200GE RoCE NIC per NPU",
                 ExecutionDefaults(step_overhead_s=step_overhead_s, launch_overhead_s=launch_overhead_s))
    hccs = LinkSpec(hccs_bandwidth_Bps, hccs_latency_s, "hccs", inline_reduce=True)
    roce = LinkSpec(roce_bandwidth_Bps, roce_latency_s, "roce")
    names = [f"npu{i}" for i in range(npus_per_server)]
    for i, name in enumerate(names):
        t.add_npu(name, NpuSpec(server=0, local_index=i, reduce_Bps=reduce_Bps))
        t.add_node(f"nic{i}", "nic")
        t.add_link(name, f"nic{i}", roce)
    for i in range(npus_per_server):
        for j in range(i + 1, npus_per_server):
            t.add_link(names[i], names[j], hccs)
    return t
