"""Pipeline (HCCL's level1 ``pipeline`` on A2/A3): an inter-server ring between same-index
NPUs overlapped with the intra-server mesh, one block per step.

Ranks (s, l) = server s, local index l; S servers of L NPUs; B(s, l) = rank (s, l)'s block.

* AllGather, step t = 0..S-1: rank (s, l) holds B(s-t, l) (its own at t = 0, received over
  the ring before); it sends it to every local peer (mesh) and, while t < S-1, to (s+1, l).
* ReduceScatter, step t = 0..S-1: every local peer sends (s, l) its contribution to
  B(s+t+1, l), reduced there; from t = 1 on (s, l) also passes the block it accumulated the
  step before, B(s+t, l), to (s-1, l), which reduces it into the same block it is
  accumulating. After step S-1 rank (s, l) holds B(s, l) reduced over all ranks.
* AllReduce = ReduceScatter + AllGather.

Source: hcomm alg_template temp_all_gather/all_gather_pipeline.cc,
temp_reduce_scatter/reduce_scatter_pipeline.cc (through a same-layout mirror of
hicann/hcomm); cost from hicann/hccl docs coll_algo_intro Pipeline.md (FACTS.md s1):
AG = RS = max(b beta_inter + a_inter, b beta_intra + a_intra)(S-1) + b beta_intra + a_intra,
AR twice that, b = n/p. Here the reduction unit adds (L-1) b gamma_intra to the intra term and
b gamma_inter to the inter term; exact when at most one of the two levels reduces off-link
(HCCS reduces inline, so on Ascend servers it is).
"""

from __future__ import annotations

import numpy as np

from ..errors import ScheduleError
from .registry import AlgorithmSpec, register
from .schedule import ChunkSpace, CollectiveArgs, Schedule, block_bytes, make_step, split_bytes

SOURCE = "hicann/hccl docs coll_algo_intro Pipeline.md; hcomm all_gather_pipeline.cc, reduce_scatter_pipeline.cc"


def _layout(args: CollectiveArgs):
    sizes = args.server_sizes
    if len(set(sizes)) != 1:
        raise ScheduleError(f"servers = {sizes}: pipeline needs servers of equal size")
    return sizes[0], len(sizes)


def _steps(local, servers, reduce_scatter: bool):
    rank = np.arange(local * servers)
    s, lo = rank // local, rank % local
    peers = [(lo + j) % local for j in range(1, local)]  # every other local index
    out = []
    for t in range(servers):
        src, dst, blk = [], [], []
        for peer in peers:
            if reduce_scatter:  # peer (s, peer) hands (s, lo)... written from the sender's view
                src.append(s * local + peer)
                dst.append(rank)
                blk.append(((s + t + 1) % servers) * local + lo)
            else:
                src.append(rank)
                dst.append(s * local + peer)
                blk.append(((s - t) % servers) * local + lo)
        if reduce_scatter and t >= 1:
            src.append(rank)
            dst.append(((s - 1) % servers) * local + lo)
            blk.append(((s + t) % servers) * local + lo)
        if not reduce_scatter and t < servers - 1:
            src.append(rank)
            dst.append(((s + 1) % servers) * local + lo)
            blk.append(((s - t) % servers) * local + lo)
        if src:
            out.append((np.concatenate(src), np.concatenate(dst), np.concatenate(blk)))
    return out


def _pipeline(args: CollectiveArgs) -> Schedule:
    local, servers = _layout(args)
    coll = args.collective
    p = args.p
    space = ChunkSpace(block_bytes(args) if coll != "allreduce" else split_bytes(args.nbytes, p))
    steps = []
    if coll in ("reducescatter", "allreduce"):
        for src, dst, blk in _steps(local, servers, True):
            steps.append(make_step(src, dst, space.range_bytes(blk, blk + 1), True, blk, blk + 1))
    if coll in ("allgather", "allreduce"):
        for src, dst, blk in _steps(local, servers, False):
            steps.append(make_step(src, dst, space.range_bytes(blk, blk + 1), False, blk, blk + 1))
    return Schedule(args, p, steps, space.chunk_bytes, "pipeline")


def _phase_cost(args, abg, reduce: bool) -> float:
    local, servers = _layout(args)
    a0, a1 = abg[0], abg[1]
    b = args.nbytes / args.p
    intra = (a0.alpha_s + b * a0.beta_s_per_B + ((local - 1) * b * a0.gamma_s_per_B if reduce else 0.0)
             if local > 1 else 0.0)
    inter = a1.alpha_s + b * a1.beta_s_per_B + (b * a1.gamma_s_per_B if reduce else 0.0)
    return (servers - 1) * max(intra, inter) + intra


def cost_allgather(args: CollectiveArgs, abg) -> float:
    return _phase_cost(args, abg, False)


def cost_reducescatter(args: CollectiveArgs, abg) -> float:
    return _phase_cost(args, abg, True)


def cost_allreduce(args: CollectiveArgs, abg) -> float:
    return _phase_cost(args, abg, True) + _phase_cost(args, abg, False)


for _coll, _cost in (("allgather", cost_allgather), ("reducescatter", cost_reducescatter),
                     ("allreduce", cost_allreduce)):
    register(AlgorithmSpec("pipeline", _coll, _pipeline, _cost,
                           "inter-server ring of same-index NPUs overlapped with the intra-server mesh",
                           SOURCE, levels=2, equal_servers=True))
