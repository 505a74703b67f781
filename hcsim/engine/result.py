"""The :class:`Result` both modes return: times, bandwidths and (event-driven) detail tables."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..algorithms.schedule import BUSBW_FACTOR
from ..units import GB

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class Result:
    """Outcome of simulating one collective call.

    Attributes
    ----------
    collective, algorithm, mode : str
    ranks : int
    size_bytes : int
        The size as nccl-tests reports it (see :class:`~hcsim.algorithms.CollectiveArgs`).
    time_s : float
        Time from the call to the last rank finishing.
    steps : DataFrame or None
        Per step: ``step, transfers, ready_s`` (first transfer ready), ``end_s`` (last completes).
    transfers : DataFrame or None
        Per transfer: ``step, src, dst, bytes, reduce, ready_s, start_s, end_s``.
    links : DataFrame or None
        Per directed link: ``src, dst, tier, bandwidth_GBps, bytes, utilization``.
    critical_path : DataFrame or None
        The chain of transfers, each gated by the one before, that ends last.
    config : dict
        The resolved parameters the run used.
    tables : tuple, callable or None
        The four tables, or a function that makes them: they are built (with pandas) on
        first access, so a call whose tables nobody reads costs no DataFrames.
    """

    collective: str
    algorithm: str
    mode: str
    ranks: int
    size_bytes: int
    time_s: float
    config: dict = field(default_factory=dict)
    tables: tuple | Callable[[], tuple] | None = field(default=None, repr=False, compare=False)

    def _table(self, i: int):
        tables = self.tables
        if callable(tables):
            tables = tables()
            object.__setattr__(self, "tables", tables)
        return None if tables is None else tables[i]

    @property
    def steps(self) -> pd.DataFrame | None:
        return self._table(0)

    @property
    def transfers(self) -> pd.DataFrame | None:
        return self._table(1)

    @property
    def links(self) -> pd.DataFrame | None:
        return self._table(2)

    @property
    def critical_path(self) -> pd.DataFrame | None:
        return self._table(3)

    @property
    def time_us(self) -> float:
        return self.time_s * 1e6

    @property
    def algbw_GBps(self) -> float:
        """Size over time, GB = 1e9 bytes (nccl-tests' algbw, hccl_test's alg_bandwidth)."""
        return self.size_bytes / self.time_s / GB if self.time_s > 0 else float("inf")

    @property
    def busbw_GBps(self) -> float:
        """algbw times nccl-tests' bus factor for the collective."""
        return self.algbw_GBps * BUSBW_FACTOR[self.collective](self.ranks)

    def row(self) -> dict:
        """One flat record, the row :func:`hcsim.sweep` puts in its DataFrame."""
        return {"collective": self.collective, "algorithm": self.algorithm, "mode": self.mode,
                "ranks": self.ranks, "size_bytes": self.size_bytes, "time_us": self.time_us,
                "algbw_GBps": self.algbw_GBps, "busbw_GBps": self.busbw_GBps}

    def __repr__(self):
        return (f"Result({self.collective}/{self.algorithm} {self.mode} p={self.ranks} "
                f"size={self.size_bytes} B: {self.time_us:.3f} us, algbw {self.algbw_GBps:.3f} GB/s, "
                f"busbw {self.busbw_GBps:.3f} GB/s)")


def link_table(net, path_bytes, time_s: float) -> pd.DataFrame:
    """Per directed link of the compiled topology ``net``: ``src, dst, tier, bandwidth_GBps,
    bytes, utilization``, from the bytes each run sent down each path (``path_bytes``: one
    array per run, indexed by path id) over ``time_s``."""
    import pandas as pd

    nl = net.num_links
    caps = net.capacity_Bps[:nl]
    pad = len(net.capacity_Bps)
    mat = net.paths.matrix(pad)
    # the topology's path store is shared and may have grown since a run routed its last step
    per_path = np.zeros(len(mat))
    for b in path_bytes:
        per_path[: b.size] += b
    # summed over the paths in an order fixed by what they cross, not by their ids: the ids follow
    # the order the topology first routed them in, which depends on what ran on it before, and a
    # float sum's last bits on its order (a rerun on a used topology differed by 1.8e-15 bytes)
    used = np.flatnonzero(per_path)
    rows = mat[used]
    key = np.zeros(used.size, dtype=np.uint64)
    for j in range(rows.shape[1]):  # a hash of each path's links, wrapping (deterministic everywhere)
        key = key * np.uint64(1_000_003) + rows[:, j].astype(np.uint64)
    order = np.lexsort((used, key))
    res_bytes = np.bincount(rows[order].ravel(), weights=np.repeat(per_path[used][order], mat.shape[1]),
                            minlength=pad + 1)
    link_bytes = res_bytes[:nl]
    return pd.DataFrame({
        "src": [u for u, _ in net.links], "dst": [v for _, v in net.links],
        "tier": [s.tier for s in net.link_specs], "bandwidth_GBps": caps / GB,
        "bytes": link_bytes,
        "utilization": link_bytes / (caps * time_s) if time_s > 0 else 0.0})


def tables_from_engine(sim, time_s: float):
    """Build the step, transfer, link and critical-path tables from a finished FlowSimulator."""
    import pandas as pd

    n = sim.n_steps
    reached = sim.step_count > 0
    steps = pd.DataFrame({"step": np.arange(n), "transfers": sim.step_count,
                          "ready_s": np.where(reached, sim.step_ready_s, np.nan),
                          "end_s": np.where(reached, sim.step_end_s, np.nan)})
    links = link_table(sim.net, [sim.path_bytes], time_s)
    transfers = critical = None
    if sim.cfg.record:
        states = sorted(sim.done_states + list(sim.states.values()), key=lambda s: s.k)
        parts = []
        for st in states:
            parts.append(pd.DataFrame({
                "gid": st.gid0 + np.arange(st.n), "step": st.k, "src": st.src, "dst": st.dst,
                "bytes": st.nbytes.astype(np.int64), "reduce": st.reduce, "ready_s": st.t_ready,
                "start_s": st.t_start, "end_s": st.t_end, "pred": st.pred}))
        transfers = (pd.concat(parts, ignore_index=True) if parts else
                     pd.DataFrame(columns=["gid", "step", "src", "dst", "bytes", "reduce", "ready_s",
                                           "start_s", "end_s", "pred"]))
        transfers = transfers.sort_values("gid").reset_index(drop=True)
        if len(transfers):
            chain = []
            g = int(transfers["end_s"].idxmax())
            while g >= 0:
                chain.append(g)
                g = int(transfers.at[g, "pred"])
            critical = transfers.loc[chain[::-1]].reset_index(drop=True)
        transfers = transfers.drop(columns=["gid"])
    return steps, transfers, links, critical
