"""Calibration recovers known parameters from synthetic measurements, and writes them out."""

import pandas as pd
import pytest

import hcsim
from hcsim.calibrate import calibrate, scaled
from hcsim.cli import main
from hcsim.topology import single_switch


def test_calibration_recovers_bandwidth_and_overheads(tmp_path):
    base = single_switch(8, 10e9, 1e-6)
    truth = scaled(base, {"generic": 0.6}, 3e-6, 20e-6)
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
    assert back.provenance["calibration"]["measured_points"] == 6
    assert back.link_spec("npu0", "sw0").bandwidth_Bps == pytest.approx(6e9, rel=0.01)


def test_calibrate_cli(tmp_path, capsys):
    base = single_switch(4, 10e9, 1e-6)
    truth = scaled(base, {"generic": 0.5}, 2e-6, 10e-6)
    rows = [{"collective": c, "size_bytes": n, "time_us": hcsim.simulate(truth, c, n, "ring").time_us}
            for c in ("allgather", "allreduce") for n in (1 << 12, 1 << 24)]
    csv = tmp_path / "m.csv"
    pd.DataFrame(rows).to_csv(csv, index=False)
    topo = hcsim.save_topology(base, tmp_path / "base.yaml")
    out = tmp_path / "cal.yaml"
    assert main(["calibrate", "--measured", str(csv), "-t", str(topo), "--algo", "ring", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "rms log error" in text and out.is_file()
    assert "calibration" in out.read_text()
