"""Fit a topology's link bandwidths (per tier), per-step overhead and launch overhead to
measured collective times, by least squares on log(time), and write the result with its
provenance.

The fit scales every link of a tier by one factor, so the topology's shape (which links
exist, their relative speeds within a tier) stays as built; the per-step and launch
overheads are fitted as values. The optimiser is a small Nelder-Mead over the logarithms of
the parameters (numpy only), started from the topology's own values.
"""

from __future__ import annotations

import copy
import datetime as _dt

import numpy as np
import pandas as pd

from .api import simulate
from .errors import ConfigError
from .topology.io import load_topology
from .topology.model import ExecutionDefaults
from .topology.spec import LinkSpec


def scaled(topo, tier_scale: dict, step_overhead_s: float, launch_overhead_s: float):
    """A copy of ``topo`` with each tier's links scaled and new overheads."""
    out = copy.deepcopy(topo)
    for _, _, d in out.graph.edges(data=True):
        s = d["spec"]
        if s.tier in tier_scale:
            d["spec"] = LinkSpec(s.bandwidth_Bps * tier_scale[s.tier], s.latency_s, s.tier, s.inline_reduce)
    out.defaults = ExecutionDefaults(step_overhead_s, launch_overhead_s)
    out._compiled = None
    return out


def _nelder_mead(f, x0, steps, max_evals=300, tol=1e-7):
    n = len(x0)
    pts = [np.asarray(x0, float)] + [np.asarray(x0, float) + np.eye(n)[i] * steps[i] for i in range(n)]
    vals = [f(p) for p in pts]
    evals = n + 1
    while evals < max_evals:
        order = np.argsort(vals)
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        if abs(vals[-1] - vals[0]) <= tol * (abs(vals[0]) + tol):
            break
        centroid = np.mean(pts[:-1], axis=0)
        refl = centroid + (centroid - pts[-1])
        fr = f(refl)
        evals += 1
        if fr < vals[0]:
            exp = centroid + 2 * (centroid - pts[-1])
            fe = f(exp)
            evals += 1
            pts[-1], vals[-1] = (exp, fe) if fe < fr else (refl, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = refl, fr
        else:
            con = centroid + 0.5 * (pts[-1] - centroid)
            fc = f(con)
            evals += 1
            if fc < vals[-1]:
                pts[-1], vals[-1] = con, fc
            else:  # shrink towards the best
                pts = [pts[0]] + [pts[0] + 0.5 * (p - pts[0]) for p in pts[1:]]
                vals = [vals[0]] + [f(p) for p in pts[1:]]
                evals += n
    best = int(np.argmin(vals))
    return pts[best], vals[best], evals


def calibrate(topology, measured: pd.DataFrame, *, tiers=None, algorithm="auto", max_evals: int = 300):
    """Fit tier bandwidths and overheads of ``topology`` to ``measured`` collective times.

    Parameters
    ----------
    topology : str, Path or Topology
    measured : DataFrame
        ``collective, size_bytes, time_us`` and optionally ``ranks``
        (:func:`hcsim.backends.load_measured`).
    tiers : list of str, optional
        Tiers to fit (default: every tier the topology has).
    algorithm : str
        What ran (default: HCCL's choice).

    Returns
    -------
    (Topology, dict)
        The calibrated topology and a report: fitted values, residuals per point (log
        error), RMS log error before and after, evaluations used.
    """
    topo = load_topology(topology)
    if measured.empty:
        raise ConfigError("measured: no points to calibrate on")
    tiers = sorted(tiers or {d["spec"].tier for _, _, d in topo.graph.edges(data=True)})
    base_step = topo.defaults.step_overhead_s or 1e-6
    base_launch = topo.defaults.launch_for(str(measured["collective"].iloc[0])) or 1e-6
    points = [(r["collective"], int(r["size_bytes"]), float(r["time_us"]),
               None if pd.isna(r.get("ranks", np.nan)) else int(r["ranks"])) for _, r in measured.iterrows()]

    def unpack(x):
        return ({t: float(np.exp(x[i])) for i, t in enumerate(tiers)}, float(base_step * np.exp(x[len(tiers)])),
                float(base_launch * np.exp(x[len(tiers) + 1])))

    def residuals(x):
        scale, step, launch = unpack(x)
        cand = scaled(topo, scale, step, launch)
        return np.array([np.log(simulate(cand, c, n, algorithm, ranks=k, verify=False).time_us / t)
                         for c, n, t, k in points])

    def loss(x):
        return float(np.mean(residuals(x) ** 2))

    x0 = np.zeros(len(tiers) + 2)
    before = residuals(x0)
    x, _, evals = _nelder_mead(loss, x0, [0.5] * len(x0), max_evals)
    after = residuals(x)
    scale, step, launch = unpack(x)
    fitted = scaled(topo, scale, step, launch)
    fitted.name = f"{topo.name}-calibrated"
    report = {"measured_points": len(points), "tier_bandwidth_scale": scale, "step_overhead_us": step * 1e6,
              "launch_overhead_us": launch * 1e6, "rms_log_error_before": float(np.sqrt(np.mean(before ** 2))),
              "rms_log_error_after": float(np.sqrt(np.mean(after ** 2))),
              "residuals": [{"collective": c, "size_bytes": n, "measured_us": t, "log_error": float(e)}
                            for (c, n, t, _), e in zip(points, after, strict=True)],
              "evaluations": evals, "algorithm": algorithm,
              "date": _dt.date.today().isoformat(), "method": "least squares on log(time), Nelder-Mead"}
    fitted.provenance = {**topo.provenance, "calibration": report}
    return fitted, report
