"""Message-size regimes (eager / rendezvous): hand-worked timelines, errors, YAML round trip,
and the probe fit recovering a model it was generated from."""

import dataclasses

import numpy as np
import pytest

from hcsim import simulate
from hcsim.backends.mpi import OPTIONAL_PROBES, PROBE_SIZES, PROBES, calibrated_topology, fit_probes
from hcsim.engine.regimes import (
    MessageRegimes,
    many_to_many,
    message_bytes,
    new_peers,
    receiver_sending,
)
from hcsim.errors import ConfigError
from hcsim.testbed.netns import TestbedSpec as Spec
from hcsim.topology import full_mesh, leaf_spine, single_switch
from hcsim.topology.io import load_topology, save_topology

RNDV = MessageRegimes(from_bytes=(0, 1000), overhead_s=(0.0, 5e-6), efficiency=(1.0, 0.5))


def same_regimes(a, b):
    return (a.from_bytes == b.from_bytes and a.efficiency == b.efficiency and a.pair_limit == b.pair_limit
            and a.overhead_s == pytest.approx(b.overhead_s, rel=1e-12))


def with_regimes(topo, regimes):
    topo.defaults = dataclasses.replace(topo.defaults, message_regimes=regimes)
    return topo


def test_one_transfer_per_regime_by_hand():
    # 2 ranks, ring allgather: one step, each rank sends its n/2 block at 1 GB/s
    topo = with_regimes(full_mesh(2, 1e9), RNDV)
    # 500 B blocks are eager: 0.5 us
    assert simulate(topo, "allgather", 1000, "ring").time_us == pytest.approx(0.5, rel=1e-9)
    # 2000 B blocks are rendezvous: 5 us handshake + 2000 B charged as 4000 B = 9 us
    assert simulate(topo, "allgather", 4000, "ring").time_us == pytest.approx(9.0, rel=1e-9)
    # the boundary belongs to the upper regime: 1000 B -> 5 + 2 = 7 us
    assert simulate(topo, "allgather", 2000, "ring").time_us == pytest.approx(7.0, rel=1e-9)


def test_efficiency_is_charged_on_shared_resources_not_just_capped():
    # 3 ranks on one switch, mesh allgather: every host link carries 2 flows out and 2 in.
    # Without regimes each 1000 B block takes 2000 B / 1 GB/s = 2 us; at efficiency 0.5 the
    # flows take twice the share of the shared links: 4 us (a per-flow cap at 0.5 GB/s
    # would leave it at 2 us, since each flow's fair share is already 0.5 GB/s).
    plain = single_switch(3, 1e9)
    half = with_regimes(single_switch(3, 1e9), MessageRegimes((0,), (0.0,), (0.5,)))
    assert simulate(plain, "allgather", 3000, "mesh").time_us == pytest.approx(2.0, rel=1e-9)
    assert simulate(half, "allgather", 3000, "mesh").time_us == pytest.approx(4.0, rel=1e-9)


def test_trivial_regimes_change_nothing():
    topo = single_switch(8, 1e9, 1e-6)
    base = simulate(topo, "allreduce", 1 << 20, "ring").time_us
    same = with_regimes(single_switch(8, 1e9, 1e-6), MessageRegimes((0, 4096), (0.0, 0.0), (1.0, 1.0)))
    assert simulate(same, "allreduce", 1 << 20, "ring").time_us == base


def test_analytical_mode_refuses_rather_than_ignoring_them():
    topo = with_regimes(full_mesh(4, 1e9), RNDV)
    with pytest.raises(ConfigError, match="message_regimes"):
        simulate(topo, "allgather", 4000, "ring", mode="analytical")


@pytest.mark.parametrize("kw, field", [
    ({"from_bytes": (5,), "overhead_s": (0.0,), "efficiency": (1.0,)}, "from_bytes"),
    ({"from_bytes": (0, 0), "overhead_s": (0.0, 0.0), "efficiency": (1.0, 1.0)}, r"message_regimes\[1\].from_bytes"),
    ({"from_bytes": (0,), "overhead_s": (-1.0,), "efficiency": (1.0,)}, "overhead_s"),
    ({"from_bytes": (0,), "overhead_s": (0.0,), "efficiency": (0.0,)}, "efficiency"),
    ({"from_bytes": (0, 10), "overhead_s": (0.0,), "efficiency": (1.0, 1.0)}, "message_regimes"),
])
def test_bad_regimes_are_one_line_errors(kw, field):
    with pytest.raises(ConfigError, match=field) as e:
        MessageRegimes(**kw)
    assert "\n" not in str(e.value)


