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
                    step_overhead_s: float = 0.0, levels: int = 1, qps: int = 1):
    """Alpha, beta and gamma for ``schedule`` on ``topo`` (see module docs).

    With ``levels > 1`` returns a tuple, one :class:`AlphaBetaGamma` per level, each read
    off the rank pairs of that level (0: same server, 1: same pod, 2: different pods, from
    the schedule's server/pod layout); a level no pair uses gets zeros.
    """
    net = topo.compiled()
    p = schedule.p
    rank_node = np.array([net.node_index[n] for n in rank_nodes], dtype=np.int64)
    seen_arrays = None
    pairs: set[int] = set()
    reducing: set[int] = set()
    for step in schedule.steps:
        if not len(step):
            continue
        keys = step.src * p + step.dst
        if not (seen_arrays is not None and seen_arrays[0] is step.src and seen_arrays[1] is step.dst):
            seen_arrays = (step.src, step.dst)
            pairs.update(np.unique(keys).tolist())
        if step.reduce.any():
            reducing.update(np.unique(keys[step.reduce]).tolist())
    level_of = _pair_levels(schedule.args, levels)
    lat = [0.0] * levels
    bw = [np.inf] * levels
    gamma = [0.0] * levels
    for key in sorted(pairs):
        a, b = divmod(key, p)
        lv = level_of(a, b)
        ids = list(net.route(int(rank_node[a]), int(rank_node[b]), routing, seed, qps))
        _, _, p_lat, p_inline, p_bw = net.paths.arrays()
        lat[lv] = max(lat[lv], float(p_lat[ids].max()))
        bw[lv] = min(bw[lv], float(p_bw[ids[0]]) if len(ids) == 1 else _spray_bandwidth(net, ids))
        if key in reducing and not p_inline[ids].all():
            gamma[lv] = max(gamma[lv], 1.0 / float(net.reduce_Bps[rank_node[b]]))
    out = tuple(AlphaBetaGamma(step_overhead_s + lat[lv], 0.0 if bw[lv] == np.inf else 1.0 / bw[lv], gamma[lv])
                for lv in range(levels))
    return out[0] if levels == 1 else out


def _pair_levels(args, levels):
    if levels == 1:
        return lambda a, b: 0
    server = np.repeat(np.arange(len(args.server_sizes)), args.server_sizes)
    pods = args.pods or (len(args.server_sizes),)
    pod = np.repeat(np.arange(len(pods)), pods)[server]

    def level(a, b):
        if server[a] == server[b]:
            return 0
        return 1 if pod[a] == pod[b] or levels == 2 else 2

    return level


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
