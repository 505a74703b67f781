"""A protocol's cost once a call (MessageRegimes.call_overhead_s; NCCL's baseLat), against hand-worked times."""

from __future__ import annotations

import dataclasses

import pytest

import hcsim
from hcsim.calibrate import NCCL_RING_BASE_LATENCY_S, nccl_protocol_regimes
from hcsim.engine.regimes import MessageRegimes
from hcsim.errors import HcsimError
from hcsim.topology import single_switch
from hcsim.topology.io import load_topology, save_topology
from hcsim.workload import Workload, run

RATE = 100e9  # B/s each way, no latency: a ring step of m bytes takes m / RATE


def _topo(regimes=None, **defaults):
    t = single_switch(8, RATE, 0.0)
    t.defaults = dataclasses.replace(t.defaults, message_regimes=regimes, **defaults)
    return t


def _two_regimes(call=(5e-6, 20e-6)):
    return MessageRegimes(from_bytes=(0, 65536), overhead_s=(0.0, 0.0), efficiency=(1.0, 1.0), call_overhead_s=call)


@pytest.mark.parametrize("nbytes, regime_s", [(1 << 20, 20e-6), (1 << 18, 5e-6)])
def test_a_ring_pays_its_messages_regime_once(nbytes, regime_s):
    """8-rank ring allgather: 7 steps of nbytes / 8 at 100 GB/s, plus the call's regime once (its messages:
    128 KiB at 1 MiB, regime 1; 32 KiB at 256 KiB, regime 0)."""
    hand_s = 7 * (nbytes / 8) / RATE + regime_s
    res = hcsim.simulate(_topo(_two_regimes()), "allgather", nbytes, "ring")
    assert res.time_s == pytest.approx(hand_s, rel=1e-12)
    assert res.config["call_overhead_s"] == regime_s  # said in the result
    assert "call_overhead_s" not in hcsim.simulate(_topo(), "allgather", nbytes, "ring").config  # and only then


def test_the_call_cost_is_device_time_under_launch_overlap():
    """With launch_overlap a call costs max(launch, device + its protocol's cost)."""
    device_s = 7 * (1 << 17) / RATE + 20e-6  # 29.175 us
    for launch_s in (25e-6, 40e-6):
        t = _topo(_two_regimes(), launch_overhead_s=launch_s, launch_overlap=True)
        assert hcsim.simulate(t, "allgather", 1 << 20, "ring").time_s == pytest.approx(max(launch_s, device_s), rel=1e-12)
    t = _topo(_two_regimes(), launch_overhead_s=25e-6)  # and without it, their sum
    assert hcsim.simulate(t, "allgather", 1 << 20, "ring").time_s == pytest.approx(25e-6 + device_s, rel=1e-12)


def test_a_chain_pays_the_regime_of_its_protocol_size():
    """A pipelined chain's 64 KiB segments choose no protocol of their own: the buffer over p - 1 does
    (Schedule.protocol_bytes), so a 64 MiB broadcast pays the large-message regime's call cost."""
    big = MessageRegimes(from_bytes=(0, 1 << 20), overhead_s=(0.0, 0.0), efficiency=(1.0, 1.0),
                         call_overhead_s=(0.0, 50e-6))
    none = MessageRegimes(from_bytes=(0, 1 << 20), overhead_s=(0.0, 0.0), efficiency=(1.0, 1.0),
                          call_overhead_s=(0.0, 0.0))
    with_s = hcsim.simulate(_topo(big), "broadcast", 64 << 20, "chain").time_s
    without_s = hcsim.simulate(_topo(none), "broadcast", 64 << 20, "chain").time_s
    assert with_s - without_s == pytest.approx(50e-6, rel=1e-9)


def test_nvls_pays_no_base_latency():
    """NCCL's base latency of NVLS is 0: an in-network schedule pays no call cost."""
    t = single_switch(8, 450e9, 0.0, in_network_efficiency=0.85)
    plain = hcsim.simulate(t, "allreduce", 1 << 30, "nvls").time_s
    t.defaults = dataclasses.replace(t.defaults, message_regimes=_two_regimes((1e-3, 1e-3)))
    assert hcsim.simulate(t, "allreduce", 1 << 30, "nvls").time_s == plain