def test_yaml_round_trip_and_bad_yaml(tmp_path):
    topo = with_regimes(full_mesh(2, 1e9), RNDV)
    back = load_topology(save_topology(topo, tmp_path / "t.yaml"))
    assert same_regimes(back.defaults.message_regimes, RNDV)
    assert simulate(back, "allgather", 4000, "ring").time_us == pytest.approx(9.0, rel=1e-9)
    text = (tmp_path / "t.yaml").read_text().replace("from_bytes: 1000", "from_bytes: -3")
    (tmp_path / "bad.yaml").write_text(text)
    with pytest.raises(ConfigError, match=r"message_regimes\[1\].from_bytes = -3"):
        load_topology(tmp_path / "bad.yaml")


def synthetic_probes(p, rate, exch, engine, fan, alpha, rndv_s, eager_eff):
    """Probe times the calibrated model itself implies (per regime: c + s n)."""
    steps = p - 1

    def t(n, per_msg_bytes_over_rate, fixed):
        eff = eager_eff if n < 65536 else 1.0
        extra = 0.0 if n < 65536 else rndv_s
        return fixed + steps_of * (alpha + extra) + per_msg_bytes_over_rate * n / eff

    out = {}
    for probe in (p for p in PROBES if p not in OPTIONAL_PROBES):
        steps_of = 1 if probe in ("p2p_oneway", "p2p_fanout") else steps
        slope = {"p2p_oneway": 1 / rate, "p2p_exchange": 2 * steps / exch, "p2p_shift": 2 * steps / engine,
                 "p2p_fanout": steps / fan}[probe]
        out[probe] = [[n, t(n, slope, 0.0)] for n in PROBE_SIZES]
    return out


def test_probe_fit_recovers_the_model_it_was_generated_from():
    probes = synthetic_probes(8, rate=11.8e6, exch=11.9e6, engine=21e6, fan=11.9e6, alpha=40e-6, rndv_s=2e-3,
                              eager_eff=0.9)
    fit = fit_probes(probes, 8)
    assert fit["rate_Bps"] == pytest.approx(11.8e6, rel=1e-6)
    assert fit["exchange_Bps"] == pytest.approx(11.9e6, rel=1e-6)
    assert fit["engine_Bps"] == pytest.approx(21e6, rel=1e-6)
    assert fit["fanout_Bps"] == pytest.approx(11.9e6, rel=1e-6)
    assert fit["alpha_s"] == pytest.approx(40e-6, rel=1e-6)
    assert fit["regimes"]["overhead_s"][1] == pytest.approx(2e-3, rel=1e-6)
    assert fit["regimes"]["efficiency"][0] == pytest.approx(0.9, rel=1e-6)
    # the topology built from it reproduces the shift probe's rendezvous step by simulation:
    # a ring allgather of 8 x 256 KiB is 7 shift steps of 256 KiB on every rank at once
    topo = calibrated_topology(Spec(hosts=8, rate_mbit=100), fit)
    t_shift = dict((n, t) for n, t in probes["p2p_shift"])[262144]
    assert simulate(topo, "allgather", 8 * 262144, "ring").time_us * 1e-6 == pytest.approx(t_shift, rel=1e-6)


def test_probe_fit_needs_both_regimes_and_every_probe():
    probes = synthetic_probes(8, 11.8e6, 11.9e6, 21e6, 11.9e6, 40e-6, 2e-3, 0.9)
    with pytest.raises(ConfigError, match="p2p_fanout missing"):
        fit_probes({k: v for k, v in probes.items() if k != "p2p_fanout"}, 8)
    only_large = {k: [r for r in v if r[0] >= 65536] for k, v in probes.items()}
    with pytest.raises(ConfigError, match="eager regime"):
        fit_probes(only_large, 8)


def test_regime_lookup_vectorised():
    r = MessageRegimes((0, 100, 1000), (0.0, 1.0, 2.0), (1.0, 0.5, 0.25))
    assert r.regime_of(np.array([0, 99, 100, 999, 1000, 10 ** 9])).tolist() == [0, 0, 1, 1, 2, 2]


