"""Predicted versus measured: run the simulator on every measured point and report errors."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .api import WorkBudget, check_options, simulate
from .errors import HcsimError, WorkLimitError, bad_value, check_frame, is_int, is_real
from .limits import MAX_WORK, WORK_PER_MEASURED_ROW
from .topology.io import load_topology


def validate_measured(measured: pd.DataFrame, topology, algorithm="auto", min_size=0, max_work=MAX_WORK,
                      **kwargs) -> pd.DataFrame:
    """Predict every measured row and return the pair with the error.

    Parameters
    ----------
    measured : DataFrame
        Columns ``collective, size_bytes, time_us`` and optionally ``ranks`` (see
        :func:`hcsim.backends.load_measured`).
    topology
        What the measurement ran on.
    algorithm : str
        What to predict with. ``"auto"`` (default): the row's own ``algorithm`` where the file
        records the one that ran (hcsim's measured CSVs do), else HCCL's own choice.
    min_size : int
        Points smaller than this are left out of the summary (``attrs``) but kept in the rows.
    max_work : int or None
        Engine work bound of the whole validation (:data:`~hcsim.limits.MAX_WORK`, the rows'
        predictions in turn, as a sweep's points, each row also counting
        :data:`~hcsim.limits.WORK_PER_MEASURED_ROW`): past it the command stops with a one-line
        :class:`~hcsim.errors.WorkLimitError` naming the rows predicted so far. None: no bound.

    Returns
    -------
    DataFrame
        The measured columns plus ``predicted_us``, ``error`` (predicted / measured - 1) and
        ``algorithm``; ``attrs["median_abs_error"]``, ``attrs["p90_abs_error"]``, ``attrs["points"]``.
    """
    from .backends.parsers import check_measured

    check_measured(measured, "validate")
    check_algorithm_name(algorithm)
    if not is_int(min_size) or min_size < 0:
        raise bad_value("min_size", min_size, "a whole number of bytes >= 0")
    min_size = int(min_size)
    check_options(kwargs, ("ranks", "max_work"), "validate_measured")  # each row sets its ranks
    budget = WorkBudget(max_work)
    max_work = budget.max_work
    topo = load_topology(topology)

    def spent(i: int) -> WorkLimitError:  # the bound, taken by the rows before row i
        return WorkLimitError(f"max_work = {max_work}: the validation's predictions took it after {i} of its "
                              f"{len(measured)} rows ({budget.spent:,} units of engine work); use fewer rows or "
                              "another --algo, or raise max_work (--max-work; 0: no bound)")

    rows = []
    for i, (_, m) in enumerate(measured.iterrows()):
        ranks = measured_ranks(m)
        algo = row_algorithm(m, algorithm)
        if max_work is not None and budget.spent >= max_work:
            raise spent(i)
        try:
            r = predict_row(i, m, _bounded_simulate, topo, m["collective"], int(m["size_bytes"]), algo, ranks=ranks,
                            max_work=budget.left(), **kwargs)
        except _BoundReached as stop:
            budget.spend_error(stop.exc)
            raise spent(i) from None
        budget.spend(r.config.get("work", 0) + WORK_PER_MEASURED_ROW)
        row = dict(m)
        row.update(predicted_us=r.time_us, error=r.time_us / float(m["time_us"]) - 1, algorithm=r.algorithm,
                   ranks=r.ranks)
        rows.append(row)
    df = pd.DataFrame(rows)
    df.attrs.update(error_summary(df, min_size), topology=topo.name)
    if df.groupby(["collective", "size_bytes"]).size().max() > 1:  # several algorithms per point
        df.attrs.update(agreement_summary(fastest_agreement(df)))
    return df


class _BoundReached(Exception):
    """A row's prediction stopped by the validation's work bound (not an hcsim error, so that
    :func:`predict_row` passes it on untouched: the caller words it for the whole command)."""

    def __init__(self, exc: WorkLimitError):
        super().__init__(str(exc))
        self.exc = exc


def _bounded_simulate(*args, **kwargs):
    """:func:`hcsim.simulate`, its stop at ``max_work`` raised as :class:`_BoundReached`."""
    try:
        return simulate(*args, **kwargs)
    except WorkLimitError as exc:
        if kwargs.get("max_work") is not None and str(exc).startswith("max_work = ") and getattr(exc, "work", None):
            raise _BoundReached(exc) from None
        raise


def measured_ranks(row) -> int | None:
    """A measured row's rank count, or None (the topology's) where it records none."""
    k = row.get("ranks", np.nan)
    return None if k is None or pd.isna(k) else int(k)


def predict_row(i: int, row, run, *args, **kwargs):
    """``run(*args, **kwargs)``, with an hcsim error it raises prefixed by the row it predicts (``measured.iloc[i]``:
    its collective, size and ranks), so a row the topology cannot run says which it is."""
    try:
        return run(*args, **kwargs)
    except HcsimError as e:
        k = measured_ranks(row)
        what = f"{row['collective']}, {int(row['size_bytes'])} B" + (f", {k} ranks" if k else "")
        raise type(e)(f"measured.iloc[{i}] ({what}): {e}") from None


def check_algorithm_name(algorithm) -> str:
    """``algorithm`` if it is a name a validation or a calibration predicts with (``"auto"``,
    ``"default"`` or an algorithm's name), else a one-line error (checked before it is compared:
    a numpy array has no truth value)."""
    if not isinstance(algorithm, str) or not algorithm.strip():
        raise bad_value("algorithm", algorithm, "'auto', 'default' or an algorithm's name (hcsim algos)")
    return algorithm


def row_algorithm(row, algorithm="auto"):
    """What to predict a measured ``row`` with: ``algorithm`` unless it is ``"auto"`` or
    ``"default"``; then the row's own ``algorithm`` where it names an hcsim algorithm for the
    row's collective (hcsim's measured CSVs record the one that ran), else ``"auto"`` (HCCL's
    choice; hccl_test and nccl-tests rows say only ``"hccl"`` or ``"nccl"``), or for
    ``"default"`` None (hcsim's default for the collective: what to use for a library other
    than HCCL).

    Examples
    --------
    >>> row_algorithm({"collective": "allgather", "algorithm": "ring"})
    'ring'
    >>> row_algorithm({"collective": "allreduce", "algorithm": "hccl"})
    'auto'
    >>> row_algorithm({"collective": "allreduce", "algorithm": "nccl"}, "default") is None
    True
    >>> row_algorithm({"collective": "allgather", "algorithm": "ring"}, "hd")
    'hd'
    """
    from .algorithms.registry import get_algorithm
    from .errors import ConfigError

    check_algorithm_name(algorithm)
    own = row.get("algorithm")
    fallback = None if algorithm == "default" else "auto"
    if algorithm not in ("auto", "default"):
        return algorithm
    if not isinstance(own, str) or not own:
        return fallback
    try:
        get_algorithm(row["collective"], own)
    except ConfigError:
        return fallback
    return own


def agreement_summary(agree: pd.DataFrame) -> dict:
    """``fastest`` (the :func:`fastest_agreement` table), ``fastest_agreement`` ("agreed/clear")
    and ``fastest_agreement_separated`` (the same over the separated clear cases)."""
    check_frame(agree, "hcsim.validate.fastest_agreement", ("agree", "separated"), field="agree", empty_ok=True)
    sep = agree[agree.separated == True]  # noqa: E712 (None where there are no rounds)
    return {"fastest": agree, "fastest_agreement": f"{sum(agree.agree)}/{len(agree)}",
            "fastest_agreement_separated": f"{sum(sep.agree)}/{len(sep)}"}


def fastest_line(attrs: dict) -> str:
    """The fastest-agreement counts of :func:`agreement_summary` as one report line."""
    return (f"# predicted fastest = measured fastest in {attrs['fastest_agreement']} clear cases "
            f"({attrs['fastest_agreement_separated']} where the winner's rounds all beat the rivals')")


def error_summary(df: pd.DataFrame, min_size: int = 0) -> dict:
    """``median_abs_error``, ``p90_abs_error`` and ``points`` over the rows of at least
    ``min_size`` bytes (NaN when there are none)."""
    check_frame(df, "hcsim.validate.validate_measured", ("size_bytes", "error"), ("size_bytes", "error"), empty_ok=True)
    if not is_int(min_size) or min_size < 0:
        raise bad_value("min_size", min_size, "a whole number of bytes >= 0")
    sel = df[df["size_bytes"] >= min_size]["error"].abs()
    nan = float("nan")
    return {"median_abs_error": float(sel.median()) if len(sel) else nan,
            "p90_abs_error": float(sel.quantile(0.9)) if len(sel) else nan, "points": int(len(sel))}


def format_validation(df: pd.DataFrame) -> str:
    """The validation's rows as a text table, then its summary lines (from ``df.attrs``)."""
    check_frame(df, "hcsim.validate.validate_measured", ("time_us", "predicted_us", "error"), ("error",),
                empty_ok=True)
    keep = [c for c in ("case", "collective", "ranks", "size_bytes", "mpi_algorithm", "algorithm", "time_us",
                        "predicted_us", "error") if c in df.columns]
    out = df[keep].rename(columns={"time_us": "measured_us"}).copy()
    out["error"] = (out["error"] * 100).map(lambda x: f"{x:+.1f}%")
    text = out.to_string(index=False, float_format=lambda x: f"{x:.2f}")
    a = df.attrs
    fastest = fastest_line(a) + "\n" if "fastest_agreement" in a and "fastest_agreement_separated" in a else ""
    keys = ("points", "median_abs_error", "p90_abs_error")
    # the summary the validation kept (over its min_size); a frame made by hand: its rows' own
    s = {k: a[k] for k in keys} if all(is_real(a.get(k)) for k in keys) else error_summary(df)
    return (f"# predicted vs measured on {a.get('topology')}\n{text}\n"
            f"# {s['points']} points: median |error| {100 * s['median_abs_error']:.1f}%, "
            f"90th percentile {100 * s['p90_abs_error']:.1f}%\n{fastest}")


