"""A message regime's ``local_efficiency``: messages whose two ranks share a server charged apart
(UCX's rendezvous inside a node, hcsim.calibrate.ucx_rendezvous_regimes)."""

import dataclasses

import numpy as np
import pytest

from hcsim import simulate
from hcsim.calibrate import UCX_RNDV_SEND_NBR_THRESH, ucx_rendezvous_regimes
from hcsim.engine.regimes import MessageRegimes
from hcsim.errors import ConfigError
from hcsim.topology import leaf_spine
from hcsim.topology.io import load_topology, save_topology

SLOW_LOCAL = MessageRegimes((0, 1 << 20), (0.0, 0.0), (1.0, 1.0), local_efficiency=(1.0, 0.5))


def with_regimes(topo, regimes):
    topo.defaults = dataclasses.replace(topo.defaults, message_regimes=regimes)
    return topo


def two_servers(npus_per_server):
    """2 leaves x 2 NPUs, 10 GB/s host links, 20 GB/s uplinks (never the bottleneck)."""
    return leaf_spine(2, 2, 1, 10e9, oversubscription=1.0, npus_per_server=npus_per_server)


def test_costs_by_hand():
    extra, charged = SLOW_LOCAL.costs(np.array([1000.0, 2 << 20, 2 << 20]), local=np.array([True, True, False]))
    assert extra.tolist() == [0.0, 0.0, 0.0]
    assert charged.tolist() == [1000.0, 4 << 20, 2 << 20]  # only the big local one is charged twice
    # without the flags (an engine that does not pass them) nothing is local
    assert SLOW_LOCAL.costs(np.array([2 << 20]))[1].tolist() == [2 << 20]
    assert SLOW_LOCAL.local_aware and not SLOW_LOCAL.trivial
    assert not MessageRegimes((0,), (0.0,), (1.0,), local_efficiency=(1.0,)).local_aware


def test_a_ring_across_two_servers_by_hand():
    """Ring allgather of n on ranks 0, 1 (server 0) and 2, 3 (server 1): 3 steps of n/4 a rank;
    0->1 and 2->3 stay inside a server, 1->2 and 3->0 cross. At 10 GB/s a step takes
    n/4 / 10 GB/s; with the local messages at half efficiency, n/4 / 5 GB/s."""
    n = 16 << 20
    plain = simulate(two_servers(2), "allgather", n, "ring").time_us
    assert plain == pytest.approx(3 * n / 4 / 10e9 * 1e6, rel=1e-9)
    slow = simulate(with_regimes(two_servers(2), SLOW_LOCAL), "allgather", n, "ring").time_us
    assert slow == pytest.approx(3 * n / 4 / 5e9 * 1e6, rel=1e-9)
    # one NPU per server: no message is local, nothing changes
    apart = simulate(with_regimes(two_servers(1), SLOW_LOCAL), "allgather", n, "ring").time_us
    assert apart == pytest.approx(plain, rel=1e-9)
    # messages below the regime (n/4 < 1 MiB) are not charged either
    small = 2 << 20
    assert simulate(with_regimes(two_servers(2), SLOW_LOCAL), "allgather", small, "ring").time_us == pytest.approx(
        3 * small / 4 / 10e9 * 1e6, rel=1e-9)


def test_yaml_round_trip_and_errors(tmp_path):
    back = load_topology(save_topology(with_regimes(two_servers(2), SLOW_LOCAL), tmp_path / "t.yaml"))
    assert back.defaults.message_regimes.local_efficiency == (1.0, 0.5)
    text = (tmp_path / "t.yaml").read_text()
    (tmp_path / "bad.yaml").write_text(text.replace("local_efficiency: 0.5", "local_efficiency: 0"))
    with pytest.raises(ConfigError, match=r"message_regimes\[1\].local_efficiency"):
        load_topology(tmp_path / "bad.yaml")
    with pytest.raises(ConfigError, match="local_efficiency"):
        MessageRegimes((0, 10), (0.0, 0.0), (1.0, 1.0), local_efficiency=(1.0,))


def test_ucx_rendezvous_regimes_put_the_local_rate_on_the_fitted_rank_rate():
    reg = ucx_rendezvous_regimes(local_Bps=2e9)(1e-6, 8e9)
    assert reg.from_bytes == (0, UCX_RNDV_SEND_NBR_THRESH) == (0, 262144)
    assert reg.efficiency == (1.0, 1.0) and reg.overhead_s == (0.0, 0.0)
    assert reg.local_efficiency == (1.0, 0.25)
    # a 1 MiB message inside a node on an 8 GB/s rank link then drains at 2 GB/s
    n = 4 << 20  # ring allgather on 4 ranks: 1 MiB blocks
    topo = with_regimes(leaf_spine(2, 2, 1, 8e9, oversubscription=1.0, npus_per_server=2), reg)
    assert simulate(topo, "allgather", n, "ring").time_us == pytest.approx(3 * (1 << 20) / 2e9 * 1e6, rel=1e-9)


