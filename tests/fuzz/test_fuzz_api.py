"""Fuzz simulate, sweep and select: one-line HcsimErrors for bad input; for good input
finite positive times, exact sizes, and bit-identical reruns."""

from __future__ import annotations

import math

import hcsim

from .harness import Violation, check_result, fuzz, guarded, same_frame, same_result
from .strategies import (
    SMALL_TOPOLOGIES,
    Expr,
    _topology,
    reference_size,
    select_call,
    shrink_call,
    simulate_call,
    sweep_call,
    unwrap,
)


def _expected_bytes(call):
    args, kw = call.real()
    if args[1] == "alltoallv" and kw.get("send_matrix") is not None:
        return None
    return reference_size(call.args[2])


def _fresh(call):
    """The call's arguments with a newly built topology: a rerun must not depend on what
    earlier calls left in a topology's caches (routes, compiled form)."""
    args, kw = call.real()
    first = call.args[0]
    if isinstance(first, Expr) and first.expr in SMALL_TOPOLOGIES:
        args[0] = _topology.__wrapped__(first.expr)
        if isinstance(args[0], str):
            args[0] = hcsim.load_topology(args[0])
    return args, kw


def run_simulate(call):
    args, kw = call.real()
    r = hcsim.simulate(*args, **kw)
    check_result(r, _expected_bytes(call), call.expect_ranks)
    args2, kw2 = _fresh(call)
    same_result(r, hcsim.simulate(*args2, **kw2))
    return r


@fuzz(simulate_call(), weight=1.5, shrink=shrink_call)
def test_simulate(call):
    """hcsim.simulate with small valid calls and 0-3 odd or wrong arguments; a rerun on a newly
    built topology is bit-identical."""
    return call.repro(), guarded(run_simulate, call)


def check_frame(df, name="sweep"):
    import pandas as pd

    if not isinstance(df, pd.DataFrame) or df.empty:
        raise Violation(f"{name} returned {type(df).__name__} {'(empty)' if isinstance(df, pd.DataFrame) else ''}")
    if "refused" in df:  # a sweep's points refused one by one: NaN times and a one-line reason (documented)
        reasons = df["refused"].fillna("")
        for r in reasons:
            if not isinstance(r, str) or "\n" in r:
                raise Violation(f"{name}: refused = {r!r}")
        if (reasons != "").all():
            raise Violation(f"{name}: every point refused ({reasons.iloc[0][:120]}), yet no error raised")
        df = df[reasons == ""]
    for col in ("time_us",):
        for v in df[col]:
            if not isinstance(v, float | int) or not math.isfinite(v) or v <= 0:
                raise Violation(f"{name}: {col} = {v!r}")
    for col in ("algbw_GBps", "busbw_GBps"):
        if col in df:
            for v in df[col]:
                if not math.isfinite(v) or v < 0:
                    raise Violation(f"{name}: {col} = {v!r}")
    for v in df["size_bytes"]:
        if not isinstance(v, int) and not (hasattr(v, "dtype") and v.dtype.kind == "i"):
            raise Violation(f"{name}: size_bytes = {v!r} ({type(v).__name__})")


def run_sweep(call):
    args, kw = call.real()
    df = hcsim.sweep(*args, **kw)
    check_frame(df)
    args2, kw2 = _fresh(call)
    same_frame(df, hcsim.sweep(*args2, **kw2))
    return df


@fuzz(sweep_call(), weight=1.0, shrink=shrink_call)
def test_sweep(call):
    """hcsim.sweep: sizes as ranges, lists, scalars and junk; algorithm lists; odd factors."""
    return call.repro(), guarded(run_sweep, call)


def run_select(call):
    args, kw = call.real()
    df = hcsim.select(*args, **kw)
    check_frame(df.rename(columns={"hccl_time_us": "time_us"}), "select")
    for _, row in df.iterrows():
        if not (math.isfinite(row["slowdown"]) and row["slowdown"] >= 1 - 1e-9):
            raise Violation(f"select: slowdown = {row['slowdown']!r} at {row['size_bytes']} (HCCL's time / the best)")
        if not row["best_time_us"] <= row["hccl_time_us"] * (1 + 1e-9):
            raise Violation(f"select: best {row['best_time_us']} us slower than HCCL's {row['hccl_time_us']} us")
    args2, kw2 = call.real()
    same_frame(df, hcsim.select(*args2, **kw2))
    return df


@fuzz(select_call(), weight=0.5, shrink=shrink_call)
def test_select(call):
    """hcsim.select on small Ascend topologies: slowdown >= 1, best <= HCCL's, reruns identical."""
    return call.repro(), guarded(run_select, call)


__all__ = ["unwrap"]