def fastest_agreement(df: pd.DataFrame, margin: float = 0.15) -> pd.DataFrame:
    """Per (collective, size): is the predicted fastest algorithm the measured fastest?

    Only cases where the measured fastest beats the runner-up by more than ``margin`` count.
    Algorithms are told apart by ``mpi_algorithm`` when present (two Open MPI algorithms
    can map to one hcsim schedule); the prediction agrees when the measured winner's
    predicted time is the smallest predicted (ties included). With rounds (``time_us_min`` /
    ``time_us_max`` columns), ``separated`` says whether the winner's slowest round still beat
    every rival's fastest round, i.e. whether the gap stands out of the run-to-run spread.

    Examples
    --------
    >>> df = pd.DataFrame({"collective": ["allreduce"] * 2, "size_bytes": [1024] * 2,
    ...                    "algorithm": ["ring", "hd"], "time_us": [100.0, 200.0],
    ...                    "predicted_us": [110.0, 150.0]})
    >>> fastest_agreement(df)[["measured_fastest", "predicted_fastest", "agree"]].values.tolist()
    [['ring', 'ring', True]]
    """
    key = "mpi_algorithm" if "mpi_algorithm" in getattr(df, "columns", ()) else "algorithm"
    check_frame(df, "hcsim.validate.validate_measured", ("collective", "size_bytes", key, "time_us", "predicted_us"),
                ("size_bytes", "time_us", "predicted_us"), empty_ok=True)
    if not is_real(margin) or not 0 <= margin <= 100:
        raise bad_value("margin", margin, "a fraction >= 0 (0.15: the winner 15% faster), at most 100")
    rows = []
    for (coll, size), g in df.groupby(["collective", "size_bytes"]):
        if len(g) < 2:
            continue
        if g[key].duplicated().any():  # one algorithm measured twice at a size: its median, its range
            spec = {"time_us": "median", "predicted_us": "mean"}
            spec.update({c: f for c, f in (("time_us_min", "min"), ("time_us_max", "max")) if c in g.columns})
            g = g.groupby(key, dropna=False, sort=False).agg(spec).reset_index()
            if len(g) < 2:
                continue
        t = g.set_index(key)["time_us"].sort_values()
        if t.iloc[1] <= t.iloc[0] * (1 + margin):
            continue
        pred = g.set_index(key)["predicted_us"]
        separated = None
        if {"time_us_min", "time_us_max"} <= set(g.columns):
            lo, hi = g.set_index(key)["time_us_min"], g.set_index(key)["time_us_max"]
            separated = bool(hi[t.index[0]] < lo.drop(t.index[0]).min())
        rows.append({"collective": coll, "size_bytes": int(size), "measured_fastest": t.index[0],
                     "predicted_fastest": pred.idxmin(), "measured_margin": t.iloc[1] / t.iloc[0] - 1,
                     "agree": bool(pred[t.index[0]] <= pred.min() * (1 + 1e-9)), "separated": separated})
    return pd.DataFrame(rows, columns=["collective", "size_bytes", "measured_fastest", "predicted_fastest",
                                       "measured_margin", "agree", "separated"])


