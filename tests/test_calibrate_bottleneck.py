"""calibrate(fit="bottleneck"): two parameters for two points, the rate of one link class."""

import pandas as pd
import pytest

import hcsim
from hcsim.calibrate import calibrate, class_scaled, link_classes
from hcsim.topology import leaf_spine


def test_two_point_fit_recovers_the_host_links_and_keeps_the_uplinks():
    base = leaf_spine(2, 4, 1, 10e9, oversubscription=2.0, tier="ib")
    host, up = ("ib", 10e9), ("ib", 20e9)
    assert link_classes(base) == [host, up]
    truth = class_scaled(base, host, 0.5, 3e-6)
    pts = pd.DataFrame({"collective": "allreduce", "algorithm": "mesh/ring", "size_bytes": [64, 64 << 20]})
    pts["time_us"] = [hcsim.simulate(truth, "allreduce", n, "mesh/ring").time_us for n in pts.size_bytes]
    fitted, rep = calibrate(base, pts, fit="bottleneck")
    assert rep["rms_log_error_after"] < 1e-4
    assert rep["link_scale"] == {"ib@10GBps": pytest.approx(0.5, rel=0.02)}
    assert rep["step_overhead_us"] == pytest.approx(3.0, rel=0.05)
    assert fitted.link_spec("leaf0", "spine0").bandwidth_Bps == 20e9  # the uplink as built
    # a whole-tier fit moves the uplink with the host links
    whole, _ = calibrate(base, pts)
    assert whole.link_spec("leaf0", "spine0").bandwidth_Bps != 20e9


def test_fit_name_is_checked():
    from hcsim.errors import HcsimError

    pts = pd.DataFrame({"collective": ["allreduce"], "size_bytes": [1024], "time_us": [10.0]})
    with pytest.raises(HcsimError, match="fit"):
        calibrate(leaf_spine(2, 2, 1, 1e9), pts, fit="everything")
