"""The corpus's network rate (docs/validation.md change 33): each MPI system's published two-node
point-to-point bandwidth (corpus.yaml ``p2p_bw_MBps``, osu_bw) and hcsim.corpus.with_network_rate,
which slows the links between servers to it."""

from __future__ import annotations

import pandas as pd
import pytest

from hcsim.api import simulate
from hcsim.corpus import load_corpus, validate_system, with_network_rate
from hcsim.errors import HcsimError
from hcsim.topology import leaf_spine, single_switch


def test_the_links_between_servers_are_slowed_by_one_factor_and_the_ranks_links_keep_theirs():
    # 2 leaves x 4 NPUs, one server a leaf, 2 spines: uplinks 4 x 10 / 4 / 2 = 5 GB/s each
    base = leaf_spine(2, 4, 2, 10e9, oversubscription=4.0, npus_per_server=4)
    up = base.link_spec("leaf0", "spine0").bandwidth_Bps
    t = with_network_rate(base, 0.8 * up)
    for u, v in t.graph.edges:
        was, now = base.link_spec(u, v).bandwidth_Bps, t.link_spec(u, v).bandwidth_Bps
        assert now == (was if "npu" in u + v else pytest.approx(0.8 * was, rel=1e-15)), (u, v)
    assert t.link_spec("leaf0", "spine0").bandwidth_Bps == 0.8 * up  # the bottleneck gets the rate exactly
    assert base.link_spec("leaf0", "spine0").bandwidth_Bps == up  # a copy: the topology given is unchanged


def test_a_rate_at_or_above_the_spec_one_server_and_bad_figures_leave_or_refuse():
    base = leaf_spine(2, 4, 1, 10e9, oversubscription=4.0, npus_per_server=4)
    up = base.link_spec("leaf0", "spine0").bandwidth_Bps
    for rate in (up, 3 * up):  # a published rate never speeds a link past its spec
        t = with_network_rate(base, rate)
        assert [t.link_spec(u, v) for u, v in t.graph.edges] == [base.link_spec(u, v) for u, v in base.graph.edges]
    one = with_network_rate(single_switch(4, 1e9, npus_per_server=4), 1e6)
    assert all(one.link_spec(u, v).bandwidth_Bps == 1e9 for u, v in one.graph.edges)
    for bad in (0, -1e9, float("nan"), "5GB/s", None):
        with pytest.raises(HcsimError, match="rate_Bps"):
            with_network_rate(base, bad)


def test_servers_whose_paths_cross_no_deeper_link_are_refused():
    # one server per NPU: two servers on one leaf cross no link deeper than the ranks' own
    with pytest.raises(HcsimError, match="crosses no link"):
        with_network_rate(leaf_spine(2, 4, 1, 10e9, oversubscription=4.0), 1e9)


def test_a_large_message_between_servers_runs_at_the_rate():
    """A 1 GiB send from a rank of one server to one of the other: the ranks' links run at 10 GB/s, the
    uplinks at 5 GB/s as built; at a published 4 GB/s the send takes 2**30 / 4e9 s (no latency anywhere)."""
    base = leaf_spine(2, 4, 1, 10e9, oversubscription=8.0, npus_per_server=4)
    assert base.link_spec("leaf0", "spine0").bandwidth_Bps == 5e9
    t = with_network_rate(base, 4e9)
    got = simulate(t, "sendrecv", 1 << 30, "ring", ranks=["npu0", "npu4"], verify=False).time_us
    step = t.defaults.step_overhead_s * 1e6
    assert got - step == pytest.approx((1 << 30) / 4e9 * 1e6, rel=1e-9)


def test_the_mpi_systems_of_the_excalibur_runs_carry_their_published_osu_bw():
    got = {s["system"]: s.get("p2p_bw_MBps") for s in load_corpus()}
    have = {k: v for k, v in got.items() if v is not None}
    assert len(have) == 6 and all(k.startswith(("AlaSKA", "CSD3")) for k in have)
    # read by hand from the osu_bw outputs at excalibur-tests @424c5b67 / @568800d4 (the sweep's highest, MB/s)
    assert sorted(have.values()) == [3029.14, 3063.09, 5785.05, 10865.80, 12171.87, 12319.60]
    csd3_roce = next(v for k, v in have.items() if k.startswith("CSD3") and "RoCE" in k)
    assert csd3_roce == 5785.05  # 92.6% of the 50 Gb/s port's 6,250 MB/s


def test_network_rate_is_a_flag():
    with pytest.raises(HcsimError, match="network_rate"):
        validate_system(load_corpus()[0], network_rate="yes")


def test_validate_system_predicts_with_the_published_rate_only_when_asked():
    """A 2-node, 8-rank Intel MPI system calibrated on two recursive-doubling allreduces; the fit picks the ranks'
    own links (5 GB/s as built; the uplinks 10 GB/s, or 6 GB/s as published). A 64 MiB pairwise alltoall, whose
    middle steps are bound by the uplinks, is predicted slower with the published rate, although the fit then
    gives the ranks' links more (the 1 MiB allreduce's step across the nodes also crosses the slower uplinks);
    without a figure the flag changes nothing."""
    measured = pd.DataFrame({"collective": ["allreduce", "allreduce", "alltoall"], "algorithm": ["rd", "rd", "pairwise"],
                             "ranks": 8, "size_bytes": [8, 1 << 20, 1 << 26], "time_us": [20.0, 1500.0, 40000.0]})
    topo = leaf_spine(2, 4, 1, 5e9, oversubscription=2.0, npus_per_server=4)  # uplinks 10 GB/s
    system = {"system": "toy", "topology": topo, "transport": "intel-mpi", "measured": measured,
              "p2p_bw_MBps": 6000.0}
    spec, rep_spec = validate_system(system, network_rate=False)
    pub, rep_pub = validate_system(system)
    again, _ = validate_system({k: v for k, v in system.items() if k != "p2p_bw_MBps"})
    assert spec["predicted_us"].tolist() == again["predicted_us"].tolist()  # no figure: as with the flag off
    assert rep_pub["network_rate_GBps"] == 6.0 and "network_rate_GBps" not in rep_spec
    assert list(rep_spec["link_scale"]) == list(rep_pub["link_scale"]) == ["roce@5GBps"]
    assert rep_pub["link_scale"]["roce@5GBps"] > 1.2 * rep_spec["link_scale"]["roce@5GBps"]
    assert pub.loc[2, "predicted_us"] > 1.05 * spec.loc[2, "predicted_us"]
    for rows in (spec, pub):  # both fits meet their two points
        assert rows.loc[[0, 1], "predicted_us"].tolist() == pytest.approx([20.0, 1500.0], rel=1e-3)
