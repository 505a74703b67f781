"""What a job's run returns: :class:`JobResult`."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd


@dataclass(frozen=True)
class JobResult:
    """Outcome of playing a :class:`~hcsim.workload.graph.Workload` on one network.

    Attributes
    ----------
    name : str
        The workload's name.
    step_time_s : float
        From the start of the step (time 0) to the last operation ending on any rank.
    ops : DataFrame
        One row per operation and rank it involves: ``op, kind, rank, stream, start_s,
        end_s, comm, collective, algorithm, size_bytes``. ``start_s`` is when the rank's
        stream reached the operation with its waits met; ``end_s`` when the rank was done
        with it (a collective: left its last step).
    links : DataFrame
        Per directed link: ``src, dst, tier, bandwidth_GBps, bytes, utilization`` (bytes over
        capacity x step time).
    config : dict
        What the run used (routing, per-operation algorithms chosen, counters).

    Examples
    --------
    >>> from hcsim.workload import Workload, run
    >>> w = Workload("one")
    >>> _ = w.compute("fwd", ranks=[0, 1], duration_s=1e-3)
    >>> r = run("atlas800t-a2", w)
    >>> r.step_time_s
    0.001
    """

    name: str
    step_time_s: float
    ops: pd.DataFrame
    links: pd.DataFrame
    config: dict = field(default_factory=dict)

    @property
    def step_time_us(self) -> float:
        return self.step_time_s * 1e6

    @property
    def ranks(self) -> pd.DataFrame:
        """The Ascend profiler's cluster summary per rank (:func:`hcsim.workload.metrics.summarize`)."""
        from .metrics import summarize

        return summarize(self.ops, self.step_time_s)

    def op_times(self) -> pd.DataFrame:
        """Per operation: first start, last end and duration over its ranks (seconds)."""
        g = self.ops.groupby("op", sort=False)
        out = g.agg(kind=("kind", "first"), start_s=("start_s", "min"), end_s=("end_s", "max"),
                    ranks=("rank", "size"), collective=("collective", "first"),
                    algorithm=("algorithm", "first"), size_bytes=("size_bytes", "first")).reset_index()
        out["duration_s"] = out["end_s"] - out["start_s"]
        return out

    def __repr__(self):
        return (f"JobResult({self.name!r}: step {self.step_time_s * 1e3:.6g} ms, {self.ops['op'].nunique()} "
                f"operations on {self.ops['rank'].nunique()} ranks)")
