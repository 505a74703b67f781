"""Algorithm-selection studies: what HCCL picks versus what is fastest, size by size."""

from __future__ import annotations

import math

import pandas as pd

from .api import (
    WorkBudget,
    _FastAnalytical,
    check_collective_name,
    check_options,
    rank_layout,
    resolve_sizes,
    simulate,
)
from .engine.des import shares_in_network_switch
from .errors import WorkLimitError, bad_value
from .hccl.selection import HcclConfig, candidates
from .limits import MAX_WORK
from .parallel import map_points, startup_work
from .progress import check_progress
from .topology.io import load_topology


def select(topology, collective: str, sizes=("8K", "4G"), *, factor: int = 2, ranks=None, mode: str = "des",
           hccl_algo: str | None = None, hccl: HcclConfig | None = None, client=None, progress=None,
           **kwargs) -> pd.DataFrame:
    """Race HCCL's choice against every candidate algorithm, size by size.

    Parameters
    ----------
    topology, collective, sizes, factor, ranks, mode
        As for :func:`hcsim.sweep`.
    hccl_algo : str, optional
        An HCCL_ALGO string constraining HCCL's choice.
    hccl : HcclConfig, optional
        CCL buffer size and determinism (default: HCCL's defaults on an Ascend topology, none
        elsewhere, as :func:`hcsim.simulate`); every candidate runs through the same buffer.
    client : dask.distributed.Client, optional
        Race the sizes on a Dask cluster (:func:`hcsim.parallel.dask_client`), one task per
        size (HCCL's choice, then every other candidate); the table is the same as without.
    progress : None, True or False
        A bar over the sizes on stderr (:mod:`hcsim.progress`; None: auto).

    Returns
    -------
    pandas.DataFrame
        One row per size: ``size_bytes``, ``hccl_choice``, ``hccl_time_us``, ``best``,
        ``best_time_us``, ``slowdown`` (HCCL's time / best time), ``selected_by``, and
        ``time_us[<algorithm>]`` per candidate (NaN where a work bound refused it). The whole
        study shares one work bound (``max_work``, :class:`hcsim.api.WorkBudget`): a size whose
        HCCL choice it refuses has NaN times and the reason in a ``refused`` column (all
        refused: an error). ``df.attrs["crossovers"]`` lists
        ``(size_bytes, previous_best, new_best)`` where the fastest algorithm changes.

    Examples
    --------
    >>> df = select("atlas800t-a2", "allgather", sizes=("1K", "4K"))
    >>> list(df["hccl_choice"])
    ['mesh', 'mesh', 'mesh']
    """
    check_collective_name(collective)
    check_options(kwargs, exclude=("algorithm", "ranks", "mode", "hccl_algo", "hccl", "progress"), where="select")
    check_progress(progress)
    if not isinstance(mode, str) or mode not in ("des", "analytical"):
        raise bad_value("mode", mode, "one of des, analytical")
    if hccl is not None and not isinstance(hccl, HcclConfig):
        raise bad_value("hccl", hccl, "an hcsim.hccl.selection.HcclConfig, or None")
    topo = load_topology(topology)
    if hccl is None and topo.product is not None:
        hccl = HcclConfig()  # HCCL's defaults on an Ascend machine; elsewhere no CCL buffer unless given
    with topo.unchanged():  # the graph is checked once, not at every size
        rank_nodes = topo.resolve_ranks(ranks)
        servers, pods = rank_layout(topo, rank_nodes)
        cands = candidates(collective, servers or (len(rank_nodes),), pods, topo.product,
                           shares_in_network_switch(topo, rank_nodes, kwargs.get("dtype"), kwargs.get("reduce_op", "sum")))
        rows, prev, crossovers = [], None, []
        size_list = resolve_sizes(sizes, factor)
        auto_kw = dict(kwargs, ranks=ranks, mode=mode, hccl_algo=hccl_algo, hccl=hccl)
        rival_kw = dict(kwargs, ranks=ranks, mode=mode, hccl=hccl)
        fast_auto = fast_rivals = {}
        if mode == "analytical":  # closed forms: every algorithm prepared once, priced at every size at once
            fast_auto = _FastAnalytical(topo, collective, auto_kw).column("auto", size_list)
            rivals = _FastAnalytical(topo, collective, rival_kw)
            fast_rivals = {algo: rivals.column(algo, size_list) for algo in cands}
        # one race per size: what the analytical fast path answered goes along, simulate() runs the rest
        races = [(size, fast_auto[i] if fast_auto else None,
                  {algo: fast_rivals[algo][i][0] for algo in cands if fast_rivals and fast_rivals[algo][i] is not None})
                 for i, size in enumerate(size_list)]
        budget = WorkBudget(kwargs.get("max_work", MAX_WORK), per_point=client is not None and max(1, len(races)),
                            reserved=startup_work(client))
        for kw in (auto_kw, rival_kw):
            kw.pop("max_work", None)
        raced = list(map_points(_race, races, client=client, progress=progress, desc=f"select {collective}",
                                 shared=(topo, collective, cands, auto_kw, rival_kw, budget)))
    refused = []
    for size, (chosen, times) in zip(size_list, raced, strict=True):
        if isinstance(chosen, str):  # HCCL's choice over the work bound: a row of NaN with the reason
            refused.append((size, chosen))
            rows.append({"collective": collective, "ranks": len(rank_nodes), "size_bytes": size, "hccl_choice": "",
                         "hccl_time_us": math.nan, "best": "", "best_time_us": math.nan, "slowdown": math.nan,
                         "selected_by": "", "refused": chosen})
            continue
        fastest = min(t for t in times.values() if t == t)
        tied = [a for a in times if times[a] <= fastest * (1 + 1e-9)]
        # ties (within rel 1e-9) go to the previous size's best (no crossover between equals) unless
        # HCCL's choice is tied too and faster by a last bit (best never slower than HCCL's choice),
        # then to HCCL's choice, then to the first candidate
        hccl_tied = chosen.algorithm in tied
        if prev in tied and not (hccl_tied and times[prev] > chosen.time_s):
            best = prev
        else:
            best = chosen.algorithm if hccl_tied else tied[0]
        row = {"collective": collective, "ranks": chosen.ranks, "size_bytes": size,
               "hccl_choice": chosen.algorithm, "hccl_time_us": chosen.time_us, "best": best,
               "best_time_us": times[best] * 1e6, "slowdown": chosen.time_s / times[best],
               "selected_by": chosen.config.get("selected_by", "")}
        row.update({f"time_us[{a}]": t * 1e6 for a, t in times.items()})
        rows.append(row)
        if prev is not None and best != prev:
            crossovers.append((size, prev, best))
        prev = best
    if len(refused) == len(size_list):
        raise WorkLimitError(f"every size refused, e.g. {refused[0][1]}")
    df = pd.DataFrame(rows)
    if "refused" in df:
        df["refused"] = df["refused"].fillna("")
    df.attrs["crossovers"] = crossovers
    df.attrs["topology"] = topo.name
    df.attrs["mode"] = mode
    return df


