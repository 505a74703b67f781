"""AHC (asymmetric hierarchical concatenate): AllReduce across servers that hold different
numbers of ranks.

With groups (servers) of sizes g_1..g_G and L = lcm(g_i), cut the buffer into L units; member
j of a group of size g owns units [j L/g, (j+1) L/g). The boundaries of all groups cut
[0, L) into segments; each segment is owned by exactly one member of every group: the
"logical same-index cards". Phases: ReduceScatter inside each group (member j ends with its
units reduced over the group); for every segment an AllReduce among its G owners; AllGather
inside each group. Intra-group NHR; between groups Ring for at most 3 groups, NHR beyond.

Source: hcomm alg_template/asymmetric_hierarchical_concatenate_base.cc (InitSliceInfo,
InitLogicCardInfo) and impl/operator/coll_alg_operator.cc AHCAlgOptionSelect
(AHC_LEVEL0_GROUP_SIZE_THRESHOLD = 3), read through a same-layout mirror of hicann/hcomm;
hicann/hccl docs coll_algo_intro AHC.md. Example: groups of 2 and 3 give L = 6 and four
inter-group AllReduces over 2/6, 1/6, 1/6 and 2/6 of the buffer.

Closed form: max over groups of the intra RS + max over segments of the inter AR + max over
groups of the intra AG, each with its level's alpha/beta/gamma (every segment needs a member
of every group, so the slowest group gates them all). Exact when no two segments share two
owners (their AllReduces then use different links) and reductions between groups are
inline; otherwise a member runs several segments' AllReduces at once on shared links or
queues their reductions, and the closed form is a lower bound.
"""

from __future__ import annotations

import math

import numpy as np

from .registry import AlgorithmSpec, register
from .schedule import ChunkSpace, CollectiveArgs, Schedule, split_bytes

SOURCE = "hcomm asymmetric_hierarchical_concatenate_base.cc; hicann/hccl docs AHC.md"
INTRA = "nhr"


def inter_algorithm(groups: int) -> str:
    """Ring between at most 3 groups, NHR beyond (AHCAlgOptionSelect)."""
    return "ring" if groups <= 3 else "nhr"


def segments(sizes) -> tuple[int, list[tuple[int, int, list[int]]]]:
    """(L, [(start, end, owner member index per group), ...]) in units of 1/L of the buffer."""
    units = math.lcm(*sizes)
    cuts = sorted({j * units // g for g in sizes for j in range(g)} | {units})
    out = []
    for a, b in zip(cuts[:-1], cuts[1:], strict=True):
        out.append((a, b, [a * g // units for g in sizes]))
    return units, out


def _ahc(args: CollectiveArgs) -> Schedule:
    from .hierarchy import _sub, assemble, group_part

    sizes = list(args.server_sizes)  # one server: just the intra-group RS and AG
    starts = np.concatenate([[0], np.cumsum(sizes)])
    units, segs = segments(sizes)
    inter = inter_algorithm(len(sizes))
    c_inter = _sub("allreduce", inter, len(sizes), 0).num_chunks
    per_intra = [max(_sub(c, INTRA, g, 0).num_chunks // g for c in ("reducescatter", "allgather")) for g in sizes]
    width = math.lcm(c_inter, *per_intra)  # chunks per unit
    total = units * width
    phases: list[list[list]] = [[], [], []]

    def add(phase, k, parts):
        while len(phases[phase]) <= k:
            phases[phase].append([])
        phases[phase][k].append(parts)

    for gi, g in enumerate(sizes):
        members = np.arange(starts[gi], starts[gi + 1])
        for phase, coll in ((0, "reducescatter"), (2, "allgather")):
            sub = _sub(coll, INTRA, g, 0)
            scale = total // sub.num_chunks
            for k, st in enumerate(sub.steps):
                add(phase, k, group_part(members, st, sub, 0, scale))
    sub = _sub("allreduce", inter, len(sizes), 0)
    for a, b, owners in segs:
        members = np.array([starts[gi] + j for gi, j in enumerate(owners)])
        scale = (b - a) * width // sub.num_chunks
        for k, st in enumerate(sub.steps):
            add(1, k, group_part(members, st, sub, a * width, scale))
    space = ChunkSpace(split_bytes(args.nbytes, total))
    return Schedule(args, total, assemble(phases, space, args.p), space.chunk_bytes, "ahc")


def cost_allreduce(args: CollectiveArgs, abg) -> float:
    from .hierarchy import _cost

    sizes = list(args.server_sizes)
    units, segs = segments(sizes)
    inter = inter_algorithm(len(sizes))
    n = float(args.nbytes)
    # every segment needs a member of every group: the slowest group's RS gates them all
    intra = (max(_cost("reducescatter", INTRA, g, n, abg[0]) for g in sizes)
             + max(_cost("allgather", INTRA, g, n, abg[0]) for g in sizes))
    between = max(_cost("allreduce", inter, len(sizes), n * (b - a) / units, abg[1]) for a, b, _ in segs)
    return intra + between


register(AlgorithmSpec("ahc", "allreduce", _ahc, cost_allreduce,
                       "servers of unequal size: RS in groups, AllReduce per segment between groups, AG in groups",
                       SOURCE, levels=2))