def test_eager_sends_one_after_another_by_hand():
    """Linear (mesh) alltoall on a 4-rank full mesh at 1 GB/s a pair, 1000 B a peer: each rank's
    3 messages leave in the order rank + 1, + 2, + 3, the k-th k x (1 us + 1000 B / 1 GB/s) late,
    and each drains on its own link in 1 us: the last ends at 2 x 2 + 1 = 5 us (1 us without)."""
    from hcsim.topology import full_mesh

    serial = MessageRegimes((0,), (0.0,), (1.0,), send_overhead_s=(1e-6,), send_copy_Bps=(1e9,))
    assert simulate(full_mesh(4, 1e9), "alltoall", 4000, "mesh").time_us == pytest.approx(1.0)
    assert simulate(with_regimes(full_mesh(4, 1e9), serial), "alltoall", 4000, "mesh").time_us == pytest.approx(5.0)
    # one peer a step (pairwise): nothing waits, 3 steps of 1 us
    assert simulate(with_regimes(full_mesh(4, 1e9), serial), "alltoall", 4000, "pairwise").time_us == pytest.approx(3.0)
    # the overhead alone: 2 x 1 + 1 = 3 us
    only_o = MessageRegimes((0,), (0.0,), (1.0,), send_overhead_s=(1e-6,))
    assert simulate(with_regimes(full_mesh(4, 1e9), only_o), "alltoall", 4000, "mesh").time_us == pytest.approx(3.0)
    # a regime without send costs above 500 B: 1000 B blocks do not wait
    big_free = MessageRegimes((0, 500), (0.0, 0.0), (1.0, 1.0), send_overhead_s=(1e-6, 0.0))
    assert simulate(with_regimes(full_mesh(4, 1e9), big_free), "alltoall", 4000, "mesh").time_us == pytest.approx(1.0)


def test_send_costs_round_trip_and_errors(tmp_path):
    reg = MessageRegimes((0, 1000), (0.0, 0.0), (1.0, 1.0), send_overhead_s=(2e-6, 0.0), send_copy_Bps=(3e9, np.inf))
    back = load_topology(save_topology(with_regimes(two_servers(2), reg), tmp_path / "t.yaml"))
    got = back.defaults.message_regimes
    assert got.send_overhead_s == pytest.approx((2e-6, 0.0)) and got.send_copy_Bps == pytest.approx((3e9, np.inf))
    for bad in ({"send_overhead_s": (1e-6,)}, {"send_overhead_s": (-1.0, 0.0)}, {"send_copy_Bps": (0.0, 1e9)},
                {"send_copy_Bps": "fast"}):
        with pytest.raises(ConfigError, match="send_"):
            MessageRegimes((0, 1000), (0.0, 0.0), (1.0, 1.0), **bad)


def test_the_corpus_gives_each_mpi_library_its_regimes():
    from hcsim.corpus import transport_regimes

    ompi = transport_regimes("openmpi")(1e-6, 1.34e9)
    assert ompi.from_bytes == (0, 262144) and ompi.local_efficiency == pytest.approx((1.0, 0.67 / 1.34))
    assert ompi.send_overhead_s == (1e-6, 0.0) and ompi.send_copy_Bps == (1.34e9, np.inf)
    impi = transport_regimes("intel-mpi")(2e-6, 3e8)
    assert impi.from_bytes == (0,) and impi.local_efficiency is None
    assert impi.send_overhead_s == (2e-6,) and impi.send_copy_Bps == (3e8,)
    assert transport_regimes("nccl-net")(1e-5, 25e9).efficiency == (0.25, 1.0)
    assert transport_regimes(None) is None and transport_regimes("hccl") is None


def test_local_means_the_same_server_of_the_same_pod(tmp_path):
    """Pods number their servers from 0: server 0 of pod 1 is not server 0 of pod 0, so a
    message between them is not charged the inside-a-server rate (found by review)."""
    path = tmp_path / "two_pods.yaml"
    path.write_text("""name: two-pods
defaults:
  message_regimes:
    - {from_bytes: 0, overhead_us: 0.0, efficiency: 1.0, local_efficiency: 0.25}
npus:
  - {name: a0, pod: 0, server: 0, local_index: 0}
  - {name: a1, pod: 0, server: 0, local_index: 1}
  - {name: b0, pod: 1, server: 0, local_index: 0}
nodes:
  - {name: sw}
links:
  - {src: a0, dst: sw, bandwidth_GBps: 10.0}
  - {src: a1, dst: sw, bandwidth_GBps: 10.0}
  - {src: b0, dst: sw, bandwidth_GBps: 10.0}
""")
    t = load_topology(path)
    same = simulate(t, "sendrecv", "10M", ranks=["a0", "a1"]).time_s
    other_pod = simulate(t, "sendrecv", "10M", ranks=["a0", "b0"]).time_s
    assert same == pytest.approx(4 * other_pod, rel=1e-3)