def test_pair_limit_only_in_the_regimes_that_keep_it():
    # 2 ranks exchanging (ring allgather): links 1 GB/s each way, the pair limited to 1 GB/s for
    # both directions together. Eager (< 1000 B) lifts the limit: 500 B blocks take 0.5 us;
    # rendezvous keeps it: 2000 B blocks share 1 GB/s both ways, 4 us.
    regimes = MessageRegimes((0, 1000), (0.0, 0.0), (1.0, 1.0), pair_limit=(False, True))
    topo = with_regimes(full_mesh(2, 1e9, exchange_Bps=1e9), regimes)
    assert simulate(topo, "allgather", 1000, "ring").time_us == pytest.approx(0.5, rel=1e-9)
    assert simulate(topo, "allgather", 4000, "ring").time_us == pytest.approx(4.0, rel=1e-9)
    # without regimes the limit holds for every size
    plain = full_mesh(2, 1e9, exchange_Bps=1e9)
    assert simulate(plain, "allgather", 1000, "ring").time_us == pytest.approx(1.0, rel=1e-9)


def test_pair_limit_yaml_round_trip_and_error(tmp_path):
    regimes = MessageRegimes((0, 1000), (0.0, 1e-6), (1.0, 1.0), pair_limit=(False, True))
    topo = with_regimes(full_mesh(2, 1e9, exchange_Bps=1e9), regimes)
    back = load_topology(save_topology(topo, tmp_path / "t.yaml"))
    assert same_regimes(back.defaults.message_regimes, regimes)
    (tmp_path / "bad.yaml").write_text((tmp_path / "t.yaml").read_text().replace("pair_limit: false", "pair_limit: 3"))
    with pytest.raises(ConfigError, match=r"message_regimes\[0\].pair_limit = 3"):
        load_topology(tmp_path / "bad.yaml")
    with pytest.raises(ConfigError, match="pair_limit"):
        MessageRegimes((0, 1000), (0.0, 0.0), (1.0, 1.0), pair_limit=(True,))


def test_regime_follows_the_message_not_the_block():
    # NB (Bruck) allgather, 4 ranks, 600 B blocks, 1 GB/s per direction of every pair: step 0
    # sends one block to r+1 (600 B, eager: 0.6 us); step 1 sends two blocks to r+2 as two
    # transfers but one 1200 B message, rendezvous: 5 us + 1200 B charged as 2400 B = 7.4 us
    topo = with_regimes(full_mesh(4, 1e9), RNDV)
    assert simulate(topo, "allgather", 2400, "nb").time_us == pytest.approx(0.6 + 5 + 2.4, rel=1e-9)


def test_overhead_only_where_the_receiver_sends_elsewhere():
    when = dataclasses.replace(RNDV, overhead_when=("always", "receiver_sending"))
    # star broadcast of 2000 B, 3 ranks: the root sends to both at once, the receivers send
    # nothing: no handshake, 2000 B charged as 4000 B on each pair's own link = 4 us
    assert simulate(with_regimes(full_mesh(3, 1e9), when), "broadcast", 2000, "star").time_us == pytest.approx(4.0)
    assert simulate(with_regimes(full_mesh(3, 1e9), RNDV), "broadcast", 2000, "star").time_us == pytest.approx(9.0)
    # ring allgather of 3 x 2000 B: every receiver sends on, so both steps pay it: 2 x 9 us
    assert simulate(with_regimes(full_mesh(3, 1e9), when), "allgather", 6000, "ring").time_us == pytest.approx(18.0)


def test_new_peer_efficiency_by_hand():
    slow = MessageRegimes((0,), (0.0,), (1.0,), new_peer_efficiency=(0.5,))
    # pairwise alltoall, 4 ranks, 1000 B blocks: every step a new peer, every receiver
    # sending: 3 steps of 1000 B charged as 2000 B = 6 us
    assert simulate(with_regimes(full_mesh(4, 1e9), slow), "alltoall", 4000, "pairwise").time_us == pytest.approx(6.0)
    # ring allgather: the same peer every step after the first: 2 + 1 + 1 us
    assert simulate(with_regimes(full_mesh(4, 1e9), slow), "allgather", 4000, "ring").time_us == pytest.approx(4.0)
    # star broadcast: new peers, but the receivers send nothing: 1 us
    assert simulate(with_regimes(full_mesh(3, 1e9), slow), "broadcast", 1000, "star").time_us == pytest.approx(1.0)


