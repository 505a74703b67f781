"""Fuzz what good calls return: recording and verifying change no time, and the event-driven
tables agree with the time and with each other."""

from __future__ import annotations

import math

import numpy as np

import hcsim
from hcsim.algorithms.schedule import BUSBW_FACTOR

from .harness import Violation, check_result, fuzz, guarded
from .strategies import shrink_call, simulate_call


def _close(a, b, rel=1e-12):
    return a == b or abs(a - b) <= rel * max(abs(a), abs(b))


def check_tables(r) -> None:
    t = r.time_s
    tr = r.transfers
    if tr is None or r.steps is None or r.links is None or r.critical_path is None:
        raise Violation("record=True in mode 'des' but a table is missing")
    if len(tr):
        times = tr[["ready_s", "start_s", "end_s"]].to_numpy(dtype=float)
        if not np.isfinite(times).all():
            raise Violation("a transfer time is not finite")
        if (times[:, 0] < 0).any() or (times[:, 0] > times[:, 1] * (1 + 1e-12) + 1e-18).any() \
                or (times[:, 1] > times[:, 2] * (1 + 1e-12) + 1e-18).any():
            i = int(np.argmax((times[:, 0] > times[:, 1] + 1e-18) | (times[:, 1] > times[:, 2] + 1e-18)
                              | (times[:, 0] < 0)))
            raise Violation(f"transfer {i}: ready {times[i, 0]!r}, start {times[i, 1]!r}, end {times[i, 2]!r} out of order")
        last = float(times[:, 2].max())
        if last > t * (1 + 1e-12):
            raise Violation(f"a transfer ends at {last!r} s, after the call's time {t!r} s")
        if (tr["bytes"] < 0).any():
            raise Violation("a transfer of negative bytes")
        cp = r.critical_path
        if len(cp):
            if not _close(float(cp["end_s"].iloc[-1]), last, 1e-12):
                raise Violation(f"the critical path ends at {cp['end_s'].iloc[-1]!r} s, the last transfer at {last!r} s")
            gids, preds = cp["gid"].to_numpy(), cp["pred"].to_numpy()
            if (preds[1:] != gids[:-1]).any():
                raise Violation("the critical path is not a chain (a row's pred is not the row before)")
    st = r.steps
    if len(st) and (st[["ready_s", "end_s"]].to_numpy(dtype=float)[:, 0]
                    > st[["ready_s", "end_s"]].to_numpy(dtype=float)[:, 1] * (1 + 1e-12) + 1e-18).any():
        raise Violation("a step ends before it is ready")
    if len(tr) and int(st["transfers"].sum()) != len(tr):
        raise Violation(f"the steps table counts {int(st['transfers'].sum())} transfers, the transfers table has {len(tr)}")
    util = r.links["utilization"].to_numpy(dtype=float)
    if len(util) and (not np.isfinite(util).all() or (util < 0).any() or (util > 1 + 1e-9).any()):
        raise Violation(f"link utilization outside [0, 1]: {util.min()!r} .. {util.max()!r}")
    if (r.links["bytes"].to_numpy(dtype=float) < 0).any():
        raise Violation("a link carried negative bytes")


def run_consistency(call):
    args, kw = call.real()
    kw = {k: v for k, v in kw.items() if k not in ("record", "verify", "mode")}
    recorded = hcsim.simulate(*args, **kw, record=True, verify=True)
    check_result(recorded)
    plain = hcsim.simulate(*args, **kw, record=False, verify=False)
    if recorded.time_s != plain.time_s:
        raise Violation(f"record/verify change the time: {recorded.time_s!r} s with, {plain.time_s!r} s without")
    check_tables(recorded)
    algbw = recorded.size_bytes / recorded.time_s / 1e9
    if not _close(recorded.algbw_GBps, algbw):
        raise Violation(f"algbw_GBps {recorded.algbw_GBps!r}, size / time gives {algbw!r}")
    factor = BUSBW_FACTOR[recorded.collective](recorded.ranks)
    if not (math.isfinite(factor) and _close(recorded.busbw_GBps, algbw * factor)):
        raise Violation(f"busbw_GBps {recorded.busbw_GBps!r}, algbw x {factor!r} gives {algbw * factor!r}")
    return recorded


@fuzz(simulate_call(max_mutations=0), weight=1.0, shrink=shrink_call)
def test_results(call):
    """Valid small calls in mode 'des': record and verify change no time; tables consistent."""
    return call.repro() + "  # record=True/False, verify=True/False, mode='des'", guarded(run_consistency, call)
