"""Calibration from a whole sweep (hcsim.calibrate_sweep): a line on the sweep's smallest and largest
points, a monotone efficiency curve by message size on all of them, and leave-one-out errors.

The truths are topologies with known message regimes; the measured times are simulated on them, so the
fit must recover the curve and the line, and a point the model class cannot explain must show up in its
leave-one-out error."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from hcsim.api import simulate
from hcsim.calibrate_sweep import (
    calibrate_sweep,
    curve_regimes,
    leave_one_out_errors,
    point_messages,
    with_efficiency_curve,
)
from hcsim.engine.regimes import MessageRegimes
from hcsim.errors import HcsimError
from hcsim.topology import single_switch
from hcsim.topology.io import load_topology, save_topology

# 4-rank ring allgathers: the message is a quarter of the size, 1 KiB .. 4 MiB over these six sizes
SIZES = [4096 * 4 ** k for k in range(6)]


def _truth(efficiency, from_bytes, step_s=5e-6):
    t = single_switch(4, 1e9)
    t.defaults = dataclasses.replace(t.defaults, step_overhead_s=step_s, message_regimes=MessageRegimes(
        from_bytes=tuple(from_bytes), overhead_s=(0.0,) * len(from_bytes), efficiency=tuple(efficiency)))
    return t


def _measured(truth, sizes=SIZES):
    return pd.DataFrame({"collective": "allgather", "algorithm": "ring", "ranks": 4, "size_bytes": sizes,
                         "time_us": [simulate(truth, "allgather", n, "ring").time_us for n in sizes]})


def test_the_points_largest_messages_are_their_schedules():
    m = _measured(single_switch(4, 1e9))
    assert point_messages(single_switch(4, 1e9), m).tolist() == [n // 4 for n in SIZES]


def test_a_rising_curve_and_the_line_are_recovered():
    # bands split the six messages (1 KiB .. 1 MiB) into three pairs: 0, 16 KiB, 256 KiB, the truth's edges
    truth = _truth((0.4, 0.7, 1.0), (0, 16384, 262144))
    fitted, rep = calibrate_sweep(single_switch(4, 2e9), _measured(truth), bands=3, direction="rising")
    assert [c["from_bytes"] for c in rep["efficiency_curve"]] == [0, 16384, 262144]
    assert [c["points"] for c in rep["efficiency_curve"]] == [2, 2, 2]
    # the bottom band's points are mostly step overhead (a 1 KiB message at 0.4 GB/s is 2.6 us against the 5 us
    # step), so it and the step are the least determined; the alternating fit gets them within 5%
    got = [c["efficiency"] for c in rep["efficiency_curve"]]
    assert got[0] == pytest.approx(0.4, rel=0.05) and got[1:] == pytest.approx([0.7, 1.0], rel=0.02)
    assert rep["line"]["step_overhead_us"] == pytest.approx(5.0, rel=0.05)
    assert list(rep["line"]["link_scale"].values()) == pytest.approx([0.5], rel=0.01)  # 2 GB/s x 0.5 = the truth
    assert rep["rms_log_error_after"] < 0.01 < 0.1 < rep["rms_log_error_line"]
    # an unseen size of another collective on the calibrated topology pays the curve too
    want = simulate(truth, "reducescatter", 3 << 20, "ring").time_us
    assert simulate(fitted, "reducescatter", 3 << 20, "ring").time_us == pytest.approx(want, rel=0.03)
    assert fitted.provenance["calibration_from_sweep"] is rep


def test_either_direction_finds_a_falling_curve():
    # small messages faster than the large ones' rate (CPU ranks copying in cache): efficiency 2 below 64 KiB,
    # where two bands split the six messages
    truth = _truth((2.0, 1.0), (0, 65536))
    _, rep = calibrate_sweep(single_switch(4, 2e9), _measured(truth), bands=2)
    assert rep["direction"] == "falling"
    assert [c["efficiency"] for c in rep["efficiency_curve"]] == pytest.approx([2.0, 1.0], rel=0.03)
    _, rising = calibrate_sweep(single_switch(4, 2e9), _measured(truth), bands=2, direction="rising")
    assert rising["rms_log_error_after"] > 5 * rep["rms_log_error_after"]  # a rising curve cannot explain it


def test_the_curve_is_monotone_whatever_the_points():
    rng = np.random.default_rng(7)
    m = _measured(single_switch(4, 1e9))
    m["time_us"] *= np.exp(rng.normal(0, 0.3, len(m)))  # noise a monotone curve cannot follow
    for direction, sign in (("rising", 1), ("falling", -1)):
        _, rep = calibrate_sweep(single_switch(4, 1e9), m, bands=3, direction=direction, max_evals=60)
        e = [c["efficiency"] for c in rep["efficiency_curve"]]
        assert e[-1] == 1.0
        assert rep["rms_log_error_after"] <= rep["rms_log_error_line"] + 1e-12  # never worse than the line alone
        assert all(sign * (b - a) >= 0 for a, b in zip(e[:-1], e[1:], strict=True)), (direction, e)


def test_leave_one_out_predicts_each_point_by_a_fit_that_did_not_see_it():
    truth = _truth((0.5, 1.0), (0, 65536))
    m = _measured(truth)
    # one point the model cannot follow (16 KiB, in the bottom band with two others): the others' fit predicts it
    # far too fast, while the fit that sees it bends the bottom band towards it
    m.loc[1, "time_us"] *= 3.0
    loo = leave_one_out_errors(single_switch(4, 2e9), m, fit="curve", bands=2, direction="rising", max_evals=60)
    assert loo["size_bytes"].tolist() == SIZES and (loo["measured_us"] == m["time_us"]).all()
    assert loo.loc[1, "error"] < -0.5
    _, rep = calibrate_sweep(single_switch(4, 2e9), m, bands=2, direction="rising", max_evals=60)
    assert abs(rep["residuals"][1]["log_error"]) < 0.8 * abs(np.log1p(loo.loc[1, "error"]))  # in-sample understates
    # the plain fits too: a line fitted on the other points of an exact line predicts each within a hair
    plain = _measured(single_switch(4, 1e9))
    for fit in ("tiers", "bottleneck"):
        got = leave_one_out_errors(single_switch(4, 2e9), plain, fit=fit)
        assert got["error"].abs().max() < 0.01, fit


def test_the_curve_multiplies_a_topologys_own_regimes_and_keeps_their_fields():
    base = MessageRegimes(from_bytes=(0, 8192), overhead_s=(1e-6, 0.0), efficiency=(1.0, 0.5),
                          start_when=("sender", "both"))
    r = curve_regimes(base, (0, 4096, 65536), (0.25, 0.5, 1.0))
    assert r.from_bytes == (0, 4096, 8192, 65536)
    assert r.efficiency == (0.25, 0.5, 0.25, 0.5)
    assert r.overhead_s == (1e-6, 1e-6, 0.0, 0.0) and r.start_when == ("sender", "sender", "both", "both")
    t = with_efficiency_curve(single_switch(4, 1e9), (0, 4096), (0.5, 1.0))
    assert t.defaults.message_regimes.efficiency == (0.5, 1.0)
    assert single_switch(4, 1e9).defaults.message_regimes is None


def test_the_calibrated_topology_round_trips_through_yaml(tmp_path):
    truth = _truth((0.4, 0.7, 1.0), (0, 16384, 262144))
    fitted, _ = calibrate_sweep(single_switch(4, 2e9), _measured(truth), bands=3, direction="rising", max_evals=80)
    back = load_topology(save_topology(fitted, tmp_path / "fitted.yaml"))
    for n in (8192, 1 << 20):
        assert simulate(back, "allgather", n, "ring").time_us == pytest.approx(
            simulate(fitted, "allgather", n, "ring").time_us, rel=1e-9)


@pytest.mark.parametrize("kwargs, field", [
    ({"bands": 0}, "bands"), ({"bands": 9}, "bands"), ({"bands": "4"}, "bands"), ({"bands": 2.0}, "bands"),
    ({"direction": "up"}, "direction"), ({"leave_one_out": "yes"}, "leave_one_out"), ({"fit": "tiers"}, "fit"),
    ({"max_evals": 0}, "max_evals"), ({"max_work": -1}, "max_work"),
])
def test_bad_arguments_get_one_line(kwargs, field):
    with pytest.raises(HcsimError, match=field):
        calibrate_sweep(single_switch(4, 1e9), _measured(single_switch(4, 1e9)), **kwargs)


def test_too_few_points_or_one_size_are_refused():
    m = _measured(single_switch(4, 1e9))
    with pytest.raises(HcsimError, match="at least 3"):
        calibrate_sweep(single_switch(4, 1e9), m.iloc[:2])
    with pytest.raises(HcsimError, match="one size"):
        calibrate_sweep(single_switch(4, 1e9), pd.concat([m.iloc[[1]]] * 3, ignore_index=True))
    with pytest.raises(HcsimError, match="at least 4"):
        leave_one_out_errors(single_switch(4, 1e9), m.iloc[:3], fit="curve")
    with pytest.raises(HcsimError, match="fit"):
        leave_one_out_errors(single_switch(4, 1e9), m, fit="line")


def test_cli_fits_a_curve_and_prints_leave_one_out(tmp_path):
    csv = tmp_path / "sweep.csv"
    # five messages, 1 KiB .. 256 KiB: two bands split them at 16 KiB, where the truth's edge is
    _measured(_truth((0.5, 1.0), (0, 16384)), SIZES[:5]).to_csv(csv, index=False)
    start = save_topology(single_switch(4, 2e9), tmp_path / "start.yaml")
    out = tmp_path / "fitted.yaml"
    run = subprocess.run([sys.executable, "-m", "hcsim.cli", "calibrate", "--measured", str(csv), "--topology",
                          str(start), "--fit", "curve", "--bands", "2", "--direction", "rising", "--leave-one-out",
                          "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert "# efficiency by message size (rising): from 0 B x0.5" in run.stdout
    assert run.stdout.count("  allgather") == 5 and "# leave-one-out |error|: median" in run.stdout
    assert load_topology(out).defaults.message_regimes.efficiency[0] == pytest.approx(0.5, rel=0.03)
    bad = subprocess.run([sys.executable, "-m", "hcsim.cli", "calibrate", "--measured", str(csv), "--topology",
                          str(start), "--bands", "2", "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "--bands: only with --fit curve" in bad.stderr
    assert "Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_the_corpus_calibrates_a_system_on_its_whole_first_sweep():
    from hcsim.corpus import calibration_points, calibration_sweep, system_summary, validate_system

    truth = _truth((0.5, 1.0), (0, 65536))
    sweep = _measured(truth)
    other = pd.DataFrame({"collective": "reducescatter", "algorithm": "ring", "ranks": 4,
                          "size_bytes": [1 << 16, 1 << 22],
                          "time_us": [simulate(truth, "reducescatter", n, "ring").time_us for n in (1 << 16, 1 << 22)]})
    measured = pd.concat([sweep, other], ignore_index=True)
    assert calibration_sweep(measured) == list(range(6)) and calibration_points(measured) == [0, 5]
    system = {"system": "toy", "topology": single_switch(4, 2e9), "transport": None, "measured": measured}
    rows, rep = validate_system(system, sweep_bands=2, max_evals=60)
    assert rows["calibration"].tolist() == [True] * 6 + [False] * 2
    assert rep["fit"] == "curve" and len(rep["efficiency_curve"]) == 2
    assert rows.loc[6:, "error"].abs().max() < 0.03  # the curve carries to a collective it was not fitted on
    two, _ = validate_system(system)
    assert two.loc[6:, "error"].abs().max() > 0.1  # the two-point line does not
    assert system_summary("toy", rows)["calibration"] == "allgather sweep, 6 sizes 4 KiB - 4 MiB"
    # a first sweep of two points keeps the two-point fit
    short, rep2 = validate_system({**system, "measured": measured.drop(index=[1, 2, 3, 4]).reset_index(drop=True)},
                                  sweep_bands=2)
    assert short["calibration"].sum() == 2 and rep2["fit"] == "bottleneck"


def test_a_transports_regimes_reach_the_line_and_every_leave_one_out_refit():
    """The caller's regimes (a function of the line's step and rate, as NCCL's protocols are) go to the line's fit
    in calibrate_sweep and in each of its leave-one-out refits: the curve multiplies them, never replaces them."""
    seen = []

    def regimes(step_s, link_Bps):
        seen.append(link_Bps)
        return MessageRegimes(from_bytes=(0, 2048), overhead_s=(0.0, 0.0), efficiency=(0.9, 1.0),
                              start_when=("sender", "both"))

    m = _measured(_truth((0.5, 1.0), (0, 65536)), SIZES[:4])
    kw = {"bands": 2, "direction": "rising", "max_evals": 30, "regimes": regimes}
    fitted, _ = calibrate_sweep(single_switch(4, 2e9), m, **kw)
    assert fitted.defaults.message_regimes.start_when[0] == "sender"  # the transport's rule kept under the curve
    assert fitted.defaults.message_regimes.from_bytes[:2] == (0, 2048)
    alone = len(seen)
    seen.clear()
    _, rep = calibrate_sweep(single_switch(4, 2e9), m, leave_one_out=True, **kw)
    assert rep["leave_one_out"]["points"] == 4
    assert len(seen) - alone > 4 * 10  # the four refits' lines were fitted with the regimes too (0 calls without)


def test_the_fit_stays_within_its_work_and_its_evaluations():
    """Every prediction the curve fit makes counts against max_work (a wrapped simulate counts them); the
    report's evaluations pass their limit by a simplex at most; with too small a budget for both directions the
    fit is refused, not quietly reduced to the line."""
    import hcsim.calibrate_sweep as cs

    m = _measured(_truth((0.5, 1.0), (0, 65536)))
    real, spent = cs.simulate, {"work": 0, "on": False}

    def counting(*a, **k):
        r = real(*a, **k)
        if spent["on"]:
            spent["work"] += r.config.get("work", 0)
        return r

    cs.simulate = counting
    try:
        spent["on"] = True
        _, rep = calibrate_sweep(single_switch(4, 2e9), m, bands=2, max_work=60_000, max_evals=1000)
    finally:
        cs.simulate = real
    assert spent["work"] <= 60_000, spent  # the line's fits run in hcsim.calibrate, under their own bound
    assert rep["evaluations"] <= rep["evaluation_limit"] + 3
    with pytest.raises(HcsimError, match="max_evals = 4"):
        calibrate_sweep(single_switch(4, 2e9), m, bands=2, max_evals=4)  # either: two simplexes of 3 needed


def test_odd_arguments_to_the_helpers_get_one_line():
    t = single_switch(4, 1e9)
    for call, field in (
            (lambda: point_messages(t, None), "measured"),
            (lambda: with_efficiency_curve(t, (0, 65536), (0.5,)), "efficiency"),
            (lambda: with_efficiency_curve(t, None, (0.5,)), "from_bytes"),
            (lambda: with_efficiency_curve(t, (0, 65536, 1024), (0.5, 1.0, 0.7)), "from_bytes"),
            (lambda: with_efficiency_curve(t, (8, 65536), (0.5, 1.0)), "from_bytes"),
            (lambda: with_efficiency_curve(t, (0,), ("a",)), "efficiency"),
            (lambda: with_efficiency_curve(t, (0,), (0.0,)), "efficiency"),
            (lambda: leave_one_out_errors(t, _measured(t), fit="tiers", bands=2), "bands"),
            (lambda: calibrate_sweep(t, _measured(t).iloc[:3], leave_one_out=True), "each refit needs 3")):
        with pytest.raises(HcsimError, match=field) as info:
            call()
        assert "\n" not in str(info.value)