def test_many_peer_efficiency_by_hand():
    slow = MessageRegimes((0, 2000), (0.0, 0.0), (1.0, 1.0), many_peer_efficiency=(0.5, 1.0))
    # linear (mesh) alltoall, 4 ranks, 1000 B blocks: one step, every rank sending to 3 peers
    # and receiving from 3, each block on its own 1 GB/s link charged as 2000 B: 2 us
    mesh = with_regimes(full_mesh(4, 1e9), slow)
    assert simulate(mesh, "alltoall", 4000, "mesh").time_us == pytest.approx(2.0)
    # pairwise: one peer each way a step, 3 steps of 1 us
    assert simulate(mesh, "alltoall", 4000, "pairwise").time_us == pytest.approx(3.0)
    # star broadcast: the root sends to 3, but each receiver hears from one: 1 us
    assert simulate(mesh, "broadcast", 1000, "star").time_us == pytest.approx(1.0)
    # 3000 B blocks are in the second regime, where the factor is 1: 3 us
    assert simulate(mesh, "alltoall", 12000, "mesh").time_us == pytest.approx(3.0)
    # the rule: sender to >= 2 peers and receiver from >= 2 (zero-byte transfers do not count)
    # out-degrees 2, 1, 2 and in-degrees 1, 2, 2 for ranks 0, 1, 2
    src, dst = np.array([0, 0, 1, 2, 2]), np.array([1, 2, 2, 0, 1])
    assert many_to_many(src, dst, np.ones(5)).tolist() == [True, True, False, False, True]
    # without 2 -> 1, rank 2 sends to one peer and rank 1 hears from one
    assert many_to_many(src, dst, np.array([1, 1, 1, 1, 0])).tolist() == [False, True, False, False, False]


def test_step_helpers():
    src, dst = np.array([0, 0, 1, 2]), np.array([1, 1, 0, 0])
    assert message_bytes(src, dst, np.array([1.0, 2.0, 4.0, 8.0])).tolist() == [3.0, 3.0, 4.0, 8.0]
    # 0 sends to 1 only (who sends back): not elsewhere; 1 -> 0 and 2 -> 0: 0 sends to 1, which is
    # elsewhere for 2 but not for 1
    assert receiver_sending(src, dst, np.ones(4)).tolist() == [False, False, False, True]
    # a zero-byte transfer is not sending
    assert receiver_sending(np.array([0, 1]), np.array([1, 2]), np.array([1.0, 0.0])).tolist() == [False, False]
    from types import SimpleNamespace as S
    r = np.arange(4)
    steps = [S(src=r, dst=(r + 1) % 4, nbytes=np.ones(4)), S(src=r, dst=(r + 1) % 4, nbytes=np.ones(4)),
             S(src=r, dst=(r + 2) % 4, nbytes=np.ones(4))]
    # a sender's first step is new, step 1 repeats step 0's peer, step 2 is new; a rank that
    # sends nothing in a step keeps its previous step
    assert [m.tolist() for m in new_peers(steps)] == [[True] * 4, [False] * 4, [True] * 4]
    gap = [S(src=r, dst=(r + 1) % 4, nbytes=np.ones(4)), S(src=r[:2], dst=(r[:2] + 2) % 4, nbytes=np.ones(2)),
           S(src=r, dst=(r + 1) % 4, nbytes=np.ones(4))]
    assert [m.tolist() for m in new_peers(gap)] == [[True] * 4, [True] * 2, [True, True, False, False]]


