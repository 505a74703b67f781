import pytest
import yaml

import hcsim
from hcsim.errors import ConfigError, TopologyError
from hcsim.topology import (
    LinkSpec,
    NpuSpec,
    Topology,
    atlas800t_a2,
    full_mesh,
    leaf_spine,
    load_topology,
    ring,
    save_topology,
    single_switch,
    torus,
)
from hcsim.topology.summary import bisection_bandwidth_Bps


def test_builders_make_the_expected_graphs():
    assert ring(5, 1e9).graph.number_of_edges() == 10
    assert full_mesh(6, 1e9).graph.number_of_edges() == 30
    s = single_switch(4, 1e9)
    assert s.num_npus == 4 and s.graph.number_of_edges() == 8
    t = torus((4, 4, 2), 1e9)
    assert t.num_npus == 32
    assert all(t.graph.out_degree(n) == 5 for n in t.npus)  # 2 + 2 + 1 (a 2-long dimension)
    ls = leaf_spine(4, 8, 2, 25e9, oversubscription=2.0)
    assert ls.num_npus == 32
    assert ls.link_spec("leaf0", "spine1").bandwidth_Bps == pytest.approx(8 * 25e9 / 2 / 2)


def test_builders_reject_bad_arguments():
    with pytest.raises(ConfigError, match="npus"):
        ring(1, 1e9)
    with pytest.raises(ConfigError, match="bandwidth"):
        full_mesh(4, 0)
    with pytest.raises(ConfigError, match="bandwidth"):
        single_switch(4, -5e9)
    with pytest.raises(ConfigError, match="oversubscription"):
        leaf_spine(2, 2, 1, 1e9, oversubscription=0)
    with pytest.raises(ConfigError, match="dims"):
        torus((4,), 1e9)


def test_atlas800t_a2_parameters_match_facts():
    t = atlas800t_a2()
    assert t.num_npus == 8
    spec = t.link_spec("npu0", "npu5")
    assert spec.tier == "hccs" and spec.bandwidth_Bps == 18.3e9 and spec.inline_reduce
    assert t.link_spec("npu3", "nic3").tier == "roce"
    assert t.defaults.step_overhead_s == pytest.approx(1.02e-6)


def test_builtin_yaml_is_the_builder_with_its_params():
    import yaml as _yaml

    from hcsim.topology.io import builtin_dirs

    for name, builder in (("atlas800t-a2", atlas800t_a2),):
        path = next(d / f"{name}.yaml" for d in builtin_dirs() if (d / f"{name}.yaml").is_file())
        params = _yaml.safe_load(path.read_text())["params"]
        kw = {}
        for k, v in params.items():
            if k.endswith("_GBps"):
                kw[k[:-5] + "_Bps"] = v * 1e9
            elif k.endswith("_us"):
                kw[k[:-3] + "_s"] = v * 1e-6
            else:
                kw[k] = v
        a, b = load_topology(name), builder(**kw)
        assert a.npus == b.npus and a.product == "910B"
        assert {(u, v): d["spec"] for u, v, d in a.graph.edges(data=True)} == \
               {(u, v): d["spec"] for u, v, d in b.graph.edges(data=True)}
        assert a.npu_spec("npu3") == b.npu_spec("npu3")
        assert a.defaults.launch_for("alltoall") == pytest.approx(114.8e-6)
        assert a.defaults.launch_for("broadcast") == pytest.approx(30.1e-6)  # AllReduce's, the default


def test_yaml_round_trip(tmp_path):
    t = leaf_spine(2, 3, 2, 10e9, 2e-6, oversubscription=1.5, reduce_Bps=5e9)
    path = save_topology(t, tmp_path / "t.yaml")
    back = load_topology(path)
    assert back.npus == t.npus
    for u, v, d in t.graph.edges(data=True):
        assert back.link_spec(u, v).bandwidth_Bps == pytest.approx(d["spec"].bandwidth_Bps)
        assert back.link_spec(u, v).latency_s == pytest.approx(d["spec"].latency_s)
    assert back.npu_spec("npu1").reduce_Bps == pytest.approx(5e9)
    r1 = hcsim.simulate(t, "allreduce", "1M", "ring")
    r2 = hcsim.simulate(back, "allreduce", "1M", "ring")
    assert r1.time_s == pytest.approx(r2.time_s, rel=1e-12)


