"""Predicted versus measured: run the simulator on every measured point and report errors."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .api import simulate
from .topology.io import load_topology


def validate_measured(measured: pd.DataFrame, topology, algorithm="auto", min_size=0, **kwargs) -> pd.DataFrame:
    """Predict every measured row and return the pair with the error.

    Parameters
    ----------
    measured : DataFrame
        Columns ``collective, size_bytes, time_us`` and optionally ``ranks`` (see
        :func:`hcsim.backends.load_measured`).
    topology
        What the measurement ran on.
    algorithm : str
        What to predict with (default: HCCL's own choice).
    min_size : int
        Points smaller than this are left out of the summary (``attrs``) but kept in the rows.

    Returns
    -------
    DataFrame
        The measured columns plus ``predicted_us``, ``error`` (predicted / measured - 1) and
        ``algorithm``; ``attrs["median_abs_error"]``, ``attrs["p90_abs_error"]``, ``attrs["points"]``.
    """
    topo = load_topology(topology)
    rows = []
    for _, m in measured.iterrows():
        ranks = None if pd.isna(m.get("ranks", np.nan)) else int(m["ranks"])
        r = simulate(topo, m["collective"], int(m["size_bytes"]), algorithm, ranks=ranks, **kwargs)
        row = dict(m)
        row.update(predicted_us=r.time_us, error=r.time_us / float(m["time_us"]) - 1, algorithm=r.algorithm,
                   ranks=r.ranks)
        rows.append(row)
    df = pd.DataFrame(rows)
    sel = df[df["size_bytes"] >= min_size]["error"].abs()
    df.attrs.update(median_abs_error=float(sel.median()) if len(sel) else float("nan"),
                    p90_abs_error=float(sel.quantile(0.9)) if len(sel) else float("nan"), points=int(len(sel)),
                    topology=topo.name)
    return df


def format_validation(df: pd.DataFrame) -> str:
    keep = [c for c in ("case", "collective", "ranks", "size_bytes", "algorithm", "time_us", "predicted_us", "error")
            if c in df.columns]
    out = df[keep].rename(columns={"time_us": "measured_us"}).copy()
    out["error"] = (out["error"] * 100).map(lambda x: f"{x:+.1f}%")
    text = out.to_string(index=False, float_format=lambda x: f"{x:.2f}")
    a = df.attrs
    return (f"# predicted vs measured on {a.get('topology')}\n{text}\n"
            f"# {a['points']} points: median |error| {100 * a['median_abs_error']:.1f}%, "
            f"90th percentile {100 * a['p90_abs_error']:.1f}%\n")


def validate_mpi(testbed_text: str, ops, algos="all", sizes=(65536, 262144, 1048576), iterations: int = 3,
                 min_size: int = 65536) -> pd.DataFrame:
    """Bring up a namespace testbed, calibrate on point-to-point probes only, then measure
    and predict every op x algorithm x size; tear the testbed down whatever happens.

    Returns the rows (measured, predicted, error) with ``attrs``: median / 90th-percentile
    |error| over sizes >= ``min_size``, the fitted parameters, and per (op, size) whether the
    predicted fastest algorithm is the measured fastest where the measured ones differ by
    more than 15%.
    """
    from .backends.mpi import COLL_TUNED, calibrated_topology, fit_point_to_point, run_mpi_sweep
    from .testbed import Testbed, parse_testbed

    spec = parse_testbed(testbed_text)
    rows = []
    with Testbed(spec) as tb:
        fit = fit_point_to_point(tb, iterations=iterations)
        topo = calibrated_topology(tb, fit)
        for op in ops:
            chosen = [a for (c, a) in COLL_TUNED if c == op] if algos == "all" else list(algos)
            for algo in chosen:
                measured = run_mpi_sweep(tb, op, sizes, algo, iterations)
                for _, m in measured.iterrows():
                    pred = simulate(topo, op, int(m.size_bytes), algo).time_us
                    rows.append({"collective": op, "algorithm": algo, "size_bytes": int(m.size_bytes),
                                 "time_us": float(m.time_us), "predicted_us": pred,
                                 "error": pred / float(m.time_us) - 1})
    df = pd.DataFrame(rows)
    sel = df[df["size_bytes"] >= min_size]["error"].abs()
    agree = []
    for _, g in df.groupby(["collective", "size_bytes"]):
        if len(g) < 2:
            continue
        t = g.set_index("algorithm")["time_us"].sort_values()
        if t.iloc[1] > t.iloc[0] * 1.15:  # the measured winner is clear
            agree.append(bool(g.set_index("algorithm")["predicted_us"].idxmin() == t.index[0]))
    df.attrs.update(median_abs_error=float(sel.median()), p90_abs_error=float(sel.quantile(0.9)),
                    points=int(len(sel)), topology=topo.name,
                    fit={k: v for k, v in fit.items() if k != "probes_s"},
                    fastest_agreement=f"{sum(agree)}/{len(agree)}")
    return df
