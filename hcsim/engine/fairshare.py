"""Max-min fair sharing of resources by flows (progressive filling). Pure numpy, no SimPy."""

from __future__ import annotations

import numpy as np

_SAT_RTOL = 1e-12


def max_min_rates(pair_flow: np.ndarray, pair_res: np.ndarray, capacity: np.ndarray,
                  n_flows: int) -> np.ndarray:
    """Max-min fair rates of flows over shared resources.

    Progressive filling: raise every unfrozen flow's rate together until some resource is
    full, freeze the flows crossing it, repeat. Each round is a few numpy passes over the
    (flow, resource) incidence pairs, and symmetric cases finish in one round.

    Parameters
    ----------
    pair_flow, pair_res : ndarray of int
        Incidence pairs: flow ``pair_flow[i]`` crosses resource ``pair_res[i]``. Every flow
        crosses at least one resource.
    capacity : ndarray of float
        Capacity of every resource (bytes/s), indexed by resource id.
    n_flows : int

    Returns
    -------
    ndarray of float
        Rate of each flow (bytes/s).

    Examples
    --------
    Three flows on one 30 B/s link, one of them also on a 5 B/s link:

    >>> max_min_rates(np.array([0, 1, 2, 2]), np.array([0, 0, 0, 1]), np.array([30.0, 5.0]), 3)
    array([12.5, 12.5,  5. ])
    """
    rate = np.zeros(n_flows)
    if n_flows == 0:
        return rate
    if capacity.size <= 8 * pair_res.size + 4096:  # few resources: index them directly, no sort
        local, remaining = pair_res, capacity.astype(float)
    else:
        used, local = np.unique(pair_res, return_inverse=True)
        remaining = capacity[used].astype(float)
    n_res = remaining.size
    frozen = np.zeros(n_flows, dtype=bool)
    live = np.ones(len(pair_flow), dtype=bool)
    while True:
        pf = pair_flow[live]
        if pf.size == 0:
            break
        pr = local[live]
        count = np.bincount(pr, minlength=n_res)
        busy = count > 0
        share = np.full(n_res, np.inf)
        share[busy] = remaining[busy] / count[busy]
        s = share.min()
        rate[~frozen] += s
        remaining -= s * count
        saturated = busy & (share <= s * (1 + _SAT_RTOL))
        frozen[pf[saturated[pr]]] = True
        live &= ~frozen[pair_flow]
    return rate