def test_new_peer_fit_recovers_what_made_the_rotate_probe():
    probes = synthetic_probes(8, rate=11.8e6, exch=11.9e6, engine=21e6, fan=11.9e6, alpha=40e-6, rndv_s=2e-3,
                              eager_eff=0.9)
    base = fit_probes(probes, 8)
    assert "new_peer_efficiency" not in base["regimes"]
    truth = {**base, "regimes": {**base["regimes"], "new_peer_efficiency": [0.7, 0.85]}}
    topo = calibrated_topology(Spec(hosts=8, rate_mbit=100), truth)
    probes["p2p_rotate"] = [[n, simulate(topo, "alltoall", 8 * n, "pairwise").time_s] for n in PROBE_SIZES]
    fit = fit_probes(probes, 8)
    assert fit["regimes"]["new_peer_efficiency"] == pytest.approx([0.7, 0.85], abs=2e-3)
    assert fit["rms_log_residual"]["p2p_rotate"] < 1e-3
    # on a 2-leaf testbed the probe's steps cross the uplinks: fitted on the testbed it ran on,
    # the same values come back; fitted as if on one switch, the uplinks' delay is taken for
    # a slow endpoint
    leafy = Spec(hosts=8, rate_mbit=100, leaves=2, uplink_mbit=100)
    topo = calibrated_topology(leafy, truth)
    probes["p2p_rotate"] = [[n, simulate(topo, "alltoall", 8 * n, "pairwise").time_s] for n in PROBE_SIZES]
    fit = fit_probes(probes, 8, spec=leafy)
    assert fit["regimes"]["new_peer_efficiency"] == pytest.approx([0.7, 0.85], abs=2e-3)
    assert fit_probes(probes, 8)["regimes"]["new_peer_efficiency"][1] < 0.6


def test_new_fields_round_trip_and_reject_bad_values(tmp_path):
    reg = MessageRegimes((0, 1000), (0.0, 5e-6), (1.0, 0.5), overhead_when=("always", "receiver_sending"),
                         new_peer_efficiency=(0.9, 0.8), many_peer_efficiency=(0.85, 1.1))
    back = load_topology(save_topology(with_regimes(full_mesh(4, 1e9), reg), tmp_path / "t.yaml"))
    assert back.defaults.message_regimes.overhead_when == reg.overhead_when
    assert back.defaults.message_regimes.new_peer_efficiency == reg.new_peer_efficiency
    assert back.defaults.message_regimes.many_peer_efficiency == reg.many_peer_efficiency
    text = (tmp_path / "t.yaml").read_text()
    (tmp_path / "w.yaml").write_text(text.replace("overhead_when: receiver_sending", "overhead_when: sometimes"))
    with pytest.raises(ConfigError, match=r"message_regimes\[1\].overhead_when = 'sometimes'"):
        load_topology(tmp_path / "w.yaml")
    (tmp_path / "e.yaml").write_text(text.replace("new_peer_efficiency: 0.8", "new_peer_efficiency: -1"))
    with pytest.raises(ConfigError, match=r"new_peer_efficiency"):
        load_topology(tmp_path / "e.yaml")
    with pytest.raises(ConfigError, match="new_peer_efficiency"):
        MessageRegimes((0,), (0.0,), (1.0,), new_peer_efficiency=(0.5, 0.5))
    (tmp_path / "m.yaml").write_text(text.replace("many_peer_efficiency: 1.1", "many_peer_efficiency: inf"))
    with pytest.raises(ConfigError, match=r"message_regimes\[1\].many_peer_efficiency"):
        load_topology(tmp_path / "m.yaml")
    with pytest.raises(ConfigError, match=r"message_regimes\[0\].many_peer_efficiency = 0"):
        MessageRegimes((0,), (0.0,), (1.0,), many_peer_efficiency=(0,))


def _cross_probe(p, n):
    """The cross probe as a schedule: r -> r + p/2 for r < p/2, p - 1 steps of n bytes."""
    from hcsim.algorithms.schedule import Schedule, make_step

    def build(args):
        half = args.p // 2
        step = make_step(np.arange(half), np.arange(half) + half, n, False, 0, 1)
        return Schedule(args, 1, [step] * (args.p - 1), np.array([n]))
    return build


