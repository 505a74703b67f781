"""CPU ranks' reductions charged at a multiple of their own link's rate (calibrate's
``rank_reduce_ratio``, hcsim.calibrate.with_rank_reduce)."""

import pandas as pd
import pytest

import hcsim
from hcsim.calibrate import RANK_REDUCE_RATIO, calibrate, class_scaled, with_rank_reduce
from hcsim.errors import HcsimError
from hcsim.topology import leaf_spine, single_switch


def test_a_ring_allreduce_pays_each_reduce_scatter_block_once_more_at_the_reduction_rate():
    """Hand-worked: 4 ranks, link rate c, reduction 4c. The ring's 3 reduce-scatter steps move
    and reduce n/4 each (n/4c + n/16c), its 3 allgather steps move n/4 each: 1.5 n/c + 0.1875 n/c."""
    c, n = 1e9, 8 << 20
    plain = hcsim.simulate(single_switch(4, c), "allreduce", n, "ring").time_us
    reducing = hcsim.simulate(with_rank_reduce(single_switch(4, c), 4.0), "allreduce", n, "ring").time_us
    assert plain == pytest.approx(1.5 * n / c * 1e6, rel=1e-9)
    assert reducing == pytest.approx((1.5 + 0.1875) * n / c * 1e6, rel=1e-9)
    # an allgather reduces nothing: unchanged
    t = with_rank_reduce(single_switch(4, c), 4.0)
    assert hcsim.simulate(t, "allgather", n, "ring").time_us == pytest.approx(0.75 * n / c * 1e6, rel=1e-9)


def test_the_reduction_rate_follows_each_rank_s_own_link():
    base = leaf_spine(2, 4, 1, 10e9, oversubscription=2.0, tier="ib")
    t = with_rank_reduce(class_scaled(base, ("ib", 10e9), 0.3, 1e-6), 4.0)
    assert [t.npu_spec(n).reduce_Bps for n in t.npus] == pytest.approx([4 * 3e9] * 8)


def _truth_and_points(ratio):
    base = leaf_spine(2, 4, 1, 10e9, oversubscription=2.0, tier="ib")
    truth = with_rank_reduce(class_scaled(base, ("ib", 10e9), 0.3, 2e-6), ratio)
    pts = pd.DataFrame({"collective": "allreduce", "algorithm": "ring", "size_bytes": [64, 16 << 20]})
    pts["time_us"] = [hcsim.simulate(truth, "allreduce", n, "ring").time_us for n in pts.size_bytes]
    return base, truth, pts


def test_the_fit_recovers_the_transfer_rate_apart_from_the_reductions():
    """Points made with the ranks reducing at 4 x their rate: the fit with the ratio finds the
    links' own factor (0.3) and predicts an allgather, which reduces nothing, as the truth does;
    without it the one rate pays the reductions too and the allgather comes out slow."""
    base, truth, pts = _truth_and_points(RANK_REDUCE_RATIO)
    fitted, rep = calibrate(base, pts, fit="bottleneck", prefer_rank_links=True, rank_reduce_ratio=RANK_REDUCE_RATIO)
    assert rep["rank_reduce_ratio"] == RANK_REDUCE_RATIO
    assert rep["link_scale"] == {"ib@10GBps": pytest.approx(0.3, rel=0.02)}
    assert rep["step_overhead_us"] == pytest.approx(2.0, rel=0.05)
    n = 16 << 20
    want = hcsim.simulate(truth, "allgather", n, "ring").time_us
    assert hcsim.simulate(fitted, "allgather", n, "ring").time_us == pytest.approx(want, rel=0.02)
    plain, _ = calibrate(base, pts, fit="bottleneck", prefer_rank_links=True)
    assert hcsim.simulate(plain, "allgather", n, "ring").time_us > 1.05 * want


@pytest.mark.parametrize("bad", [0, -1.0, True, "4", float("nan"), 1e6])
def test_rank_reduce_ratio_is_checked(bad):
    _, _, pts = _truth_and_points(4.0)
    with pytest.raises(HcsimError, match="rank_reduce_ratio"):
        calibrate(leaf_spine(2, 4, 1, 10e9, oversubscription=2.0), pts, fit="bottleneck", rank_reduce_ratio=bad)


def test_rank_reduce_ratio_needs_the_bottleneck_fit():
    _, _, pts = _truth_and_points(4.0)
    with pytest.raises(HcsimError, match="rank_reduce_ratio"):
        calibrate(leaf_spine(2, 4, 1, 10e9, oversubscription=2.0), pts, rank_reduce_ratio=4.0)


def test_new_calibration_helpers_refuse_bad_values_in_one_line():
    """Found by review: these took negative, NaN or non-numeric values silently or raised raw errors."""
    import math

    from hcsim.calibrate import ucx_rendezvous_regimes, with_rank_reduce
    from hcsim.corpus import nccl_ll_efficiency
    from hcsim.errors import HcsimError
    from hcsim.topology import single_switch

    bad = [lambda: ucx_rendezvous_regimes(local_Bps=-5.0), lambda: ucx_rendezvous_regimes(local_Bps=math.nan),
           lambda: ucx_rendezvous_regimes(threshold="256k"), lambda: with_rank_reduce(single_switch(2, 1e9), "4"),
           lambda: nccl_ll_efficiency(39.0, "allreduce", 1, 1 << 30, 1000.0),
           lambda: nccl_ll_efficiency(39.0, "allreduce", 16, 1 << 30, 0.0),
           lambda: nccl_ll_efficiency(math.nan, "allreduce", 16, 1 << 30, 1000.0),
           lambda: nccl_ll_efficiency(-1.0, "allreduce", 16, 1 << 30, 1000.0)]
    for call in bad:
        with pytest.raises(HcsimError):
            call()


def test_a_fit_with_eager_regimes_tolerates_candidates_out_of_the_regimes_range():
    """A candidate step overhead above a second (points on a seconds scale) is a poor fit, not a
    ConfigError from the regimes (found by review)."""
    from hcsim.calibrate import _send_costs, eager_send_regimes

    reg = eager_send_regimes()(15.47, 0.5)
    assert reg.send_overhead_s == (1.0,) and reg.send_copy_Bps == (1.0,)
    assert _send_costs(1e-6, 2e9) == (1e-6, 2e9)