def test_builder_yaml_with_overrides(tmp_path):
    path = tmp_path / "ls.yaml"
    path.write_text(yaml.safe_dump({"name": "ls", "builder": "leaf_spine",
                                    "params": {"leaves": 2, "npus_per_leaf": 4, "spines": 2, "bandwidth_GBps": 25}}))
    assert load_topology(path).num_npus == 8
    assert load_topology(path, leaves=3).num_npus == 12


@pytest.mark.parametrize("doc,needle", [
    ({"name": "x", "npus": [{"name": "a"}], "bogus": 1}, "unknown key 'bogus'"),
    ({"npus": [{"name": "a", "servr": 0}]}, "npus[0]: unknown key 'servr'"),
    ({"npus": [{"name": "a"}, {"name": "b"}], "links": [{"src": "a", "dst": "b", "bandwidth_GBps": 0}]},
     "links[0].bandwidth_GBps = 0"),
    ({"npus": [{"name": "a"}, {"name": "b"}], "links": [{"src": "a", "dst": "b", "bandwidth_GBps": -3}]},
     "links[0].bandwidth_GBps = -3"),
    ({"npus": [{"name": "a"}], "links": [{"src": "a", "dst": "zz", "bandwidth_GBps": 1}]}, "links[0]"),
    ({"npus": [{"name": "a"}, {"name": "b"}], "links": [{"src": "a", "dst": "b", "bandwidth_GBps": 1,
                                                         "tier": "warp"}]}, "tier = 'warp'"),
    ({"builder": "nope"}, "builder = 'nope'"),
    ({"builder": "ring", "params": {"n": 4, "bandwidth_GBps": 1, "colour": 3}}, "params.colour"),
    ({"npus": [{"name": "a", "reduce_GBps": "fast"}]}, "reduce_GBps"),
    ("just a string", "expected a mapping"),
])
def test_bad_yaml_one_line_naming_file_and_field(tmp_path, doc, needle):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError) as exc:
        load_topology(path)
    msg = str(exc.value)
    assert "\n" not in msg and str(path) in msg and needle in msg


def test_malformed_yaml_and_unknown_name(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("name: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_topology(path)
    with pytest.raises(ConfigError, match="built-in: .*atlas800t-a2"):
        load_topology("no-such-topology")


def test_routing_ecmp_is_deterministic_and_spray_uses_every_spine():
    t = leaf_spine(2, 2, 4, 1e9)
    net = t.compiled()
    a, b = net.node_index["npu0"], net.node_index["npu3"]
    assert net.route(a, b, "ecmp") == net.route(a, b, "ecmp")
    assert len(net.route(a, b, "ecmp")) == 1
    assert len(net.route(a, b, "spray")) == 4
    # a torus pair two hops apart in two dimensions has two shortest paths
    tor = torus((4, 4), 1e9).compiled()
    assert len(tor.route(tor.node_index["npu0"], tor.node_index["npu5"], "spray")) == 2


def test_unreachable_ranks_are_reported():
    t = Topology("split")
    for n in "abc":
        t.add_npu(n)
    t.add_link("a", "b", LinkSpec(1e9))
    with pytest.raises(TopologyError, match="unreachable"):
        hcsim.simulate(t, "allgather", "1K", "ring")


def test_ranks_selection_errors():
    t = atlas800t_a2()
    assert t.resolve_ranks(4) == ["npu0", "npu1", "npu2", "npu3"]
    assert t.resolve_ranks(["npu7", 0]) == ["npu7", "npu0"]
    for bad in (1, 9, ["npu9"], [0, 0], [42]):
        with pytest.raises(ConfigError, match="ranks"):
            t.resolve_ranks(bad)


def test_npu_spec_validation():
    with pytest.raises(ConfigError, match="half_duplex"):
        NpuSpec(half_duplex=True)
    with pytest.raises(ConfigError, match="injection_bandwidth"):
        NpuSpec(injection_Bps=0)


def test_bisection_bandwidth():
    # full mesh of 4 at 1 GB/s: 2 x 2 links cross the halves in one direction
    assert bisection_bandwidth_Bps(full_mesh(4, 1e9)) == pytest.approx(4e9)
    # 2:1 oversubscribed leaf-spine, 2 leaves x 4 NPUs at 1 GB/s: uplinks carry 2 GB/s per leaf
    assert bisection_bandwidth_Bps(leaf_spine(2, 4, 1, 1e9, oversubscription=2)) == pytest.approx(2e9)