def test_cross_probe_fits_the_uplink_where_it_is_the_bottleneck():
    probes = synthetic_probes(8, rate=11.8e6, exch=11.9e6, engine=21e6, fan=11.9e6, alpha=40e-6, rndv_s=2e-3,
                              eager_eff=0.9)
    leafy = Spec(hosts=8, rate_mbit=100, leaves=2, uplink_mbit=100)
    base = fit_probes(probes, 8, spec=leafy)
    # a true uplink at 7 MB/s (the nominal, scaled like the hosts, would be 11.8): the probe's
    # 4 flows share it, so one step of n bytes takes 4 n / 7e6 plus the per-step cost and (the
    # synthetic one-way probe pays it too) the rendezvous overhead (simulated, not assumed)
    topo = calibrated_topology(leafy, {**base, "uplink_Bps": 7e6})
    cross = [[n, simulate(topo, "alltoall", n, _cross_probe(8, n), verify=False).time_s] for n in PROBE_SIZES]
    assert cross[-1][1] == pytest.approx(7 * (4 * 1048576 / 7e6 + 40e-6 + 2e-3), rel=1e-6)
    fit = fit_probes({**probes, "p2p_cross": cross}, 8, spec=leafy)
    assert fit["uplink_Bps"] == pytest.approx(7e6, rel=1e-6)
    assert calibrated_topology(leafy, fit).link_spec("leaf0", "spine").bandwidth_Bps == pytest.approx(7e6, rel=1e-6)
    from hcsim.cli import _fit_summary
    assert "uplink 7.00 MB/s (the bottleneck: used)" in _fit_summary(fit)
    assert "reduction not measured" in _fit_summary(fit)
    # a fat uplink: the hosts limit the probe, which then only bounds the uplink from below,
    # so the nominal (scaled) rate stays
    fat = Spec(hosts=8, rate_mbit=100, leaves=2, uplink_mbit=800)
    topo = calibrated_topology(fat, base)
    cross = [[n, simulate(topo, "alltoall", n, _cross_probe(8, n), verify=False).time_s] for n in PROBE_SIZES]
    fit = fit_probes({**probes, "p2p_cross": cross}, 8, spec=fat)
    assert "uplink_Bps" not in fit and fit["cross_Bps"] == pytest.approx(4 * 11.8e6, rel=1e-6)
    assert calibrated_topology(fat, fit).link_spec("leaf0", "spine").bandwidth_Bps == pytest.approx(8 * 11.8e6, rel=1e-6)
    # on one switch the probe has nothing to fit
    assert "cross_Bps" not in fit_probes({**probes, "p2p_cross": cross}, 8)


def test_reduction_probe_sets_the_reduction_rate_and_reduce_scatter_pays_it():
    probes = synthetic_probes(8, rate=11.8e6, exch=11.9e6, engine=21e6, fan=11.9e6, alpha=40e-6, rndv_s=2e-3,
                              eager_eff=0.9)
    probes["reduce_local"] = [[n, 5e-6 + 7 * n / 2e8] for n in PROBE_SIZES]
    fit = fit_probes(probes, 8)
    assert fit["reduce_Bps"] == pytest.approx(2e8, rel=1e-6)
    topo = calibrated_topology(Spec(hosts=8, rate_mbit=100), fit)
    # ring reduce-scatter and ring allgather move the same blocks; the former reduces each of
    # its 7 received blocks of n/8 after it arrives, on the critical path
    n = 8 * 262144
    rs, ag = (simulate(topo, c, n, "ring").time_s for c in ("reducescatter", "allgather"))
    assert rs - ag == pytest.approx(7 * 262144 / 2e8, rel=1e-6)
    assert calibrated_topology(Spec(hosts=8, rate_mbit=100), fit_probes(synthetic_probes(
        8, 11.8e6, 11.9e6, 21e6, 11.9e6, 40e-6, 2e-3, 0.9), 8)).npu_spec("npu0").reduce_Bps == np.inf


