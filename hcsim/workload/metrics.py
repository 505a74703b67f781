"""The Ascend profiler's cluster step summary, per rank, from a job's operation table.

msprof-analyze's ``cluster`` analysis (mstt, FACTS s9) reports per rank and step:

* ``stepTime``: the step's duration;
* ``computation``: time some compute task runs (the union of compute intervals, so two
  overlapping kernels on two streams count once);
* ``communication``: time some collective or send/recv runs (the union of their intervals);
* ``communicationNotOverlapComputation``: communication time with no compute running (the
  exposed communication);
* ``free``: time with neither (the step minus the union of everything).

So ``stepTime = computation + communicationNotOverlapComputation + free`` exactly (up to one
rounding of each figure). Record and wait events are markers, not work: a stream waiting
for an event is free time. All figures are microseconds, as the profiler prints them.

Unions are computed exactly on the intervals (sorted, merged, then measured), not sampled.

Examples
--------
>>> import pandas as pd
>>> ops = pd.DataFrame({"kind": ["compute", "collective"], "rank": [0, 0],
...                     "start_s": [0.0, 0.5e-3], "end_s": [1e-3, 2e-3]})
>>> summarize(ops, 4e-3).loc[0].to_dict()  # doctest: +NORMALIZE_WHITESPACE
{'stepTime_us': 4000.0, 'computation_us': 1000.0, 'communication_us': 1500.0,
 'communicationNotOverlapComputation_us': 1000.0, 'free_us': 2000.0}
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..errors import bad_value, is_real

COMPUTE_KINDS = ("compute",)
"""Operation kinds counted as computation."""

COMMUNICATION_KINDS = ("collective", "sendrecv")
"""Operation kinds counted as communication."""

COLUMNS = ("stepTime_us", "computation_us", "communication_us", "communicationNotOverlapComputation_us",
           "free_us")
"""The summary's columns (the profiler's names, in microseconds)."""


def merge_intervals(start, end) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals ``[start_i, end_i)`` as sorted, disjoint intervals.

    Intervals that touch (one ends where the next starts) are merged; empty ones
    (``end <= start``) are dropped.

    Examples
    --------
    >>> s, e = merge_intervals([3.0, 0.0, 1.0, 5.0], [4.0, 2.0, 1.5, 5.0])
    >>> s.tolist(), e.tolist()
    ([0.0, 3.0], [2.0, 4.0])
    """
    start = np.asarray(start, dtype=float)
    end = np.asarray(end, dtype=float)
    _, s, e = _union_by_group(np.zeros(start.size, dtype=np.int64), start, end)
    return s, e


def covered(start, end) -> float:
    """Length of the union of intervals ``[start_i, end_i)``."""
    s, e = merge_intervals(start, end)
    return float(np.sum(e - s))


def covered_outside(start, end, other_start, other_end) -> float:
    """Length of the union of the first intervals not covered by the union of the others
    (``|A \\ B|``), measured piece by piece (no subtraction of large totals)."""
    def pieces(s, e):
        s, e = np.asarray(s, dtype=float), np.asarray(e, dtype=float)
        return _union_by_group(np.zeros(s.size, dtype=np.int64), s, e)

    return float(_outside_by_group(pieces(start, end), pieces(other_start, other_end), 1)[0])


def summarize(ops: pd.DataFrame, step_time_s, ranks=None) -> pd.DataFrame:
    """The cluster step summary per rank (msprof-analyze ``cluster_step_trace``), in us.

    Parameters
    ----------
    ops : DataFrame
        A job's operation table (``JobResult.ops``): at least ``kind``, ``rank``, ``start_s``
        and ``end_s``; rows with no start or end (an operation that never ran) are left out.
    step_time_s : float
        The step's duration; intervals are clipped to ``[0, step_time_s]``.
    ranks : iterable of int, optional
        Ranks to report (a rank with no operation gets a row of free time); default: every
        rank in ``ops``.

    Returns
    -------
    DataFrame
        Indexed by ``rank``, columns :data:`COLUMNS`.
    """
    if not is_real(step_time_s) \
            or not math.isfinite(step_time_s) or step_time_s < 0:
        raise bad_value("step_time_s", step_time_s, "a finite number of seconds >= 0")
    for col in ("kind", "rank", "start_s", "end_s"):
        if col not in ops.columns:
            raise bad_value("ops", f"columns {list(ops.columns)}", "an operation table with kind, rank, start_s, "
                            "end_s (JobResult.ops)")
    step = float(step_time_s)
    ran = ops[ops["start_s"].notna() & ops["end_s"].notna()]
    rank = ran["rank"].to_numpy().astype(np.int64)
    # every rank's intervals at once (a job on 16,384 ranks: one pass, not one pandas group per rank)
    known = np.unique(rank)
    every = known if ranks is None else np.array(sorted({int(r) for r in ranks}), dtype=np.int64)
    at = np.searchsorted(known, rank)  # dense rank index
    n = known.size
    s = np.clip(ran["start_s"].to_numpy(dtype=float), 0.0, step)
    e = np.clip(ran["end_s"].to_numpy(dtype=float), 0.0, step)
    kind = ran["kind"].to_numpy()
    comp = np.isin(kind, COMPUTE_KINDS)
    comm = np.isin(kind, COMMUNICATION_KINDS)
    work = comp | comm
    comp_pieces = _union_by_group(at[comp], s[comp], e[comp])
    comm_pieces = _union_by_group(at[comm], s[comm], e[comm])
    computation = _length_by_group(comp_pieces, n)
    communication = _length_by_group(comm_pieces, n)
    exposed = _outside_by_group(comm_pieces, comp_pieces, n)
    busy = _length_by_group(_union_by_group(at[work], s[work], e[work]), n)
    table = pd.DataFrame({"rank": every, "stepTime_us": step, "computation_us": 0.0, "communication_us": 0.0,
                          "communicationNotOverlapComputation_us": 0.0, "free_us": step})
    has = np.isin(every, known)  # a rank asked for with no operation keeps its row of free time
    i = np.searchsorted(known, every[has])
    table.loc[has, "computation_us"] = computation[i]
    table.loc[has, "communication_us"] = communication[i]
    table.loc[has, "communicationNotOverlapComputation_us"] = exposed[i]
    table.loc[has, "free_us"] = np.maximum(step - busy[i], 0.0)
    table = table.set_index("rank")
    table[list(COLUMNS)] = table[list(COLUMNS)].astype(float) * 1e6
    return table


