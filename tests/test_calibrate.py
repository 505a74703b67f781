"""Calibration recovers known parameters from synthetic measurements, and writes them out."""

import numpy as np
import pandas as pd
import pytest

import hcsim
from hcsim.calibrate import calibrate, scaled
from hcsim.cli import main
from hcsim.topology import single_switch


def test_calibration_recovers_bandwidth_and_overheads(tmp_path):
    base = single_switch(8, 10e9, 1e-6)
    truth = scaled(base, {"generic": 0.6}, 3e-6, launch_overhead_s=20e-6)
    # small messages with two step counts (14 and 7) separate launch from per-step overhead
    points = [("allreduce", n) for n in (1 << 10, 1 << 16, 1 << 22, 1 << 26)] + [("allgather", 1 << 24),
                                                                                  ("allgather", 1 << 10)]
    measured = pd.DataFrame([{"collective": c, "size_bytes": n,
                              "time_us": hcsim.simulate(truth, c, n, "ring").time_us} for c, n in points])
    fitted, report = calibrate(base, measured, algorithm="ring")
    assert report["rms_log_error_before"] > 0.1
    assert report["rms_log_error_after"] < 1e-3
    assert report["tier_bandwidth_scale"]["generic"] == pytest.approx(0.6, rel=0.01)
    assert report["step_overhead_us"] == pytest.approx(3.0, rel=0.05)
    assert report["launch_overhead_us"] == pytest.approx(20.0, rel=0.05)
    # the calibrated topology saves with its provenance and loads back
    path = hcsim.save_topology(fitted, tmp_path / "cal.yaml")
    back = hcsim.load_topology(path)
    assert back.provenance["calibration_from_measured"]["measured_points"] == 6
    assert back.link_spec("npu0", "sw0").bandwidth_Bps == pytest.approx(6e9, rel=0.01)


def test_calibrate_cli(tmp_path, capsys):
    base = single_switch(4, 10e9, 1e-6)
    truth = scaled(base, {"generic": 0.5}, 2e-6, launch_overhead_s=10e-6)
    rows = [{"collective": c, "size_bytes": n, "time_us": hcsim.simulate(truth, c, n, "ring").time_us}
            for c in ("allgather", "allreduce") for n in (1 << 12, 1 << 24)]
    csv = tmp_path / "m.csv"
    pd.DataFrame(rows).to_csv(csv, index=False)
    topo = hcsim.save_topology(base, tmp_path / "base.yaml")
    out = tmp_path / "cal.yaml"
    assert main(["calibrate", "--measured", str(csv), "-t", str(topo), "--algo", "ring", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "rms log error" in text and out.is_file()
    assert "calibration_from_measured" in out.read_text() and str(csv) in out.read_text()


def test_calibration_keeps_what_it_does_not_fit_and_uses_each_rows_algorithm():
    from pathlib import Path

    from hcsim.backends import load_measured
    from hcsim.validate import validate_measured

    # a testbed topology calibrated on point-to-point probes (message regimes, NPU caps) and
    # its measured rows, one per algorithm that ran
    root = Path(__file__).resolve().parent.parent
    topo = hcsim.load_topology(root / "docs/data/testbed-8x100mbit-run17.yaml")
    rows = load_measured(root / "docs/data/validation_8x100mbit_run17.csv")
    rows = rows[(rows.collective == "allgather") & (rows.size_bytes == 1048576)]
    assert set(rows.algorithm) == {"ring", "hd", "nb"}
    fitted, rep = calibrate(topo, rows, max_evals=40, source="run17")
    # the fit starts where validate --measured stands (its regimes kept, each row's own
    # algorithm), and does not end worse
    direct = validate_measured(rows, topo)
    assert rep["rms_log_error_topology"] == pytest.approx(float((direct.error + 1).map(np.log).pow(2).mean() ** 0.5),
                                                         rel=1e-9)
    assert rep["rms_log_error_after"] <= rep["rms_log_error_topology"] + 1e-6
    assert fitted.defaults.message_regimes == topo.defaults.message_regimes
    assert fitted.npu_spec("npu0") == topo.npu_spec("npu0")
    assert [r["algorithm"] for r in rep["residuals"]] == list(rows.algorithm)
    # the probe calibration stays beside the new one, and the name is not doubled
    assert "calibration" in fitted.provenance and fitted.provenance["calibration_from_measured"]["source"] == "run17"
    assert fitted.name == topo.name


def test_calibration_leaves_tiers_no_point_uses_alone():
    from hcsim.topology import LinkSpec

    base = single_switch(4, 10e9, 1e-6)
    base.add_node("far", "switch")
    base.add_link("sw0", "far", LinkSpec(1e9, 1e-6, "roce"))  # no rank's path crosses it
    truth = scaled(base, {"generic": 0.5}, 1e-6)
    measured = pd.DataFrame([{"collective": "allgather", "algorithm": "ring", "size_bytes": n,
                              "time_us": hcsim.simulate(truth, "allgather", n, "ring").time_us}
                             for n in (1 << 12, 1 << 24)])
    fitted, rep = calibrate(base, measured)
    assert rep["tiers_unused"] == ["roce"] and set(rep["tier_bandwidth_scale"]) == {"generic"}
    assert fitted.link_spec("sw0", "far").bandwidth_Bps == 1e9
    assert rep["tier_bandwidth_scale"]["generic"] == pytest.approx(0.5, rel=0.02)


def test_a_fit_it_cannot_afford_is_refused_after_one_prediction_and_a_cheap_one_is_bounded():
    import hcsim
    from hcsim.calibrate import calibrate
    from hcsim.topology import full_mesh

    truth = full_mesh(4, 2e9, 1e-6)
    pts = pd.DataFrame({"collective": "allgather", "size_bytes": [4096, 65536, 1 << 20]})
    pts["time_us"] = [hcsim.simulate(truth, "allgather", n, "ring").time_us for n in pts.size_bytes]
    _, rep = calibrate(full_mesh(4, 1e9, 1e-6), pts)
    assert rep["evaluation_limit_by"] in ("max_evals", "max_simulations", "max_work")
    assert rep["work_per_evaluation"] > 0
    # the same fit with a bound that one simplex would pass: refused, naming the bound and the way on
    with pytest.raises(hcsim.WorkLimitError, match=r"max_work = 100: one prediction of the 3 measured points"):
        calibrate(full_mesh(4, 1e9, 1e-6), pts, max_work=100)
    # a bound that leaves a few evaluations: the optimiser gets exactly what is left
    per = rep["work_per_evaluation"]
    _, small = calibrate(full_mesh(4, 1e9, 1e-6), pts, max_work=per * 20)
    assert small["evaluation_limit_by"] == "max_work" and small["evaluations"] <= small["evaluation_limit"] + 3