def test_probe_rounds_keep_the_median_so_one_slow_round_does_not_set_the_model(monkeypatch):
    import pandas as pd

    import hcsim.backends.mpi as mpi
    from hcsim.cli import _fit_summary

    truth = synthetic_probes(8, rate=11.8e6, exch=11.9e6, engine=21e6, fan=11.9e6, alpha=40e-6, rndv_s=2e-3,
                             eager_eff=0.9)
    truth["reduce_local"] = [[n, 5e-6 + 7 * n / 2e8] for n in PROBE_SIZES]
    truth["p2p_cross"] = truth["p2p_oneway"]
    topo = calibrated_topology(Spec(hosts=8, rate_mbit=100), {**fit_probes(truth, 8), "regimes": {
        **fit_probes(truth, 8)["regimes"], "new_peer_efficiency": [0.8, 0.9], "many_peer_efficiency": [0.92, 1.06]}})
    truth["p2p_rotate"] = [[n, simulate(topo, "alltoall", 8 * n, "pairwise").time_s] for n in PROBE_SIZES]
    truth["p2p_all"] = [[n, mpi._simulate_probe(topo, "p2p_all", n, 8)] for n in PROBE_SIZES]
    calls, asked, slowdown = [], {}, [1.3]

    def fake_sweep(testbed, probe, sizes, algorithm, iterations):
        calls.append(probe)
        asked[probe] = list(sizes)
        slow = slowdown[0] if probe == "p2p_rotate" and calls.count(probe) == 2 else 1.0  # its 2nd round ran slow
        return pd.DataFrame({"size_bytes": [n for n, _ in truth[probe] if n in sizes],
                             "time_us": [t * 1e6 * slow for n, t in truth[probe] if n in sizes]})

    monkeypatch.setattr(mpi, "run_mpi_sweep", fake_sweep)
    tb = type("Tb", (), {"hosts": [f"h{i}" for i in range(8)], "spec": Spec(hosts=8, rate_mbit=100)})()
    fit = mpi.fit_point_to_point(tb, rounds=3)
    # a spread past 25% (NOISY_SPREAD) takes two more rounds
    assert len(calls) == 5 * len(PROBES) and fit["probe_rounds"] == 5
    assert fit["regimes"]["new_peer_efficiency"] == pytest.approx([0.8, 0.9], abs=2e-3)
    # the all-peers probe stops at 256 KiB and, fitted after the new-peer factor, gives its own
    assert asked["p2p_all"] == [n for n in PROBE_SIZES if n <= 262144]
    assert fit["regimes"]["many_peer_efficiency"] == pytest.approx([0.92, 1.06], abs=2e-3)
    assert "many-peer efficiency 0.920/1.060" in _fit_summary(fit)
    assert fit["probe_spread"]["p2p_rotate"] == pytest.approx(0.3, rel=1e-6)
    assert fit["probe_spread"]["p2p_shift"] == pytest.approx(0.0, abs=1e-9)
    assert "median of 5 probe rounds, widest spread 30% (p2p_rotate)" in _fit_summary(fit)
    # every round is kept, and a spread past 25% is flagged
    n, ts = fit["probe_rounds_s"]["p2p_rotate"][-1]
    assert n == PROBE_SIZES[-1] and len(ts) == 5 and ts[1] == pytest.approx(1.3 * ts[0])
    assert ts[2:] == pytest.approx([ts[0]] * 3)
    assert "up to 30% between rounds (p2p_rotate)" in mpi.noisy_probes(fit)
    assert mpi.noisy_probes({**fit, "probe_spread": {**fit["probe_spread"], "p2p_rotate": 0.2}}) is None
    # a quieter slow round: 3 rounds are enough
    calls.clear()
    slowdown[0] = 1.2
    assert mpi.fit_point_to_point(tb, rounds=3)["probe_rounds"] == 3 and len(calls) == 3 * len(PROBES)
    # one round alone takes what it gets
    calls.clear()
    monkeypatch.setattr(mpi, "run_mpi_sweep", lambda *a, **k: fake_sweep(*a, **k) if a[1] != "p2p_rotate" else
                        pd.DataFrame({"size_bytes": [n for n, _ in truth["p2p_rotate"]],
                                      "time_us": [t * 1.3e6 for _, t in truth["p2p_rotate"]]}))
    assert mpi.fit_point_to_point(tb, rounds=1)["regimes"]["new_peer_efficiency"][0] < 0.7
    with pytest.raises(ConfigError, match="rounds = 0"):
        mpi.fit_point_to_point(tb, rounds=0)


def test_start_when_round_trips_through_a_topology_file(tmp_path):
    """An eager regime (``start_when``) survives save and load, so a saved topology predicts
    what the one in memory did; a bad value is the file's one-line error."""
    reg = MessageRegimes((0, 65536), (0.0, 0.0), (1.0, 1.0), start_when=("sender", "both"))
    topo = with_regimes(leaf_spine(2, 2, 1, 10e9, 1e-6), reg)
    back = load_topology(save_topology(topo, tmp_path / "t.yaml"))
    assert back.defaults.message_regimes.start_when == ("sender", "both")
    assert simulate(back, "allgather", 4096, "ring").time_s == simulate(topo, "allgather", 4096, "ring").time_s
    text = (tmp_path / "t.yaml").read_text()
    (tmp_path / "w.yaml").write_text(text.replace("start_when: sender", "start_when: receiver"))
    with pytest.raises(ConfigError, match=r"message_regimes\[0\].start_when = 'receiver'"):
        load_topology(tmp_path / "w.yaml")
