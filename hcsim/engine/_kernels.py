"""Compiled max-min (numba), for the optional ``hcsim[fast]`` extra.

The same progressive filling as :func:`hcsim.engine.fairshare.max_min_rates`, with the same
floating-point operations in the same order per resource and per flow, so its rates are
bit-identical (tests/test_fairshare.py compares them); only the loop is compiled. Imported
on first need by ``fairshare``; without numba the numpy form runs.

Why compiled code here: profiles of contended runs (an A3 pipeline allreduce: 75,838
recomputations, 67% of the time in ``max_min_rates``; an alltoall mesh on a 64-server pod,
827 recomputations with up to 266 distinct rates each) spend their time in numpy call
overhead, a dozen calls per progressive-filling round; a compiled round costs the resources
in play plus the pairs it freezes and no call overhead.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def max_min_kernel(pair_flow, local, remaining, n_flows, sat_rtol):  # pragma: no cover - compiled
    n_res = remaining.size
    n_pairs = pair_flow.size
    count = np.zeros(n_res)
    flow_n = np.zeros(n_flows + 1, dtype=np.int64)
    for i in range(n_pairs):
        count[local[i]] += 1.0
        flow_n[pair_flow[i] + 1] += 1
    res_ptr = np.zeros(n_res + 1, dtype=np.int64)
    for r in range(n_res):
        res_ptr[r + 1] = res_ptr[r] + np.int64(count[r])
    flow_ptr = np.cumsum(flow_n)
    fill_r = res_ptr[:-1].copy()
    fill_f = flow_ptr[:-1].copy()
    res_flow = np.empty(n_pairs, dtype=np.int64)
    flow_res = np.empty(n_pairs, dtype=np.int64)
    for i in range(n_pairs):
        r = local[i]
        f = pair_flow[i]
        res_flow[fill_r[r]] = f
        fill_r[r] += 1
        flow_res[fill_f[f]] = r
        fill_f[f] += 1
    rate = np.zeros(n_flows)
    frozen = np.zeros(n_flows, dtype=np.bool_)
    busy = np.empty(n_res, dtype=np.int64)
    n_busy = 0
    for r in range(n_res):
        if count[r] > 0:
            busy[n_busy] = r
            n_busy += 1
    share = np.empty(n_res)
    level = 0.0
    while n_busy > 0:
        s = np.inf
        for j in range(n_busy):
            r = busy[j]
            share[j] = remaining[r] / count[r]
            if share[j] < s:
                s = share[j]
        level += s
        for j in range(n_busy):
            r = busy[j]
            remaining[r] -= s * count[r]
        limit = s * (1 + sat_rtol)
        for j in range(n_busy):
            if share[j] <= limit:
                r = busy[j]
                for k in range(res_ptr[r], res_ptr[r + 1]):
                    f = res_flow[k]
                    if not frozen[f]:
                        frozen[f] = True
                        rate[f] = level
                        for m in range(flow_ptr[f], flow_ptr[f + 1]):
                            count[flow_res[m]] -= 1.0
        kept = 0
        for j in range(n_busy):
            r = busy[j]
            if count[r] > 0:
                busy[kept] = r
                kept += 1
        n_busy = kept
    return rate