def validate_mpi(testbed_text: str, ops, algos="all", sizes=(65536, 262144, 1048576), iterations: int = 3,
                 min_size: int = 65536, rounds: int = 3) -> pd.DataFrame:
    """Bring up a namespace testbed, calibrate on point-to-point probes only, then measure
    and predict every op x algorithm x size; tear the testbed down whatever happens.

    The probe set and then the whole measurement plan each run ``rounds`` times, interleaved
    (every algorithm, then every algorithm again), and every point keeps the median over
    rounds: the machine's slow spells then fall on different algorithms in different rounds
    instead of deciding a comparison. ``time_us_min`` / ``time_us_max`` give the spread.

    Returns the rows (measured, predicted, error) with ``attrs``: median / 90th-percentile
    |error| over sizes >= ``min_size``, the fitted parameters, and per (op, size) whether the
    predicted fastest algorithm is the measured fastest where the measured ones differ by
    more than 15%, and ``calibrated``, the calibrated Topology.
    """
    from .backends.mpi import (
        calibrated_topology,
        check_iterations,
        check_rounds,
        fit_point_to_point,
        mpi_algorithms,
        run_mpi_sweep,
    )
    from .testbed import Testbed, parse_testbed

    spec = parse_testbed(testbed_text)
    plan = {op: mpi_algorithms(op, algos) for op in ops}  # bad names fail before the testbed is up
    check_rounds(rounds)  # before the testbed is up
    check_iterations(iterations)
    times: dict[tuple, list] = {}
    with Testbed(spec) as tb:
        fit = fit_point_to_point(tb, iterations=iterations, rounds=rounds)
        topo = calibrated_topology(tb, fit)
        for _ in range(rounds):
            for op, chosen in plan.items():
                for algo in chosen:
                    measured = run_mpi_sweep(tb, op, sizes, algo, iterations)
                    for n, t in zip(measured["size_bytes"], measured["time_us"], strict=True):
                        times.setdefault((op, algo, int(n)), []).append(float(t))
    rows = []
    for (op, algo, n), ts in times.items():
        pred = simulate(topo, op, n, algo.hcsim).time_us
        t = float(np.median(ts))
        rows.append({"collective": op, "mpi_algorithm": algo.name, "algorithm": algo.hcsim, "size_bytes": n,
                     "time_us": t, "predicted_us": pred, "error": pred / t - 1,
                     "time_us_min": min(ts), "time_us_max": max(ts), "rounds": len(ts)})
    df = pd.DataFrame(rows)
    df.attrs.update(error_summary(df, min_size), topology=topo.name,
                    fit={k: v for k, v in fit.items() if k != "probes_s"})
    df.attrs.update(agreement_summary(fastest_agreement(df)))
    df.attrs["calibrated"] = topo
    return df
