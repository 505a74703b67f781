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
import numbers

import numpy as np
import pandas as pd

from ..errors import bad_value

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
    keep = end > start
    start, end = start[keep], end[keep]
    if not len(start):
        return start, end
    order = np.argsort(start, kind="stable")
    start, end = start[order], end[order]
    reach = np.maximum.accumulate(end)
    # a new piece begins where an interval starts after everything before it has ended
    new = np.empty(len(start), dtype=bool)
    new[0] = True
    new[1:] = start[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.r_[first[1:] - 1, len(start) - 1]
    return start[first], reach[last]


def covered(start, end) -> float:
    """Length of the union of intervals ``[start_i, end_i)``."""
    s, e = merge_intervals(start, end)
    return float(np.sum(e - s))


def covered_outside(start, end, other_start, other_end) -> float:
    """Length of the union of the first intervals not covered by the union of the others
    (``|A \\ B|``), measured piece by piece (no subtraction of large totals)."""
    a_s, a_e = merge_intervals(start, end)
    b_s, b_e = merge_intervals(other_start, other_end)
    if not len(a_s):
        return 0.0
    if not len(b_s):
        return float(np.sum(a_e - a_s))
    # B's covered length up to x: F(x) = lengths of B's pieces before x's piece + the part of x's piece
    before = np.r_[0.0, np.cumsum(b_e - b_s)]

    def f(x):
        i = np.searchsorted(b_s, x, side="right") - 1
        inside = np.where(i >= 0, np.clip(x - b_s[np.maximum(i, 0)], 0.0, (b_e - b_s)[np.maximum(i, 0)]), 0.0)
        return np.where(i >= 0, before[np.maximum(i, 0)], 0.0) + inside

    overlap = f(a_e) - f(a_s)
    return float(np.sum(np.maximum((a_e - a_s) - overlap, 0.0)))


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
    if isinstance(step_time_s, bool) or not isinstance(step_time_s, numbers.Real) \
            or not math.isfinite(step_time_s) or step_time_s < 0:
        raise bad_value("step_time_s", step_time_s, "a finite number of seconds >= 0")
    for col in ("kind", "rank", "start_s", "end_s"):
        if col not in ops.columns:
            raise bad_value("ops", f"columns {list(ops.columns)}", "an operation table with kind, rank, start_s, "
                            "end_s (JobResult.ops)")
    step = float(step_time_s)
    ran = ops[ops["start_s"].notna() & ops["end_s"].notna()]
    every = sorted({int(r) for r in ran["rank"]}) if ranks is None else sorted({int(r) for r in ranks})
    rows = []
    groups = dict(tuple(ran.groupby("rank", sort=True)))
    for rank in every:
        part = groups.get(rank)
        if part is None:
            rows.append((rank, step, 0.0, 0.0, 0.0, step))
            continue
        s = np.clip(part["start_s"].to_numpy(dtype=float), 0.0, step)
        e = np.clip(part["end_s"].to_numpy(dtype=float), 0.0, step)
        kind = part["kind"].to_numpy()
        comp = np.isin(kind, COMPUTE_KINDS)
        comm = np.isin(kind, COMMUNICATION_KINDS)
        work = comp | comm
        computation = covered(s[comp], e[comp])
        communication = covered(s[comm], e[comm])
        exposed = covered_outside(s[comm], e[comm], s[comp], e[comp])
        busy = covered(s[work], e[work])
        rows.append((rank, step, computation, communication, exposed, max(step - busy, 0.0)))
    table = pd.DataFrame(rows, columns=("rank", *COLUMNS)).set_index("rank")
    table[list(COLUMNS)] = table[list(COLUMNS)].astype(float) * 1e6
    return table


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
