"""calibrate(fit="bottleneck", fixed_cost="network"): the second parameter is a latency on the links
between servers (hcsim.calibrate.network_links), the per-step overhead as the topology gives it."""

import pandas as pd
import pytest

import hcsim
from hcsim.calibrate import calibrate, class_scaled, network_links, with_network_latency_s
from hcsim.errors import HcsimError
from hcsim.topology import leaf_spine, single_switch


def _two_nodes():
    # 2 servers x 4 ranks: each leaf is a server, its uplink to the spine the network
    return leaf_spine(2, 4, 1, 10e9, oversubscription=2.0, tier="ib", npus_per_server=4)


def test_network_links_are_the_links_only_paths_between_servers_cross():
    base = _two_nodes()
    assert network_links(base) == [("leaf0", "spine0"), ("leaf1", "spine0"), ("spine0", "leaf0"), ("spine0", "leaf1")]
    assert network_links(single_switch(4, 10e9, npus_per_server=4)) == []  # one server: no network
    # one rank a server: every link is crossed only between servers
    assert len(network_links(single_switch(4, 10e9))) == 8
    # rail-optimised: each GPU's own link to its rail switch, not its link to the server's NVSwitch
    rails = leaf_spine(2, 4, 4, 100e9, npus_per_server=4, rails=True, tier="nvlink")
    links = network_links(rails)
    assert links and all(rails.graph.nodes[u].get("kind") == "npu" or rails.graph.nodes[v].get("kind") == "npu"
                         for u, v in links)
    assert all("leaf" not in u and "leaf" not in v for u, v in links)


def test_network_fit_recovers_a_known_latency_and_rate_and_keeps_the_step():
    base = _two_nodes()
    truth = with_network_latency_s(class_scaled(base, ("ib", 10e9), 0.5, 0.0), 3e-6)
    pts = pd.DataFrame({"collective": "allreduce", "algorithm": "ring", "size_bytes": [64, 64 << 20]})
    pts["time_us"] = [hcsim.simulate(truth, "allreduce", n, "ring").time_us for n in pts.size_bytes]
    fitted, rep = calibrate(base, pts, fit="bottleneck", fixed_cost="network")
    assert rep["rms_log_error_after"] < 1e-4
    assert rep["network_latency_us"] == pytest.approx(3.0, rel=0.02)
    assert rep["network_links"] == 4
    assert rep["link_scale"] == {"ib@10GBps": pytest.approx(0.5, rel=0.02)}
    assert rep["step_overhead_us"] == 0.0 and rep["launch_overhead_us"] == 0.0  # as built
    assert fitted.link_spec("leaf0", "spine0").latency_s == pytest.approx(3e-6, rel=0.02)
    assert fitted.link_spec("npu0", "leaf0").latency_s == 0.0  # inside a server: none
    # a collective the fit never saw: recursive doubling, one step of three across the servers
    want = hcsim.simulate(truth, "allreduce", 64, "rd").time_us
    assert hcsim.simulate(fitted, "allreduce", 64, "rd").time_us == pytest.approx(want, rel=0.02)


def test_network_fit_is_checked():
    base = _two_nodes()
    pts = pd.DataFrame({"collective": "allreduce", "algorithm": "ring", "size_bytes": [64, 1 << 20],
                        "time_us": [50.0, 900.0]})
    with pytest.raises(HcsimError, match=r"fixed_cost = 'network': .*only with fit='bottleneck'"):
        calibrate(base, pts, fixed_cost="network")
    with pytest.raises(HcsimError, match=r"fixed_cost = 'network': .*no network links"):
        calibrate(single_switch(4, 10e9, npus_per_server=4), pts, fit="bottleneck", fixed_cost="network")
    with pytest.raises(HcsimError, match=r"fixed_cost = 'latency': step, launch or network"):
        calibrate(base, pts, fit="bottleneck", fixed_cost="latency")


def test_corpus_network_fit_flag_is_checked():
    from hcsim.corpus import load_corpus, validate_system

    system = load_corpus()[0]
    with pytest.raises(HcsimError, match=r"network_fit = 'yes': True or False"):
        validate_system(system, network_fit="yes")
