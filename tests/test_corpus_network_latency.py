"""The corpus's network latency (docs/validation.md change 30): each MPI system's published two-node
ping-pong latency (corpus.yaml ``pingpong_us``) and hcsim.corpus.with_network_latency, which puts a
latency on the links between servers only."""

from __future__ import annotations

import networkx as nx
import pytest

from hcsim.corpus import load_corpus, validate_system, with_network_latency
from hcsim.errors import HcsimError
from hcsim.topology import leaf_spine, single_switch


def _path_latency_s(topo, a: str, b: str) -> float:
    path = nx.shortest_path(topo.graph, a, b)
    return sum(topo.link_spec(u, v).latency_s for u, v in zip(path[:-1], path[1:], strict=True))


def test_the_latency_is_on_the_links_between_servers_and_sums_to_the_figure():
    base = leaf_spine(2, 4, 2, 10e9, oversubscription=4.0, npus_per_server=4)
    t = with_network_latency(base, 3e-6)
    assert _path_latency_s(t, "npu0", "npu5") == pytest.approx(3e-6, abs=1e-15)  # across the servers
    assert _path_latency_s(t, "npu0", "npu3") == 0.0  # inside one: the ranks' own links keep theirs
    assert all(t.link_spec(u, v).latency_s == 1.5e-6 for u, v in t.graph.edges if "npu" not in u + v)
    assert base.link_spec("leaf0", "spine0").latency_s == 0.0  # a copy: the topology given is unchanged
    assert [t.link_spec(u, v).bandwidth_Bps for u, v in t.graph.edges] == \
        [base.link_spec(u, v).bandwidth_Bps for u, v in base.graph.edges]


def test_one_server_is_returned_as_it_is_and_bad_figures_are_refused():
    t = with_network_latency(single_switch(4, 1e9, npus_per_server=4), 2e-6)
    assert all(t.link_spec(u, v).latency_s == 0.0 for u, v in t.graph.edges)
    base = leaf_spine(2, 4, 1, 10e9, oversubscription=4.0, npus_per_server=4)
    assert with_network_latency(base, 0.0).link_spec("leaf0", "spine0").latency_s == 0.0
    for bad in (-1e-6, 2.0, "1us", None):
        with pytest.raises(HcsimError, match="one_way_s"):
            with_network_latency(base, bad)


def test_servers_on_one_leaf_and_across_leaves_are_refused():
    # one server per NPU: two servers on one leaf cross no deeper link, two on different leaves two
    with pytest.raises(HcsimError, match="cross"):
        with_network_latency(leaf_spine(2, 4, 1, 10e9, oversubscription=4.0), 1e-6)


def test_the_mpi_systems_carry_their_published_pingpong_and_the_others_none():
    got = {s["system"]: s.get("pingpong_us") for s in load_corpus()}
    mpi = {k: v for k, v in got.items() if v is not None}
    assert len(mpi) == 9 and all(("MPI" in k) for k in mpi)
    assert [v for k, v in got.items() if "MPI" not in k] == [None] * 13
    assert mpi["AWS c5n.18xlarge: 8 nodes x 36 ranks, 100 Gb/s EFA, Intel MPI 2019.4, forced allreduce algorithms"] \
        == 16.149
    assert min(mpi.values()) == 0.98 and max(mpi.values()) == 34.953


def test_network_latency_is_a_flag():
    system = load_corpus()[0]
    with pytest.raises(HcsimError, match="network_latency"):
        validate_system(system, network_latency="yes")


def test_validate_system_fits_and_predicts_with_the_latency_only_when_asked():
    """A 2-node, 8-rank MPI system calibrated on two recursive-doubling allreduces (3 steps, one across the nodes):
    with network_latency the fit gives part of the fixed cost to the ping-pong on the links between the nodes, so
    a ring (14 steps, two of its eight hops across, eager messages) is predicted faster; without a figure the flag
    changes nothing."""
    import pandas as pd

    measured = pd.DataFrame({"collective": "allreduce", "algorithm": ["rd", "rd", "ring"], "ranks": 8,
                             "size_bytes": [8, 1 << 20, 4096], "time_us": [20.0, 900.0, 40.0]})
    system = {"system": "toy", "topology": leaf_spine(2, 4, 1, 5e9, oversubscription=1.0, npus_per_server=4),
              "transport": "intel-mpi", "measured": measured, "pingpong_us": 5.0}
    off, rep_off = validate_system(system)
    on, rep_on = validate_system(system, network_latency=True)
    again, _ = validate_system({k: v for k, v in system.items() if k != "pingpong_us"}, network_latency=True)
    assert off["predicted_us"].tolist() == again["predicted_us"].tolist()  # no figure: as without the flag
    # the ring pays 14 steps of an overhead 5/3 us smaller and the latency only where its eager messages wait for it
    assert on.loc[2, "predicted_us"] < 0.98 * off.loc[2, "predicted_us"]
    assert rep_on["step_overhead_us"] < rep_off["step_overhead_us"]  # the latency takes part of the fixed cost
