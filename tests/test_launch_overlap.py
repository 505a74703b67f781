"""A call's launch overlapping the call before it (ExecutionDefaults.launch_overlap): a benchmark's loop of
asynchronous calls, timed together, costs the larger of the launch and the device time per call."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

import hcsim
from hcsim.calibrate import calibrate
from hcsim.corpus import LOOP_TRANSPORTS, load_corpus, validate_system, with_launch_overlap
from hcsim.errors import HcsimError
from hcsim.topology import single_switch
from hcsim.topology.io import load_topology, save_topology
from hcsim.topology.model import ExecutionDefaults


def overlapped(topo, launch_s):
    topo.defaults = dataclasses.replace(topo.defaults, launch_overhead_s=launch_s, launch_overlap=True)
    return topo


def test_the_flag_is_checked_and_kept_in_a_file(tmp_path):
    with pytest.raises(HcsimError, match="launch_overlap"):
        ExecutionDefaults(launch_overlap="yes")
    topo = overlapped(single_switch(8, 100e9), 30e-6)
    save_topology(topo, tmp_path / "t.yaml")
    back = load_topology(tmp_path / "t.yaml")
    assert back.defaults.launch_overlap is True and back.defaults.launch_overhead_s == pytest.approx(30e-6)
    (tmp_path / "bad.yaml").write_text((tmp_path / "t.yaml").read_text().replace("launch_overlap: true",
                                                                                  "launch_overlap: 2"))
    with pytest.raises(HcsimError, match="defaults.launch_overlap"):
        load_topology(tmp_path / "bad.yaml")


@pytest.mark.parametrize("mode", ["des", "analytical"])
def test_a_call_costs_the_larger_of_its_launch_and_its_device_time(mode):
    """8 ranks at 100 GB/s, ring allgather: 1 KiB moves in 7 x 128 B / 100 GB/s = 8.96 ns (the launch, 30 us,
    is the call's time); 1 GiB in 7 x 128 MiB / 100 GB/s = 9.395 ms (the device time is)."""
    plain = single_switch(8, 100e9)
    topo = overlapped(single_switch(8, 100e9), 30e-6)
    for n in (1 << 10, 1 << 30):
        device = hcsim.simulate(plain, "allgather", n, "ring", mode=mode).time_s
        got = hcsim.simulate(topo, "allgather", n, "ring", mode=mode).time_s
        assert got == pytest.approx(max(30e-6, device), rel=1e-12)
    added = dataclasses.replace(topo.defaults, launch_overlap=False)
    topo.defaults = added
    assert hcsim.simulate(topo, "allgather", 1 << 10, "ring", mode=mode).time_s == pytest.approx(30e-6 + 7 * 128 / 100e9)


def test_the_analytical_sweep_prices_it_as_simulate_does():
    topo = overlapped(single_switch(8, 100e9), 30e-6)
    sizes = [1 << 10, 1 << 20, 1 << 30]
    df = hcsim.sweep(topo, "allreduce", sizes=sizes, algorithms=["ring"], mode="analytical")
    assert df["time_us"].tolist() == [hcsim.simulate(topo, "allreduce", n, "ring", mode="analytical").time_us
                                      for n in sizes]


def test_a_launch_bound_and_a_device_bound_point_give_back_the_launch_and_the_rate():
    truth = overlapped(single_switch(8, 100e9 * 0.8, npus_per_server=8), 25e-6)
    pts = pd.DataFrame({"collective": "allreduce", "algorithm": "ring", "ranks": 8,
                        "size_bytes": [8, 1 << 30]})
    pts["time_us"] = [hcsim.simulate(truth, "allreduce", n, "ring").time_us for n in pts.size_bytes]
    start = overlapped(single_switch(8, 100e9, npus_per_server=8), 0.0)
    fitted, report = calibrate(start, pts, algorithm="ring", fit="bottleneck", fixed_cost="launch")
    assert fitted.defaults.launch_overlap is True
    assert fitted.defaults.launch_overhead_s == pytest.approx(25e-6, rel=1e-3)
    for n, t in zip(pts.size_bytes, pts.time_us, strict=True):
        assert hcsim.simulate(fitted, "allreduce", int(n), "ring").time_us == pytest.approx(t, rel=1e-3)


def test_a_launch_above_the_small_points_device_time_is_found():
    """Both points large (a sweep from 8 MiB): the smaller is launch-bound, 200 us against about 184 us of device
    time. A launch started below that device time moves nothing (flat) and the rate took the miss: started at the
    fastest point's time, the fit gives both back."""
    truth = overlapped(single_switch(8, 80e9, npus_per_server=8), 200e-6)
    pts = pd.DataFrame({"collective": "allreduce", "algorithm": "ring", "ranks": 8, "size_bytes": [8 << 20, 1 << 30]})
    pts["time_us"] = [hcsim.simulate(truth, "allreduce", n, "ring").time_us for n in pts.size_bytes]
    assert pts.time_us[0] == pytest.approx(200.0)  # launch-bound
    start = overlapped(single_switch(8, 100e9, npus_per_server=8), 0.0)
    fitted, report = calibrate(start, pts, algorithm="ring", fit="bottleneck", fixed_cost="launch")
    assert report["launch_pinned"] is True
    for n, t in zip(pts.size_bytes, pts.time_us, strict=True):
        assert hcsim.simulate(fitted, "allreduce", int(n), "ring").time_us == pytest.approx(t, rel=1e-3)


def test_a_launch_no_point_binds_goes_back_to_the_topologys_own():
    """Both points device-bound (64 MiB and 1 GiB above a 10 us launch): they say nothing of the launch, and the
    fit gives the topology's own back (1 us where it has none) instead of a value just under the 64 MiB point's
    time that every smaller call would then cost (a review's case: +3949% at 1 MiB)."""
    truth = overlapped(single_switch(8, 80e9, npus_per_server=8), 10e-6)
    pts = pd.DataFrame({"collective": "allreduce", "algorithm": "ring", "ranks": 8, "size_bytes": [64 << 20, 1 << 30]})
    pts["time_us"] = [hcsim.simulate(truth, "allreduce", n, "ring").time_us for n in pts.size_bytes]
    start = overlapped(single_switch(8, 100e9, npus_per_server=8), 0.0)
    fitted, report = calibrate(start, pts, algorithm="ring", fit="bottleneck", fixed_cost="launch")
    assert report["launch_pinned"] is False and report["launch_overhead_us"] == pytest.approx(1.0)
    for n in (1 << 20, 16 << 20, 64 << 20, 1 << 30):  # device-bound in the truth: right without the launch
        assert hcsim.simulate(fitted, "allreduce", n, "ring").time_us == pytest.approx(
            hcsim.simulate(truth, "allreduce", n, "ring").time_us, rel=2e-3)


def test_the_corpus_option_overlaps_the_benchmark_loops_only():
    assert set(LOOP_TRANSPORTS) == {"hccl", "nccl-nvlink", "nccl-net"}
    assert with_launch_overlap(single_switch(4, 1e9)).defaults.launch_overlap
    corpus = load_corpus()
    h100 = next(s for s in corpus if s["system"].startswith("8 x H100"))
    _, rep_on = validate_system(h100, launch_overlap=True)
    _, rep_off = validate_system(h100)
    assert rep_on["launch_overhead_us"] != rep_off["launch_overhead_us"]
    with pytest.raises(HcsimError, match="launch_overlap"):
        validate_system(h100, launch_overlap="yes")


def test_a_per_collective_launch_is_fitted_and_reported_by_the_same_factor():
    truth = overlapped(single_switch(8, 80e9, npus_per_server=8), 25e-6)
    pts = pd.DataFrame({"collective": "allreduce", "algorithm": "ring", "ranks": 8, "size_bytes": [8, 1 << 30]})
    pts["time_us"] = [hcsim.simulate(truth, "allreduce", n, "ring").time_us for n in pts.size_bytes]
    start = overlapped(single_switch(8, 100e9, npus_per_server=8), 0.0)
    start.defaults = dataclasses.replace(start.defaults, launch_overhead_by_collective_s=(("allreduce", 1e-6),))
    fitted, report = calibrate(start, pts, algorithm="ring", fit="bottleneck", fixed_cost="launch")
    assert fitted.defaults.launch_for("allreduce") == pytest.approx(25e-6, rel=1e-3)
    assert report["launch_overhead_us"] == pytest.approx(25.0, rel=1e-3)
