"""Calibration from a whole collective sweep: a size-dependent efficiency curve, and its
leave-one-out error.

Two points of a sweep fix a latency-bandwidth line (:func:`hcsim.calibrate.calibrate`,
``fit="bottleneck"``: the per-step overhead and the rate of the one class of links that limits
the points). A real transport does not follow one line from its small-message floor to its
peak: stacks change protocol and pipelining depth with the message size (NCCL's LL / LL128 /
Simple, MPI's eager and rendezvous, HCCL's small-count executors), so a message of 1 MiB gets
a smaller share of the link than one of 1 GiB. :func:`calibrate_sweep` keeps the line the
sweep's smallest and largest points give and fits, on every point, how much of the line's rate
a message of each size gets: a monotone, piecewise-constant efficiency over a few bands of
message size (the message: the bytes one rank sends one peer in one step, which is what a
transport picks its protocol by), the top band at the line's own rate. The curve goes into the
topology as message regimes (:class:`hcsim.engine.regimes.MessageRegimes`), multiplying the
efficiency of any regimes the topology already has, so every collective run on the calibrated
topology pays it, not only the one measured.

:func:`leave_one_out_errors` refits without each point in turn and predicts it: the error a user can
expect on a size the sweep did not measure, which the in-sample residuals understate.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt

import numpy as np
import pandas as pd

from .api import simulate
from .errors import ConfigError, WorkLimitError, bad_value, is_int, is_real
from .topology.io import load_topology
from .validate import measured_ranks, predict_row, row_algorithm

DEFAULT_BANDS = 4
"""Bands of message size of the efficiency curve: few parameters (a band less than this, the
top one being the line's rate), enough to follow a sweep's climb from its floor to its peak."""

MAX_BANDS = 8

ROUNDS = 3
"""Rounds of the sweep fit: the curve on every point, then the line on its two points with the
curve in place."""

MIN_EFFICIENCY = 1e-3
"""The least share of the line's rate a band may get."""

MAX_EFFICIENCY = 1e3
"""The most: a falling curve (CPU ranks, whose small messages are copied in cache) may run
small messages faster than the line's rate, which the largest point sets."""

DIRECTIONS = ("either", "rising", "falling")

SWEEP_FIT_SIMULATIONS = 6_000
"""Default bound on the curve fit's simulated points (evaluations x measured points), on top
of its base two-point fit's own; ``calibrate_sweep(max_simulations=...)`` raises it."""

SWEEP_FIT_WORK = 25_000_000
"""Default work bound of the curve fit (engine units, summed over its simulations, as
:data:`hcsim.limits.MAX_CALIBRATION_WORK`), on top of its base two-point fit's own."""


def point_messages(topology, measured: pd.DataFrame, algorithm="auto") -> np.ndarray:
    """For each measured row, the largest message of the call it runs on ``topology``: the most
    bytes one rank sends one peer in one step (a step's blocks to one peer counted as one
    message, :func:`hcsim.engine.regimes.message_bytes`).

    Examples
    --------
    >>> from hcsim.topology import single_switch
    >>> m = pd.DataFrame({"collective": "allgather", "algorithm": "ring", "size_bytes": [4096, 1 << 20],
    ...                   "time_us": [10.0, 900.0]})
    >>> point_messages(single_switch(4, 1e9), m).tolist()
    [1024, 262144]
    """
    from .backends.parsers import check_measured

    check_measured(measured, "find the messages of")
    topo = load_topology(topology)
    out = []
    for i, (_, r) in enumerate(measured.iterrows()):
        res = predict_row(i, r, simulate, topo, r["collective"], int(r["size_bytes"]), row_algorithm(r, algorithm),
                          ranks=measured_ranks(r), verify=False, record=True)
        tr = res.transfers
        if tr is None or tr.empty:
            out.append(0)
            continue
        out.append(int(tr.groupby(["step", "src", "dst"])["bytes"].sum().max()))
    return np.asarray(out, dtype=np.int64)


def curve_regimes(base, from_bytes, efficiency):
    """Message regimes that are ``base`` (a :class:`~hcsim.engine.regimes.MessageRegimes` or
    None) with its efficiency multiplied, message by message, by the piecewise-constant curve
    ``efficiency`` starting at ``from_bytes`` (the first 0): the two tables' bands merged, every
    other field of ``base`` kept as it is in the band it covers.

    Examples
    --------
    >>> from hcsim.engine.regimes import MessageRegimes
    >>> base = MessageRegimes(from_bytes=(0, 4096), overhead_s=(1e-6, 2e-6), efficiency=(0.5, 1.0))
    >>> r = curve_regimes(base, (0, 65536), (0.8, 1.0))
    >>> r.from_bytes, r.overhead_s, r.efficiency
    ((0, 4096, 65536), (1e-06, 2e-06, 2e-06), (0.4, 0.8, 1.0))
    """
    from .engine.regimes import EFFICIENCY_ALLOWED, MessageRegimes, _efficiency

    if isinstance(from_bytes, (str, bytes)) or not hasattr(from_bytes, "__len__") or not len(from_bytes) \
            or not all(is_int(b) and b >= 0 for b in from_bytes) or int(from_bytes[0]) != 0 \
            or any(int(b) <= int(a) for a, b in zip(from_bytes[:-1], from_bytes[1:], strict=True)):
        raise bad_value("from_bytes", from_bytes, "whole numbers of bytes, the first 0, each more than the one before")
    if isinstance(efficiency, (str, bytes)) or not hasattr(efficiency, "__len__") \
            or len(efficiency) != len(from_bytes):
        raise bad_value("efficiency", efficiency, f"{len(from_bytes)} numbers, one per band")
    for v in efficiency:
        if not _efficiency(float(v) if is_real(v) else v):
            raise bad_value("efficiency", v, EFFICIENCY_ALLOWED)
    base = base or MessageRegimes()
    cuts = sorted(set(int(b) for b in base.from_bytes) | set(int(b) for b in from_bytes))
    mine = np.searchsorted(np.asarray(from_bytes), cuts, side="right") - 1
    theirs = base.regime_of(np.asarray(cuts, dtype=float))
    fields = {}
    for f in dataclasses.fields(MessageRegimes):
        v = getattr(base, f.name)
        if f.name == "from_bytes":
            fields[f.name] = tuple(cuts)
        elif f.name == "efficiency":
            fields[f.name] = tuple(float(v[t]) * float(efficiency[m]) for t, m in zip(theirs, mine, strict=True))
        else:
            fields[f.name] = None if v is None else tuple(v[t] for t in theirs)
    return MessageRegimes(**fields)


def with_efficiency_curve(topology, from_bytes, efficiency):
    """A copy of ``topology`` whose message regimes carry the efficiency curve (:func:`curve_regimes`)."""
    out = load_topology(topology).copy()
    out.defaults = dataclasses.replace(out.defaults, message_regimes=curve_regimes(
        out.defaults.message_regimes, from_bytes, efficiency))
    return out


def _bands(messages: np.ndarray, bands: int) -> tuple:
    """Where each band starts: 0, then the message sizes that split the points' sorted messages
    into ``bands`` groups of about equal count (fewer where messages repeat)."""
    m = np.sort(messages)
    cuts = sorted({int(m[round(len(m) * j / bands)]) for j in range(1, bands)} - {0})
    return (0, *[c for c in cuts if c > m[0]])


def _efficiencies(d: np.ndarray, sign: int = 1) -> np.ndarray:
    """Band efficiencies from the fit's parameters: the top band 1, each band below it the one
    above times ``exp(-sign * d**2)`` (monotone by construction: rising with the message size
    for ``sign`` 1, falling for -1), within [:data:`MIN_EFFICIENCY`, :data:`MAX_EFFICIENCY`]."""
    e = np.ones(len(d) + 1)
    for j in range(len(d) - 1, -1, -1):
        e[j] = e[j + 1] * np.exp(-sign * min(float(d[j]) ** 2, 50.0))
    return np.clip(e, MIN_EFFICIENCY, MAX_EFFICIENCY)


def _check_measured_rows(measured, least: int, why: str = "the two that fix the line, the smallest and the "
                         "largest, and more to fit the curve on"):
    from .backends.parsers import check_measured

    check_measured(measured, "calibrate on")
    if len(measured) < least:
        raise bad_value("measured points", len(measured), f"at least {least} ({why})")


def calibrate_sweep(topology, measured: pd.DataFrame, *, bands: int = DEFAULT_BANDS, direction: str = "either",
                    algorithm="auto",
                    source: str | None = None, max_evals: int = 200, max_simulations: int = SWEEP_FIT_SIMULATIONS,
                    max_work: int = SWEEP_FIT_WORK, leave_one_out: bool = False, **line_kwargs):
    """Fit ``topology`` to a whole sweep: a latency-bandwidth line from its smallest and largest
    points, then a monotone efficiency curve by message size on every point.

    Parameters
    ----------
    topology : str, Path or Topology
    measured : DataFrame
        ``collective, size_bytes, time_us`` and optionally ``ranks`` and ``algorithm``
        (:func:`hcsim.backends.load_measured`); at least 3 rows, of 2 sizes or more.
    bands : int
        Bands of message size of the curve (1 to :data:`MAX_BANDS`; 1: the line alone; at most
        half the points' count). Their edges split the points' largest messages
        (:func:`point_messages`) into groups of about equal count (fewer where messages repeat,
        and then a band may hold one point); the top band keeps the line's rate.
    direction : {"either", "rising", "falling"}
        Which way the curve is monotone in the message size. ``"rising"``: small messages get
        less of the line's rate (protocols that pipeline deeper with size: NCCL, HCCL, RDMA);
        ``"falling"``: more (CPU ranks copying small messages in cache, large ones at memory
        rate); ``"either"`` (default): both are fitted and the one with the smaller error kept.
    algorithm : str
        What ran (as :func:`hcsim.calibrate.calibrate` takes it).
    source : str, optional
        Where the measurements came from, kept in the provenance.
    max_evals, max_simulations, max_work : int
        Bounds of the curve fit in all its rounds and directions (Nelder-Mead evaluations;
        simulated points; engine work), the report says which one stopped it (a shrink of the
        simplex may pass the evaluation count by a few, never the work); ``max_work`` also bounds
        each fit of the line on its own.
    leave_one_out : bool
        Also refit without each point in turn and predict it (:func:`leave_one_out_errors`): the
        report's ``leave_one_out`` gives the median and largest |error|. It costs one whole
        fit per point.
    **line_kwargs
        Passed to the line's fit, :func:`hcsim.calibrate.calibrate` with ``fit="bottleneck"``
        (``regimes``, ``prefer_rank_links``, ``fixed_cost``, ``rank_reduce_ratio``,
        ``max_work``...).

    Returns
    -------
    (Topology, dict)
        The calibrated topology and a report: the line's fit (``line``), the curve
        (``efficiency_curve``: ``from_bytes``, ``efficiency`` and the points in each band),
        RMS log error of the line alone and of line and curve over every point, residuals per
        point, evaluations used; also the topology's ``provenance["calibration_from_sweep"]``.

    Raises
    ------
    ConfigError
        If the points have one size only (no line), or the fit's first prediction already
        costs more than ``max_work`` allows (:class:`~hcsim.errors.WorkLimitError`).

    Examples
    --------
    >>> from hcsim.topology import single_switch
    >>> from hcsim.engine.regimes import MessageRegimes
    >>> truth = single_switch(4, 1e9)
    >>> truth.defaults = dataclasses.replace(truth.defaults, step_overhead_s=5e-6, message_regimes=MessageRegimes(
    ...     from_bytes=(0, 65536), overhead_s=(0.0, 0.0), efficiency=(0.5, 1.0)))
    >>> sizes = [4 << 10, 64 << 10, 1 << 20, 16 << 20]
    >>> m = pd.DataFrame({"collective": "allgather", "algorithm": "ring", "size_bytes": sizes,
    ...                   "time_us": [simulate(truth, "allgather", n, "ring").time_us for n in sizes]})
    >>> fitted, rep = calibrate_sweep(single_switch(4, 2e9), m, bands=2)
    >>> rep["rms_log_error_after"] < 0.01 < rep["rms_log_error_line"]
    True
    """
    from .calibrate import calibrate

    _check_measured_rows(measured, 3)
    if not is_int(bands) or not 1 <= bands <= MAX_BANDS:
        raise bad_value("bands", bands, f"a whole number from 1 to {MAX_BANDS}")
    for name, v, lo in (("max_evals", max_evals, 1), ("max_simulations", max_simulations, 1),
                        ("max_work", max_work, 1)):
        if not is_int(v) or v < lo:
            raise bad_value(name, v, f"a whole number >= {lo}")
    if not isinstance(direction, str) or direction not in DIRECTIONS:
        raise bad_value("direction", direction, ", ".join(DIRECTIONS))
    if not isinstance(leave_one_out, (bool, np.bool_)):
        raise bad_value("leave_one_out", leave_one_out, "True or False")
    if leave_one_out:
        _check_measured_rows(measured, 4, "leave-one-out of the sweep fit (each refit needs 3)")
    if "fit" in line_kwargs:
        raise bad_value("fit", line_kwargs["fit"], "not given: the sweep's line is always fit='bottleneck'")
    measured = measured.reset_index(drop=True)
    sizes = measured["size_bytes"].astype(np.int64)
    small, large = int(sizes.idxmin()), int(sizes.idxmax())
    if sizes[small] == sizes[large]:
        raise ConfigError(f"measured points: all {len(measured)} of one size ({int(sizes[small])} B); a sweep needs "
                          "two sizes at least (its smallest and largest fix the line)")
    from .engine.regimes import MessageRegimes

    user = line_kwargs.get("regimes")
    own = {k: v for k, v in line_kwargs.items() if k != "regimes"}  # the line's fit gets the regimes with the curve
    base = load_topology(topology).defaults.message_regimes
    plain = {}  # the regimes without the curve at the line's fitted values (its build's last call)

    def regimes_with(starts, eff):
        def regimes(step_s, link_Bps):
            from .calibrate import _user_regimes

            plain["regimes"] = _user_regimes(user, step_s, link_Bps) if user is not None else base
            return curve_regimes(plain["regimes"], starts, eff)
        return regimes

    def fit_line(starts, eff):
        """The line on its two points with the curve in place, and its regimes without the curve."""
        out = calibrate(topology, measured.loc[[small, large]], fit="bottleneck", algorithm=algorithm,
                        source=source, regimes=regimes_with(starts, eff), **{"max_work": max_work, **own})
        return (*out, plain["regimes"] or MessageRegimes())

    line, line_rep, line_plain = fit_line((0,), (1.0,))
    messages = point_messages(line, measured, algorithm)
    starts = _bands(messages, min(int(bands), max(1, len(measured) // 2)))  # about two points a band or more
    band_of = np.searchsorted(np.asarray(starts), messages, side="right") - 1
    rows = [r for _, r in measured.iterrows()]
    times = measured["time_us"].astype(float).to_numpy()
    spent = {"work": 0}

    def predict(topo):
        out = []
        for i, r in enumerate(rows):
            res = predict_row(i, r, simulate, topo, r["collective"], int(r["size_bytes"]),
                              row_algorithm(r, algorithm), ranks=measured_ranks(r), verify=False, record=False)
            spent["work"] += res.config.get("work", 50 * res.config.get("instants", 0))
            out.append(res.time_us)
        return np.log(np.asarray(out) / times)

    def build(at, d, sign):
        line_topo, _, regimes = at
        out = line_topo.copy()
        out.defaults = dataclasses.replace(out.defaults, message_regimes=curve_regimes(
            regimes, starts, _efficiencies(np.asarray(d, dtype=float), sign)))
        return out

    at_line = predict(line)
    per_eval = max(1, spent["work"])
    signs = {"rising": (1,), "falling": (-1,), "either": (1, -1)}[direction] if len(starts) > 1 else (1,)
    # predictions outside the optimiser's count: the line's (made), a loss after each round, the result's; and a
    # Nelder-Mead shrink may run a simplex past its cap
    reserve = ROUNDS * len(signs) + 1 + len(starts)
    limits = {"max_evals": int(max_evals), "max_simulations": int(max_simulations) // len(rows) - 1 - reserve,
              "max_work": int(max_work) // per_eval - 1 - reserve}
    limit_by = min(limits, key=limits.get)
    need = len(signs) * (len(starts) + 1)  # a simplex for each direction tried
    if len(starts) > 1 and limits[limit_by] < need:
        given = {"max_evals": max_evals, "max_simulations": max_simulations, "max_work": max_work}[limit_by]
        raise WorkLimitError(f"{limit_by} = {given}: the curve fit of {len(starts)} bands "
                             f"({', '.join('rising' if g == 1 else 'falling' for g in signs)}) needs {need + reserve} "
                             f"evaluations of the {len(rows)} points at least, and one costs {per_eval:,} units of "
                             f"engine work ({len(rows)} simulations); raise it or use fewer points")
    from .calibrate import _nelder_mead

    def fit_curve(sign, budget):
        """Curve and line alternated (:data:`ROUNDS` rounds, ``budget`` evaluations of the curve in
        all): the curve on every point with the line fixed, then the line on its two points with the
        curve in place, so the smallest point's fixed cost is what is left once the curve prices its
        bytes. Returns the best state a round ended in, the line alone included (so never worse
        than the line over the points): (mean squared log error, the line's fit, the curve's
        parameters), and the evaluations used."""
        at, d, used = (line, line_rep, line_plain), np.zeros(len(starts) - 1), 0
        best = (float(np.mean(at_line ** 2)), at, d)
        for r in range(ROUNDS if len(starts) > 1 else 0):
            if budget - used < len(starts) + 1:
                break
            d, _, e = _nelder_mead(lambda x, at=at: float(np.mean(predict(build(at, x, sign)) ** 2)), d,
                                   [0.5 / (r + 1)] * len(d), max(len(starts) + 1, (budget - used) // (ROUNDS - r)))
            used += e
            at = fit_line(starts, tuple(_efficiencies(d, sign)))
            loss = float(np.mean(predict(build(at, d, sign)) ** 2))
            if loss < best[0]:
                best = (loss, at, d)
        return best, used

    evals, tried = 0, []
    for k, sign in enumerate(signs):  # each direction its share of what is left
        (loss, at, d), used = fit_curve(sign, (limits[limit_by] - evals) // (len(signs) - k))
        evals += used
        tried.append((loss, k, at, d, sign))
    _, _, (line, line_rep, line_plain), d, sign = min(tried, key=lambda t: t[:2])
    eff = _efficiencies(d, sign)
    fitted = build((line, line_rep, line_plain), d, sign)
    after = predict(fitted)
    if not fitted.name.endswith("-calibrated"):
        fitted.name = f"{fitted.name}-calibrated"
    report = {
        "measured_points": len(rows), "source": source, "fit": "curve", "algorithm": algorithm,
        "line": {k: line_rep[k] for k in ("link_scale", "tier_bandwidth_scale", "step_overhead_us",
                                          "launch_overhead_us", "fixed_cost") if k in line_rep},
        "line_points": [int(sizes[small]), int(sizes[large])],
        "direction": "rising" if sign == 1 else "falling",
        "efficiency_curve": [{"from_bytes": int(b), "efficiency": float(e), "points": int((band_of == j).sum())}
                             for j, (b, e) in enumerate(zip(starts, eff, strict=True))],
        "rms_log_error_line": float(np.sqrt(np.mean(at_line ** 2))),
        "rms_log_error_after": float(np.sqrt(np.mean(after ** 2))),
        "residuals": [{"collective": r["collective"], "size_bytes": int(r["size_bytes"]), "message_bytes": int(m),
                       "measured_us": float(t), "log_error": float(e)}
                      for r, m, t, e in zip(rows, messages, times, after, strict=True)],
        "evaluations": int(evals), "evaluation_limit": int(limits[limit_by]), "evaluation_limit_by": limit_by,
        "date": _dt.date.today().isoformat(),
        "method": "line: calibrate(fit='bottleneck') on the smallest and largest points; curve: least squares on "
                  "log(time) over every point, Nelder-Mead, monotone by construction",
    }
    if leave_one_out:
        loo = leave_one_out_errors(topology, measured, algorithm=algorithm, bands=bands, direction=direction,
                                   max_evals=max_evals, max_simulations=max_simulations, max_work=max_work,
                                   **line_kwargs)
        report["leave_one_out"] = {"points": len(loo), "median_abs_error": float(loo["error"].abs().median()),
                                   "max_abs_error": float(loo["error"].abs().max()),
                                   "errors": [float(e) for e in loo["error"]]}
    fitted.provenance = {**fitted.provenance, "calibration_from_sweep": report}
    return fitted, report


def leave_one_out_errors(topology, measured: pd.DataFrame, *, fit: str = "curve", algorithm="auto",
                         **kwargs) -> pd.DataFrame:
    """Refit ``topology`` without each measured point in turn and predict that point.

    Parameters
    ----------
    topology : str, Path or Topology
    measured : DataFrame
        As :func:`calibrate_sweep` takes it; at least 3 rows (4 with ``fit="curve"``: each
        refit needs 3).
    fit : {"curve", "bottleneck", "tiers"}
        ``"curve"``: :func:`calibrate_sweep` (``kwargs`` go to it); else
        :func:`hcsim.calibrate.calibrate` with that ``fit``.
    algorithm : str
        What ran.

    Returns
    -------
    DataFrame
        One row per point: ``collective, size_bytes, ranks, measured_us, predicted_us, error``
        (predicted / measured - 1, each by a fit that did not see the point).

    Examples
    --------
    >>> from hcsim.topology import single_switch
    >>> truth = single_switch(4, 1e9)
    >>> sizes = [4 << 10, 64 << 10, 1 << 20]
    >>> m = pd.DataFrame({"collective": "allgather", "algorithm": "ring", "size_bytes": sizes,
    ...                   "time_us": [simulate(truth, "allgather", n, "ring").time_us for n in sizes]})
    >>> loo = leave_one_out_errors(single_switch(4, 2e9), m, fit="tiers")
    >>> len(loo), bool(loo["error"].abs().max() < 0.01)
    (3, True)
    """
    from .calibrate import calibrate
    from .validate import validate_measured

    if not isinstance(fit, str) or fit not in ("curve", "bottleneck", "tiers"):
        raise bad_value("fit", fit, "curve, bottleneck or tiers")
    for k in ("bands", "direction", "leave_one_out"):
        if fit != "curve" and k in kwargs:
            raise bad_value(k, kwargs[k], "only with fit='curve'")
    _check_measured_rows(measured, 4 if fit == "curve" else 3,
                         "each refit needs 3" if fit == "curve" else "each refit needs 2")
    measured = measured.reset_index(drop=True)
    out = []
    for i in range(len(measured)):
        rest = measured.drop(index=i)
        if fit == "curve":
            topo, _ = calibrate_sweep(topology, rest, algorithm=algorithm, **kwargs)
        else:
            topo, _ = calibrate(topology, rest, fit=fit, algorithm=algorithm, **kwargs)
        v = validate_measured(measured.iloc[[i]], topo, algorithm=algorithm)
        r = measured.iloc[i]
        out.append({"collective": r["collective"], "size_bytes": int(r["size_bytes"]), "ranks": measured_ranks(r),
                    "measured_us": float(r["time_us"]), "predicted_us": float(v["predicted_us"].iloc[0]),
                    "error": float(v["error"].iloc[0])})
    return pd.DataFrame(out)
