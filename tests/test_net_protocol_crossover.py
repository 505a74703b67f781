"""NCCL's network protocols cross over at the network's rate, not at the fitted class's (change 52).

The crossover of two protocols is ``m* = gap x B / (1/e1 - 1/e2)`` (:func:`hcsim.calibrate.nccl_protocol_regimes`).
Over a network hop ``B`` is the rate of the links between servers (:func:`hcsim.calibrate.network_links`); where a
bottleneck fit picks NVLink instead (a node whose NVLink bounds the largest point) the fitted NVLink rate put the
crossover as many times too high as NVLink is faster than the NICs (the AWS p5's 4-32 MiB rows, +147% to +548%).
"""

import dataclasses

import pandas as pd
import pytest

import hcsim
from hcsim.calibrate import (
    NCCL_SIMPLE_LATENCY_RATIO,
    calibrate,
    nccl_protocol_regimes,
    network_links,
)
from hcsim.topology import leaf_spine


def _two_nodes(nvlink_Bps, oversubscription):
    # 2 servers x 8 GPUs, one rail switch per GPU index, NICs at nvlink / oversubscription each (leaf_spine's rule)
    return leaf_spine(2, 8, 8, nvlink_Bps, tier="nvlink", npus_per_server=8, rails=True,
                      oversubscription=oversubscription)


def _crossover(step_s, rate_Bps, share):
    return max(1, int((NCCL_SIMPLE_LATENCY_RATIO["net"] - 1) * step_s * rate_Bps / (1 / share - 1)))


def test_only_the_network_hop_asks_for_the_network_rate():
    assert nccl_protocol_regimes("net").crossover_links == "network"
    assert not hasattr(nccl_protocol_regimes("nvlink"), "crossover_links")
    # called directly, the builder still uses the rate it is given (the caller decides which rate that is)
    assert nccl_protocol_regimes("net", 0.2)(10e-6, 25e9).from_bytes[1] == _crossover(10e-6, 25e9, 0.2)


def _points(truth, ranks, algorithm, sizes=(8, 1 << 30)):
    return pd.DataFrame([{"collective": "allreduce", "size_bytes": n, "ranks": ranks, "algorithm": algorithm,
                          "time_us": hcsim.simulate(truth, "allreduce", n, algorithm).time_us} for n in sizes])


def test_fit_of_nvlink_passes_the_network_links_rate():
    """Points from a node whose NVLink is 0.6 x the built rate: the fit scales NVLink (the NICs keep their
    50 GB/s), and the crossover is computed at the NICs' 50 GB/s, not at the fitted NVLink's 270 GB/s."""
    truth = _two_nodes(270e9, 5.4)  # NVLink 270 GB/s, NICs 50 GB/s
    truth.defaults = dataclasses.replace(truth.defaults, step_overhead_s=17e-6)
    share = 0.05
    fitted, _ = calibrate(_two_nodes(450e9, 9.0), _points(truth, 16, "pipeline"), fit="bottleneck",
                          regimes=nccl_protocol_regimes("net", share))
    nvlink = fitted.link_spec("npu0", "leaf0").bandwidth_Bps  # NVLink: an NPU to its server's switch
    net = [fitted.graph.edges[e]["spec"].bandwidth_Bps for e in network_links(fitted)]
    assert nvlink == pytest.approx(270e9, rel=0.05) and set(net) == {50e9}
    step = fitted.defaults.step_overhead_s
    assert fitted.defaults.message_regimes.from_bytes[1] == _crossover(step, 50e9, share)
    assert fitted.defaults.message_regimes.from_bytes[1] < _crossover(step, nvlink, share) / 5  # the old rule's


def test_fit_of_the_network_is_as_before():
    """Where the fit scales the network's links (NICs 0.7 x the built rate), their fitted rate is the fitted class's
    rate: the crossover is where the old rule put it."""
    truth = _two_nodes(450e9, 9.0 / 0.7)  # NICs 35 GB/s
    truth.defaults = dataclasses.replace(truth.defaults, step_overhead_s=17e-6)
    fitted, rep = calibrate(_two_nodes(450e9, 9.0), _points(truth, 16, "ring"), fit="bottleneck",
                            regimes=nccl_protocol_regimes("net", 0.1))
    assert list(rep["link_scale"]) == ["nvlink@50GBps"]  # the fitted class: the NICs as built, 50 GB/s
    old_rule = 50e9 * rep["link_scale"]["nvlink@50GBps"]  # what the old rule passed: the fitted class's rate
    assert old_rule == pytest.approx(35e9, rel=0.05) and fitted.link_spec("npu0", "leaf0").bandwidth_Bps == 450e9
    assert fitted.defaults.message_regimes.from_bytes[1] == _crossover(fitted.defaults.step_overhead_s, old_rule, 0.1)


def test_single_server_fit_is_unchanged():
    """One server has no network links: the fitted class's rate, as before."""
    from hcsim.topology import single_switch

    topo = single_switch(8, 100e9, tier="nvlink")
    points = pd.DataFrame([
        {"collective": "allreduce", "size_bytes": n, "ranks": 8, "algorithm": "ring",
         "time_us": hcsim.simulate(topo, "allreduce", n, "ring").time_us * 1.3 + 5}
        for n in (8, 1 << 28)])
    fitted, rep = calibrate(topo, points, fit="bottleneck", regimes=nccl_protocol_regimes("net", 0.1))
    rate = max(d["spec"].bandwidth_Bps for _, _, d in fitted.graph.edges(data=True))
    assert fitted.defaults.message_regimes.from_bytes[1] == _crossover(fitted.defaults.step_overhead_s, rate, 0.1)


def test_p5_mid_rows_follow_the_network_crossover():
    """The AWS p5's 8-32 MiB rows: within +91% / +42% / +11% with the crossover at its NICs' rate (they were +273%,
    +390%, +548% with it at the fitted NVLink rate, docs/validation.md change 52); the other three two-node NCCL systems,
    whose fits pick their network links, are unchanged (their own tests)."""
    from hcsim.corpus import load_corpus, validate_system

    p5 = next(s for s in load_corpus() if "p5.48xlarge" in s["system"])
    rows, _ = validate_system(p5)
    mid = rows[(rows.size_bytes >= 8 << 20) & (rows.size_bytes <= 32 << 20)].set_index("size_bytes").error
    assert len(mid) == 3
    assert mid[8 << 20] < 1.0 and mid[16 << 20] < 0.5 and abs(mid[32 << 20]) < 0.15, mid
