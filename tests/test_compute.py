"""ComputeSpec: the roofline's two regimes, validation, presets and YAML (hcsim/compute.py)."""

from __future__ import annotations

import pickle

import pytest

from hcsim.compute import ASCEND_910B, ASCEND_910C_DIE, ComputeSpec
from hcsim.errors import ConfigError
from hcsim.topology import LinkSpec, NpuSpec, Topology
from hcsim.topology.io import load_topology, save_topology, topology_from_dict


def test_roofline_two_regimes_hand_worked():
    c = ComputeSpec({"fp16": 100e12, "int8": 200e12}, hbm_Bps=2e12, efficiency=0.5)
    # compute-bound: 100 TFLOP at 50 TFLOP/s = 2 s (the bytes take 0.001 s at 1 TB/s)
    assert c.time_s(100e12, 1e9, "fp16") == 2.0
    # memory-bound: 3 TB at 2 TB/s x 0.5 = 3 s
    assert c.time_s(1e9, 3e12, "fp16") == 3.0
    assert c.time_s(100e12, 0, "int8") == 1.0
    assert c.time_s(0, 0, "fp16") == 0.0
    # a separate HBM efficiency
    d = ComputeSpec({"fp16": 100e12}, hbm_Bps=2e12, efficiency=0.5, hbm_efficiency=1.0)
    assert d.time_s(1e9, 3e12, "fp16") == 1.5


def test_unknown_dtype_and_bad_values_are_one_line():
    c = ComputeSpec({"fp16": 1e12}, hbm_Bps=1e12)
    with pytest.raises(ConfigError, match="^dtype = 'int8': one this NPU's compute has a peak for: fp16$"):
        c.time_s(1, 1, "int8")
    for kw, msg in ((dict(efficiency=0), "compute.efficiency = 0"), (dict(efficiency=1.5), "compute.efficiency"),
                    (dict(hbm_Bps=-1), "compute.hbm_bandwidth"),
                    (dict(peak_flops_by_dtype={"fp16": 0}), "compute.peak_flops_by_dtype.fp16"),
                    (dict(peak_flops_by_dtype={"fp8": 1e12}), "compute.peak_flops_by_dtype = 'fp8'")):
        with pytest.raises(ConfigError, match=msg):
            ComputeSpec(**kw)
    with pytest.raises(ConfigError, match="flops = -1"):
        c.time_s(-1, 0, "fp16")


def test_presets_cite_and_hash():
    assert ASCEND_910B.peak_flops("bf16") == 353.8e12 and ASCEND_910B.hbm_Bps == 1.6e12
    assert ASCEND_910C_DIE.peak_flops("float16") == 353.8e12
    assert "msmodeling" in ASCEND_910B.source and "256" in ASCEND_910B.source
    assert pickle.loads(pickle.dumps(ASCEND_910B)) == ASCEND_910B
    assert hash(NpuSpec(compute=ASCEND_910B)) == hash(NpuSpec(compute=ASCEND_910B))


def test_builtin_topologies_carry_compute():
    a2 = load_topology("atlas800t-a2")
    assert a2.npu_spec(a2.npus[0]).compute == ASCEND_910B
    a3 = load_topology("atlas900-a3-superpod")
    assert a3.npu_spec(a3.npus[0]).compute == ASCEND_910C_DIE
    a1 = load_topology("atlas800-9000")
    assert a1.npu_spec(a1.npus[0]).compute is None  # no cited 910A figure


def test_yaml_round_trip_and_strict_reading(tmp_path):
    t = Topology("pair")
    t.add_npu("a", NpuSpec(compute=ASCEND_910B))
    t.add_npu("b", NpuSpec(local_index=1))
    t.add_link("a", "b", LinkSpec(1e9))
    back = load_topology(str(save_topology(t, tmp_path / "pair.yaml")))
    assert back.npu_spec("a").compute == ASCEND_910B and back.npu_spec("b").compute is None

    def load(compute):
        return topology_from_dict({"name": "t", "npus": [{"name": "a", "compute": compute}], "nodes": [], "links": []})

    assert load({"peak_TFLOPS": {"fp16": 100}, "hbm_GBps": 1000}).npu_spec("a").compute.time_s(1e14, 0) == 1.0
    for bad, msg in (({"peak_TFLOPS": {"fp16": -1}}, r"npus\[0\]: compute.peak_TFLOPS.fp16 = -1"),
                     ({"hbm_GBps": 0}, r"npus\[0\]: compute.hbm_GBps = 0"),
                     ({"flops": 1}, r"npus\[0\]: compute.flops = 1: unknown key"),
                     ({"efficiency": 2}, r"compute.efficiency = 2")):
        with pytest.raises(ConfigError, match=msg):
            load(bad)
    with pytest.raises(ConfigError, match="compute"):
        NpuSpec(compute={"fp16": 1})