def _race(race, shared):
    """One size of :func:`select`: HCCL's choice (a :class:`_Chosen`) and every candidate's time
    (NaN where a work bound refused it). Module-level and plain data, for a Dask worker."""
    size, fast_point, fast_times = race
    topo, collective, cands, auto_kw, rival_kw, budget = shared
    if fast_point is not None:
        chosen = _Chosen(*fast_point)
    else:
        try:  # select has its own bar
            r = simulate(topo, collective, size, "auto", progress=False, max_work=budget.left(), **auto_kw)
        except WorkLimitError as exc:
            return budget.spend_error(exc), {}
        budget.spend(r.config.get("work", 0))
        chosen = _Chosen(r.time_s, r.algorithm, r.ranks, r.size_bytes, r.config.get("selected_by", ""))
    times = {}
    for algo in cands:
        if algo == chosen.algorithm:
            times[algo] = chosen.time_s
        elif algo in fast_times:
            times[algo] = fast_times[algo]
        else:
            try:
                r = simulate(topo, collective, size, algo, progress=False, max_work=budget.left(), **rival_kw)
            except WorkLimitError as exc:  # a rival over the work bound is left out of this size's race
                budget.spend_error(exc)
                times[algo] = math.nan
                continue
            budget.spend(r.config.get("work", 0))
            times[algo] = r.time_s
    times.setdefault(chosen.algorithm, chosen.time_s)
    return chosen, times


class _Chosen:
    """What :func:`select` reads of HCCL's choice, from the analytical fast path."""

    def __init__(self, time_s, algorithm, ranks, size_bytes, selected_by):
        self.time_s, self.algorithm, self.ranks = time_s, algorithm, ranks
        self.time_us = time_s * 1e6
        self.config = {"selected_by": selected_by}