def _union_by_group(group, start, end):
    """:func:`merge_intervals` for many groups at once: the union of each group's intervals as
    (group, start, end) of disjoint pieces, sorted by group then start."""
    keep = end > start
    group, start, end = group[keep], start[keep], end[keep]
    if not start.size:
        return group, start, end
    order = np.lexsort((start, group))
    group, start, end = group[order], start[order], end[order]
    reach = pd.Series(end).groupby(group).cummax().to_numpy()  # what the group covers up to each interval
    new = np.empty(start.size, dtype=bool)
    new[0] = True
    new[1:] = (group[1:] != group[:-1]) | (start[1:] > reach[:-1])
    first = np.flatnonzero(new)
    last = np.r_[first[1:] - 1, start.size - 1]
    return group[first], start[first], reach[last]


def _length_by_group(pieces, n: int) -> np.ndarray:
    """Each of ``n`` groups' covered length, from :func:`_union_by_group`'s pieces."""
    group, start, end = pieces
    return np.bincount(group, weights=end - start, minlength=n) if group.size else np.zeros(n)


def _outside_by_group(a, b, n: int) -> np.ndarray:
    """:func:`covered_outside` for each of ``n`` groups at once: the length of each group's ``a``
    pieces not covered by its ``b`` pieces (both from :func:`_union_by_group`)."""
    ag, a_s, a_e = a
    bg, b_s, b_e = b
    if not ag.size:
        return np.zeros(n)
    if not bg.size:
        return _length_by_group(a, n)
    length = b_e - b_s
    # b's covered length before each of its pieces, within the piece's group
    before = pd.Series(length).groupby(bg).cumsum().to_numpy() - length

    def f(x):  # b's covered length up to x, in the group of each of a's pieces
        # the last b piece of the same group starting at or before x: b's pieces and the queries
        # merged in (group, value) order, a b piece before a query at the same value
        nb = bg.size
        order = np.lexsort((np.r_[np.zeros(nb), np.ones(x.size)], np.r_[b_s, x], np.r_[bg, ag]))
        seen = np.maximum.accumulate(np.where(order < nb, order, -1))
        i = np.empty(x.size, dtype=np.int64)
        q = order >= nb
        i[order[q] - nb] = seen[q]
        ok = i >= 0
        ok[ok] = bg[i[ok]] == ag[ok]
        j = np.maximum(i, 0)
        inside = np.clip(x - b_s[j], 0.0, length[j])
        return np.where(ok, before[j] + inside, 0.0)

    overlap = f(a_e) - f(a_s)
    return np.bincount(ag, weights=np.maximum((a_e - a_s) - overlap, 0.0), minlength=n)


def totals(summary: pd.DataFrame) -> pd.DataFrame:
    """Rows ``mean``, ``min``, ``max`` and ``sum`` of a per-rank summary (the cluster view:
    the slowest rank's exposed communication, the mean free time, ...).

    Examples
    --------
    >>> import pandas as pd
    >>> ops = pd.DataFrame({"kind": ["compute", "compute"], "rank": [0, 1],
    ...                     "start_s": [0.0, 0.0], "end_s": [1e-3, 3e-3]})
    >>> totals(summarize(ops, 4e-3))["computation_us"].to_dict()
    {'mean': 2000.0, 'min': 1000.0, 'max': 3000.0, 'sum': 4000.0}
    """
    cols = [c for c in COLUMNS if c in summary.columns]
    part = summary[cols]
    if not len(part):
        return pd.DataFrame(columns=cols, index=pd.Index(["mean", "min", "max", "sum"], name="rank"), dtype=float)
    out = pd.DataFrame([part.mean(), part.min(), part.max(), part.sum()], index=["mean", "min", "max", "sum"])
    out.index.name = "rank"
    return out
