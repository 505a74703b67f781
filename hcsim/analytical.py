"""Analytical mode: closed-form alpha-beta-gamma cost, with parameters read off the topology.

Alpha is the per-step overhead plus the largest path latency among the rank pairs the
schedule uses; beta is one over the smallest bottleneck bandwidth of those paths (summed
over equal-cost paths under ``spray``); gamma is one over the slowest reducing NPU's
reduction rate, or zero when every reducing transfer crosses links that reduce inline.
Under ``spray`` a lone transfer's bandwidth is the number of its paths times the slowest
path's max-min share when the equal parts share links or NPU limits with each other.
The closed forms assume no two concurrent transfers share a link: on such a topology the
event-driven engine reproduces them exactly, elsewhere they are a contention-free bound.
"""

from __future__ import annotations

import numpy as np

from .algorithms.cost import AlphaBetaGamma
from .algorithms.schedule import Schedule
from .engine.fairshare import max_min_rates


def path_parameters(topo, rank_nodes, schedule: Schedule, routing: str = "ecmp", seed: int = 0,
                    step_overhead_s: float = 0.0) -> AlphaBetaGamma:
    """Alpha, beta and gamma for ``schedule`` on ``topo`` (see module docs)."""
    net = topo.compiled()
    nn = len(net.node_names)
    rank_node = np.array([net.node_index[n] for n in rank_nodes], dtype=np.int64)
    lat_max, bw_min, gamma = 0.0, np.inf, 0.0
    seen_arrays = None
    seen_pairs: set[int] = set()
    reduce_pairs: set[int] = set()
    for step in schedule.steps:
        if not len(step):
            continue
        same = seen_arrays is not None and seen_arrays[0] is step.src and seen_arrays[1] is step.dst
        keys = rank_node[step.src] * nn + rank_node[step.dst]
        if not same:
            seen_arrays = (step.src, step.dst)
            seen_pairs.update(np.unique(keys).tolist())
        if step.reduce.any():
            reduce_pairs.update(np.unique(keys[step.reduce]).tolist())
    for key in sorted(seen_pairs):
        ids = list(net.route(key // nn, key % nn, routing, seed))
        _, _, p_lat, p_inline, p_bw = net.paths.arrays()
        lat_max = max(lat_max, float(p_lat[ids].max()))
        bw_min = min(bw_min, float(p_bw[ids[0]]) if len(ids) == 1 else _spray_bandwidth(net, ids))
        if key in reduce_pairs and not p_inline[ids].all():
            gamma = max(gamma, 1.0 / float(net.reduce_Bps[key % nn]))
    return AlphaBetaGamma(step_overhead_s + lat_max, 1.0 / bw_min, gamma)


def _spray_bandwidth(net, path_ids) -> float:
    """Bandwidth of one transfer split evenly over ``path_ids``: k x the slowest part's share."""
    res_ptr, res, *_ = net.paths.arrays()
    flows, resources = [], []
    for i, pid in enumerate(path_ids):
        part = res[res_ptr[pid]:res_ptr[pid + 1]]
        flows.extend([i] * len(part))
        resources.extend(part.tolist())
    rates = max_min_rates(np.array(flows), np.array(resources), net.capacity_Bps, len(path_ids))
    return float(len(path_ids) * rates.min())