def test_nccl_regimes_carry_its_base_latencies_only_when_asked():
    assert nccl_protocol_regimes("nvlink")(0.6e-6, 400e9).call_overhead_s is None
    with_base = nccl_protocol_regimes("nvlink", base_latency=True)(0.6e-6, 400e9)
    assert with_base.call_overhead_s == NCCL_RING_BASE_LATENCY_S == (6.6e-6, 14.0e-6, 8.4e-6)
    net = nccl_protocol_regimes("net", base_latency=True)(10e-6, 25e9)  # LL and Simple over a network
    assert net.call_overhead_s == (6.6e-6, 8.4e-6)
    assert not with_base.trivial and not MessageRegimes(call_overhead_s=(1e-6,)).trivial


def test_call_overhead_round_trips_through_yaml(tmp_path):
    t = _topo(_two_regimes())
    back = load_topology(save_topology(t, tmp_path / "t.yaml"))
    assert back.defaults.message_regimes.call_overhead_s == pytest.approx((5e-6, 20e-6), rel=1e-12)
    assert (hcsim.simulate(back, "allgather", 1 << 20, "ring").time_s
            == pytest.approx(hcsim.simulate(t, "allgather", 1 << 20, "ring").time_s, rel=1e-12))


@pytest.mark.parametrize("bad", [(2.0, 0.0), (-1e-6, 0.0), (1e-6,), ("1", 0.0)])
def test_a_bad_call_overhead_is_a_one_line_error(bad):
    with pytest.raises(HcsimError, match=r"message_regimes.*call_overhead_s"):
        _two_regimes(bad)


def test_a_bad_call_overhead_in_yaml_names_its_key(tmp_path):
    path = save_topology(_topo(_two_regimes()), tmp_path / "t.yaml")
    text = path.read_text().replace("call_overhead_us: 20.0", "call_overhead_us: -3")
    assert text != path.read_text()
    path.write_text(text)
    with pytest.raises(HcsimError, match=r"message_regimes\[1\]\.call_overhead_us.*-3"):
        load_topology(path)


def test_a_job_pays_the_call_cost_as_simulate_does():
    """A job's collective enters its ranks itself (workload.runner): after its launch and its call cost, so one
    operation equals simulate, and two on disjoint ranks each pay it once (a review's finding: jobs paid none)."""
    t = _topo(_two_regimes(), launch_overhead_s=3e-6)
    w = Workload("one")
    w.collective("c", w.communicator("world", range(8)), "allgather", 1 << 20, algorithm="ring")
    assert run(t, w).step_time_s == pytest.approx(hcsim.simulate(t, "allgather", 1 << 20, "ring").time_s, rel=1e-12)
    assert run(t, w).step_time_s == pytest.approx(3e-6 + 20e-6 + 7 * (1 << 17) / RATE, rel=1e-12)


def test_the_call_regime_is_that_of_the_largest_protocol_size_of_its_steps():
    """protocol_bytes one per step: the largest decides the call's regime, whatever the messages are."""
    from hcsim.algorithms import build_schedule
    from hcsim.engine.des import EngineConfig, FlowSimulator

    t = _topo()
    s = build_schedule("allgather", "ring", 8, 1 << 20)  # 7 steps of 128 KiB messages: regime 1 by themselves
    cfg = EngineConfig(message_regimes=_two_regimes())
    assert FlowSimulator(t, t.npus, s, cfg).call_overhead_s == 20e-6
    small = (1,) * len(s.steps)  # every step chooses by 1 byte: regime 0
    assert FlowSimulator(t, t.npus, dataclasses.replace(s, protocol_bytes=small), cfg).call_overhead_s == 5e-6
    one_big = (1,) * (len(s.steps) - 1) + (1 << 20,)
    assert FlowSimulator(t, t.npus, dataclasses.replace(s, protocol_bytes=one_big), cfg).call_overhead_s == 20e-6
