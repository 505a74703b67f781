"""Max-min fair sharing of resources by flows (progressive filling). Pure numpy, no SimPy."""

from __future__ import annotations

import os

import numpy as np

_SAT_RTOL = 1e-12


def max_min_rates(pair_flow: np.ndarray, pair_res: np.ndarray, capacity: np.ndarray,
                  n_flows: int) -> np.ndarray:
    """Max-min fair rates of flows over shared resources.

    Progressive filling: raise every unfrozen flow's rate together until some resource is
    full, freeze the flows crossing it, repeat. A round costs the resources still in play
    plus the pairs of the flows it freezes (counts are kept, not recounted), so a case with
    hundreds of distinct rates (ECMP collisions on a spine) is not hundreds of passes over
    every pair; symmetric cases finish in one round.

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
    local, remaining = _local_resources(pair_res, capacity)
    global _CALLS
    _CALLS += 1
    if (pair_flow.size >= KERNEL_PAIRS or _CALLS > KERNEL_AFTER_CALLS) and _compiled() is not None:
        # same rates, compiled loop
        return _KERNEL(np.asarray(pair_flow, dtype=np.int64), np.asarray(local, dtype=np.int64),
                       np.array(remaining, dtype=float), n_flows, _SAT_RTOL)
    n_res = remaining.size
    frozen = np.zeros(n_flows, dtype=bool)
    live = np.ones(len(pair_flow), dtype=bool)
    level = 0.0  # the common rate of every unfrozen flow so far
    # A few plain rounds first (each recounts the live pairs: cheapest when few rates differ) ...
    for _ in range(_PLAIN_ROUNDS):
        pf = pair_flow[live]
        if pf.size == 0:
            return rate
        pr = local[live]
        count = np.bincount(pr, minlength=n_res)
        busy = count > 0
        share = np.full(n_res, np.inf)
        share[busy] = remaining[busy] / count[busy]
        s = share.min()
        level += s
        remaining -= s * count
        newly = pf[(busy & (share <= s * (1 + _SAT_RTOL)))[pr]]
        frozen[newly] = True
        rate[newly] = level
        live &= ~frozen[pair_flow]
    # ... then, for the many-rates case (ECMP collisions on a spine), counts kept between rounds
    pair_flow, local = pair_flow[live], local[live]
    if not pair_flow.size:
        return rate
    by_res = np.argsort(local, kind="stable")  # CSR both ways: a resource's flows, a flow's resources
    count = np.bincount(local, minlength=n_res).astype(float)  # unfrozen flows on each resource
    res_ptr = np.concatenate([[0], np.cumsum(count.astype(np.int64))])
    res_flow = pair_flow[by_res]
    by_flow = np.argsort(pair_flow, kind="stable")
    flow_ptr = np.concatenate([[0], np.cumsum(np.bincount(pair_flow, minlength=n_flows))])
    flow_res = local[by_flow]
    slot = np.zeros(n_flows, dtype=np.int64)  # scratch for dropping repeated flows
    busy = np.flatnonzero(count > 0)  # resources some unfrozen flow still crosses
    while busy.size:
        c = count[busy]
        share = remaining[busy] / c
        s = share.min()
        level += s
        remaining[busy] -= s * c
        sat = busy[share <= s * (1 + _SAT_RTOL)]
        flows = res_flow[_rows(res_ptr, sat)]
        flows = flows[~frozen[flows]]
        at = np.arange(flows.size)
        slot[flows] = at  # one of a repeated flow's positions is left in its slot: keep that one
        flows = flows[slot[flows] == at]
        frozen[flows] = True
        rate[flows] = level
        np.subtract.at(count, flow_res[_rows(flow_ptr, flows)], 1.0)
        busy = busy[count[busy] > 0]
    return rate


_PLAIN_ROUNDS = 4
"""Rounds :func:`max_min_rates` runs by recounting before it builds its indexes."""

KERNEL_PAIRS = 4096
"""Problems with at least this many (flow, resource) pairs go to the compiled kernel
(:mod:`hcsim.engine._kernels`) when numba is installed (``pip install hcsim[fast]``). Set
``HCSIM_NO_NUMBA=1`` to never use it."""

KERNEL_AFTER_CALLS = 256
"""After this many calls in one process every problem goes to the kernel, small ones too: a
call costs about a dozen numpy calls per filling round, the kernel one dispatch (an A3
broadcast selection study in one warm process, 28,118 calls of about 900 pairs: 10.0 s to
7.3-7.5 s). Before that, a short run does not pay numba's start-up (about 0.3 s: the 64-server
pod case took 0.77-0.81 s with it, 0.46 s without; docs/performance.md) for a few small problems."""

CHECKPOINT_EVERY = 8
"""The compiled recomputation keeps the progressive filling's state every this many rounds
(then fewer, as rounds add up): a later recomputation resumes from the last kept state before
the first round that changed (:mod:`hcsim.engine._kernels`). A power of 2."""

_KERNEL = None  # None: not looked for yet; False: unavailable
_HOT_KERNEL = None  # the engine's whole recomputation, compiled: the _kernels module (found with _KERNEL)
_CALLS = 0  # max_min_rates calls in this process


def _compiled():
    """The compiled kernel, or None (no numba, or ``HCSIM_NO_NUMBA`` set); looked up once."""
    global _KERNEL, _HOT_KERNEL
    if _KERNEL is None:
        _KERNEL = _HOT_KERNEL = False
        if not os.environ.get("HCSIM_NO_NUMBA"):
            try:
                from . import _kernels
            except ImportError:
                pass
            else:
                _KERNEL, _HOT_KERNEL = _kernels.max_min_kernel, _kernels
    return _KERNEL or None


def hot_kernel(cells: int):
    """The compiled form of the engine's recomputation over ``cells`` path-matrix cells (the
    module :mod:`hcsim.engine._kernels`: ``hot_build``, ``hot_resume``), or None where the
    numpy form runs: without numba, and for a small problem before :data:`KERNEL_AFTER_CALLS`
    calls (the rule of :func:`max_min_rates`, whose call count it shares). Both forms give the
    same rates bit for bit."""
    global _CALLS
    if cells < KERNEL_PAIRS and _CALLS < KERNEL_AFTER_CALLS:
        return None
    if _compiled() is None:
        return None
    _CALLS += 1
    return _HOT_KERNEL


def warm_kernels() -> bool:
    """Compile the numba kernels now, so that numba writes them to its cache; returns whether
    they are in use (False without numba or with ``HCSIM_NO_NUMBA``).

    Compiling them takes 10-17 s on a 2-core machine, once per installation (numba keeps the
    machine code next to the module, or in ``NUMBA_CACHE_DIR``); later processes load them in
    under a second. ``make`` calls this after installing, and the test session at its start, so
    that no simulation pays it in the middle of a run. Results do not depend on it: the kernels
    give the numpy form's rates bit for bit.
    """
    global KERNEL_AFTER_CALLS
    if _compiled() is None:
        return False
    from ..api import simulate
    from ..topology.builders import leaf_spine
    from ..topology.model import warm_search

    saved, KERNEL_AFTER_CALLS = KERNEL_AFTER_CALLS, 0  # small problems too: every kernel runs once
    try:
        topo = leaf_spine(2, 4, 1, 10e9, 1e-6, oversubscription=4)
        for algorithm in ("pairwise", "mesh"):  # contended: the hot build and the resume
            simulate(topo, "alltoall", 1 << 20, algorithm, progress=False)
        pair = np.array([0, 0, 1], dtype=np.int64)  # and the plain kernel
        max_min_rates(pair, np.array([0, 1, 1], dtype=np.int64), np.array([1.0, 2.0]), 2)
        # and the resync's check, which so small a run never reaches (every 64th recomputation)
        _HOT_KERNEL.hot_outside(np.zeros(2), np.ones(2), np.zeros(1, dtype=np.int64), np.ones(1, dtype=np.bool_),
                                np.zeros(2, dtype=np.bool_))
        warm_search()  # and the compiled route search
    finally:
        KERNEL_AFTER_CALLS = saved
    return True


def _rows(ptr: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Positions of the CSR rows ``rows`` (concatenated)."""
    lo, hi = ptr[rows], ptr[rows + 1]
    n = hi - lo
    total = int(n.sum())
    if not total:
        return np.zeros(0, dtype=np.int64)
    return np.arange(total, dtype=np.int64) + np.repeat(lo - (np.cumsum(n) - n), n)


def _local_resources(pair_res, capacity):
    """Compact resource indices for the pairs and the remaining capacity of each."""
    if capacity.size <= 8 * pair_res.size + 4096:  # few resources: index them directly, no sort
        return pair_res, capacity.astype(float)
    used, local = np.unique(pair_res, return_inverse=True)
    return local, capacity[used].astype(float)


def max_min_rates_reference(pair_flow: np.ndarray, pair_res: np.ndarray, capacity: np.ndarray,
                            n_flows: int) -> np.ndarray:
    """Progressive filling in its plainest form (every round re-counts every live pair): the
    reference :func:`max_min_rates` is tested against."""
    rate = np.zeros(n_flows)
    if n_flows == 0:
        return rate
    local, remaining = _local_resources(pair_res, capacity)
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
