"""The input contract for topologies: any YAML file, builder call, spec or Topology edit gives
a topology or one HcsimError line naming the file and field; nothing else escapes, nothing
hangs, and a builder refuses a size beyond hcsim.limits before it builds."""

from __future__ import annotations

import copy
import math
import tempfile
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hcsim
from hcsim.errors import HcsimError, TopologyError, WorkLimitError
from hcsim.limits import MAX_LINKS, MAX_NPUS
from hcsim.topology import (
    ExecutionDefaults,
    LinkSpec,
    NpuSpec,
    Topology,
    atlas800_9000,
    atlas800t_a2,
    atlas900_a2_pod,
    atlas900_a3_superpod,
    full_mesh,
    leaf_spine,
    load_topology,
    ring,
    save_topology,
    single_switch,
    tiered_mesh,
    torus,
)
from hcsim.topology.io import builtin_dirs, scale_parameter, topology_from_dict

BUILTIN = sorted({p.name: p for d in builtin_dirs() for p in d.glob("*.yaml")}.values())


def one_line(call, *needles, kind=HcsimError):
    """``call()`` must raise ``kind`` (an HcsimError) whose message is one line holding every needle."""
    with pytest.raises(HcsimError) as info:
        call()
    assert isinstance(info.value, kind), type(info.value)
    text = str(info.value)
    assert text and "\n" not in text and "\r" not in text, text
    for needle in needles:
        assert needle in text, text
    return text


def write(tmp_path, content, name="u.yaml") -> Path:
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


RING = "builder: ring\nparams: {n: 4, bandwidth_GBps: 1}\n"
PAIR = "npus: [{name: a}, {name: b}]\n"


def laughs(levels=8):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


# ---- 1. YAML files ------------------------------------------------------------------------

BAD_FILES = [
    # (content, needles: the field path and what is wrong)
    (b"name: x\n\xff\n", ["not UTF-8", "line 2"]),
    (b"\x00\x01\x02binary", ["not valid YAML"]),
    ("name: [unclosed\n", ["not valid YAML", "line 2"]),
    ("name:\tx\n\t- a\n", ["not valid YAML"]),
    ("", ["document = None (an empty file)", "expected a mapping"]),
    ("- 1\n- 2\n", ["document = [1, 2]", "expected a mapping"]),
    ("just a string\n", ["document = 'just a string'", "expected a mapping"]),
    ("1: 2\nbuilder: ring\n", ["document: key 1", "strings"]),
    ("builder: [ring]\n", ["builder = ['ring']", "known: "]),
    ("builder: ring\nparams: 1.5\n", ["params = 1.5", "mapping"]),
    ("builder: ring\nparams: {1: 2}\n", ["params: key 1"]),
    ("builder: ring\nparams: [n, 4]\n", ["params = ['n', 4]"]),
    (RING + "provenance: [1]\n", ["provenance = [1]", "mapping"]),
    (RING + "provenance: {1: x}\n", ["provenance: key 1"]),
    (RING + "product: [1]\n", ["product = [1]", "910B"]),
    (RING + "product: 910C\n", ["product = '910C'"]),
    (RING + "name: [a]\n", ["name = ['a']"]),
    (RING + "description: 5\n", ["description = 5"]),
    (RING + "npus: []\n", ["'npus' cannot be used with 'builder'"]),
    (RING + "bogus: 1\n", ["unknown key 'bogus'"]),
    ("npus: 5\n", ["npus = 5: a list"]),
    ("npus: {a: 1}\n", ["npus = {'a': 1}: a list"]),
    (PAIR + "links: 5\n", ["links = 5: a list"]),
    (PAIR + "nodes: [5]\n", ["nodes[0] = 5", "mapping"]),
    (PAIR + "nodes: [{kind: switch}]\n", ["nodes[0]: missing key 'name'"]),
    (PAIR + "nodes: [{name: s, kind: [x]}]\n", ["nodes[0].kind = ['x']"]),
    (PAIR + "nodes: [{name: s, kind: npu}]\n", ["nodes[0].kind = 'npu'"]),
    ("npus: [5]\n", ["npus[0] = 5", "mapping"]),
    ("npus: [{server: 0}]\n", ["npus[0]: missing key 'name'"]),
    ("npus: [{name: a, server: x}]\n", ["npus[0].server = 'x'", "integer"]),
    ("npus: [{name: a, server: 1.5}]\n", ["npus[0].server = 1.5"]),
    ("npus: [{name: a, server: true}]\n", ["npus[0].server = True"]),
    ("npus: [{name: a, server: -1}]\n", ["npus[0].server = -1"]),
    ("npus: [{name: a, pod: 1000000000000}]\n", ["npus[0].pod = 1000000000000"]),
    ("npus: [{name: a, half_duplex: 'no'}]\n", ["npus[0].half_duplex = 'no'", "true or false"]),
    ("npus: [{name: a, half_duplex: true}]\n", ["npus[0]: half_duplex = True"]),
    ("npus: [{name: a, reduce_GBps: fast}]\n", ["npus[0].reduce_GBps = 'fast'"]),
    ("npus: [{name: a, injection_GBps: .nan}]\n", ["npus[0].injection_GBps = nan"]),
    ("npus: [{name: a, injection_GBps: [1]}]\n", ["npus[0].injection_GBps = [1]"]),
    ("npus: [{name: [a]}]\n", ["npus[0].name = ['a']"]),
    ("npus: [{name: a}, {name: a}]\n", ["npus[1]: node name = 'a'", "unique"]),
    ("npus: []\n", ["npus: at least one NPU"]),
    (PAIR + "links: [{src: a, dst: b}]\n", ["links[0]: missing key 'bandwidth_GBps'"]),
    (PAIR + "links: [{src: a, dst: zz, bandwidth_GBps: 1}]\n", ["links[0]: link end = 'zz'"]),
    (PAIR + "links: [{src: a, dst: a, bandwidth_GBps: 1}]\n", ["links[0]: link = 'a->a'"]),
    (PAIR + "links: [{src: [a], dst: b, bandwidth_GBps: 1}]\n", ["links[0].src = ['a']"]),
    (PAIR + "links: [{src: a, dst: b, bandwidth_GBps: true}]\n", ["links[0].bandwidth_GBps = True"]),
    (PAIR + "links: [{src: a, dst: b, bandwidth_GBps: 1, latency_us: -1}]\n", ["links[0].latency_us = -1"]),
    (PAIR + "links: [{src: a, dst: b, bandwidth_GBps: 1, tier: [x]}]\n", ["links[0].tier = ['x']"]),
    (PAIR + "links: [{src: a, dst: b, bandwidth_GBps: 1, bidirectional: 'yes'}]\n",
     ["links[0].bidirectional = 'yes'"]),
    (PAIR + "links: [{src: a, dst: b, bandwidth_GBps: 1}, {src: b, dst: a, bandwidth_GBps: 1}]\n",
     ["links[1]: link = 'b->a'", "twice"]),
    (PAIR + "defaults: [1]\n", ["defaults = [1]", "mapping"]),
    (PAIR + "defaults: {step_overhead_us: true}\n", ["defaults.step_overhead_us = True"]),
    (PAIR + "defaults: {step_overhead_us: .nan}\n", ["defaults.step_overhead_us = nan"]),
    (PAIR + "defaults: {launch_overhead_us: .inf}\n", ["defaults.launch_overhead_us = inf"]),
    (PAIR + "defaults: {launch_overhead_us: -3}\n", ["defaults.launch_overhead_us = -3"]),
    (PAIR + "defaults: {expansion_mode: [HOST]}\n", ["defaults.expansion_mode = ['HOST']"]),
    (PAIR + "defaults: {modes: [AIV]}\n", ["defaults.modes = ['AIV']"]),
    (PAIR + "defaults: {modes: {AIV: 5}}\n", ["defaults.modes.AIV = 5"]),
    (PAIR + "defaults: {modes: {FAST: {}}}\n", ["defaults.modes: unknown key 'FAST'"]),
    (PAIR + "defaults: {modes: {AIV: {step_overhead_us: x}}}\n", ["defaults.modes.AIV.step_overhead_us = 'x'"]),
    (PAIR + "defaults: {launch_overhead_by_collective_us: 5}\n", ["defaults.launch_overhead_by_collective_us = 5"]),
    (PAIR + "defaults: {launch_overhead_by_collective_us: {allreduce: x}}\n",
     ["defaults.launch_overhead_by_collective_us.allreduce = 'x'"]),
    (PAIR + "defaults: {launch_overhead_by_collective_us: {allreduc: 1}}\n", ["unknown key 'allreduc'", "allreduce"]),
    (PAIR + "defaults: {message_regimes: {a: 1}}\n", ["defaults.message_regimes = {'a': 1}"]),
    (PAIR + "defaults: {message_regimes: []}\n", ["defaults.message_regimes = []"]),
    (PAIR + "defaults: {message_regimes: [5]}\n", ["defaults.message_regimes[0] = 5"]),
    (PAIR + "defaults: {message_regimes: [{efficiency: 1.0}]}\n", ["message_regimes[0]: missing key 'from_bytes'"]),
    (PAIR + "defaults: {message_regimes: [{from_bytes: 0}, {from_bytes: " + "9" * 60 + "}]}\n",
     ["defaults.message_regimes[1].from_bytes = 9999"]),
    (PAIR + "defaults: {message_regimes: [{from_bytes: 0.0}]}\n", ["defaults.message_regimes[0].from_bytes = 0.0"]),
    (PAIR + "defaults: {message_regimes: [{from_bytes: 5}]}\n", ["message_regimes[0].from_bytes = 5"]),
    (PAIR + "defaults: {message_regimes: [{from_bytes: 0}, {from_bytes: 0}]}\n", ["message_regimes[1].from_bytes = 0"]),
    (PAIR + "defaults: {message_regimes: [{from_bytes: 0, efficiency: 1.0e-300}]}\n",
     ["defaults.message_regimes[0].efficiency = 1e-300"]),
    (PAIR + "defaults: {message_regimes: [{from_bytes: 0, pair_limit: 3}]}\n", ["message_regimes[0].pair_limit = 3"]),
    (PAIR + "defaults: {message_regimes: [{from_bytes: 0, overhead_when: [x]}]}\n",
     ["message_regimes[0].overhead_when = ['x']"]),
    # builder form: parameters as the user wrote them, allowed names in file units
    ("builder: ring\nparams: {n: 4, bandwith_GBps: 1}\n",
     ["params.bandwith_GBps = 1", "did you mean 'bandwidth_GBps'", "latency_us"]),
    ("builder: ring\nparams: {n: 4, bandwidth_Bps: 1}\n", ["params.bandwidth_Bps = 1", "write bandwidth_GBps"]),
    ("builder: ring\nparams: {n: 4}\n", ["params: builder 'ring' needs bandwidth_GBps"]),
    ("builder: ring\nparams: {n: 4, bandwidth_GBps: x}\n", ["params.bandwidth_GBps = 'x'", "a number of GB/s > 0"]),
    ("builder: ring\nparams: {n: 4, bandwidth_GBps: true}\n", ["params.bandwidth_GBps = True"]),
    ("builder: ring\nparams: {n: 4, bandwidth_GBps: .nan}\n", ["params.bandwidth_GBps = nan"]),
    ("builder: ring\nparams: {n: 4, bandwidth_GBps: .inf}\n", ["params.bandwidth_GBps = inf"]),
    ("builder: ring\nparams: {n: 4, bandwidth_GBps: -1}\n", ["params.bandwidth_GBps = -1"]),
    ("builder: ring\nparams: {n: 4, bandwidth_GBps: 1.0e-320}\n", ["params.bandwidth_GBps = 1e-320"]),
    ("builder: ring\nparams: {n: 4, bandwidth_GBps: 1.0e+308}\n", ["params.bandwidth_GBps = 1e+308"]),
    ("builder: ring\nparams: {n: 4, bandwidth_GBps: 1e9}\n", ["params.bandwidth_GBps = '1e9'", "as text"]),
    ("builder: ring\nparams: {n: 4, bandwidth_GBps: [1]}\n", ["params.bandwidth_GBps = [1]"]),
    ("builder: ring\nparams: {n: 4, bandwidth_GBps: " + "1" * 400 + "}\n", ["params.bandwidth_GBps = 1111"]),
    ("builder: ring\nparams: {n: 4.5, bandwidth_GBps: 1}\n", ["params.n = 4.5", "integer"]),
    ("builder: ring\nparams: {n: '4', bandwidth_GBps: 1}\n", ["params.n = '4'"]),
    ("builder: ring\nparams: {n: true, bandwidth_GBps: 1}\n", ["params.n = True"]),
    ("builder: ring\nparams: {n: 4, bandwidth_GBps: 1, tier: warp}\n", ["params.tier = 'warp'"]),
    ("builder: ring\nparams: {n: 4, bandwidth_GBps: 1, bidirectional: 2}\n", ["params.bidirectional = 2"]),
    ("builder: ring\nparams: {n: 4, bandwidth_GBps: 1, half_duplex: true}\n", ["half_duplex = True"]),
    ("builder: ring\nparams: {n: 4, bandwidth_GBps: 1, reduce_GBps: 0}\n", ["params.reduce_GBps = 0"]),
    ("builder: torus\nparams: {dims: '22', bandwidth_GBps: 1}\n", ["params.dims = '22'"]),
    ("builder: torus\nparams: {dims: [2, 2, 2, 2, 2, 2], bandwidth_GBps: 1}\n", ["params.dims = (2, 2, 2, 2)"]),
    ("builder: torus\nparams: {dims: {a: 2}, bandwidth_GBps: 1}\n", ["params.dims = {'a': 2}"]),
    ("builder: tiered_mesh\nparams: {dims: [2, 2], bandwidth_GBps: [20, x]}\n", ["params.bandwidth_GBps[1] = 'x'"]),
    ("builder: leaf_spine\nparams: {leaves: 2, npus_per_leaf: 2, spines: 1, bandwidth_GBps: 1, oversubscription: .nan}\n",
     ["params.oversubscription = nan"]),
    ("builder: atlas800t_a2\nparams: {npus_per_server: 1}\n", ["params.npus_per_server = 1"]),
    ("builder: atlas800t_a2\nparams: {endpoint_bandwidth_GBps: x}\n", ["params.endpoint_bandwidth_GBps = 'x'"]),
    ("builder: atlas900_a3_superpod\nparams: {nodes: 100}\n", ["params.nodes = 100", "at most 48"]),
]


@pytest.mark.parametrize("content,needles", BAD_FILES, ids=range(len(BAD_FILES)))
def test_bad_file_is_one_line_naming_the_file_and_field(tmp_path, content, needles):
    path = write(tmp_path, content)
    one_line(lambda: load_topology(path), str(path), *needles)


WORK_FILES = [
    (laughs(), ["aliases expand to more than"]),
    ("a: &a [x, *a]\n", ["alias refers to a value that contains it"]),
    ("builder: ring\nparams: {n: 1000000000, bandwidth_GBps: 1}\n", ["params.n = 1000000000", f"{MAX_NPUS:,}"]),
    ("builder: full_mesh\nparams: {n: 2000, bandwidth_GBps: 1}\n", ["params.n = 2000", f"{MAX_LINKS:,}"]),
    ("builder: ring\nparams: {n: " + "1" * 400 + ", bandwidth_GBps: 1}\n", ["about 10^399 NPUs"]),
]


def count_links_built(monkeypatch) -> list:
    """Counts the links any graph gets while the test runs (a refusal "at once" builds none of
    the requested topology: a count, not a clock, so the check holds on a loaded machine)."""
    added = []
    real = nx.DiGraph.add_edge
    monkeypatch.setattr(nx.DiGraph, "add_edge", lambda self, *a, **k: added.append(1) or real(self, *a, **k))
    return added


@pytest.mark.parametrize("content,needles", WORK_FILES, ids=range(len(WORK_FILES)))
def test_oversized_file_is_refused_at_once(tmp_path, content, needles, monkeypatch):
    path = write(tmp_path, content)
    added = count_links_built(monkeypatch)
    one_line(lambda: load_topology(path), str(path), *needles, kind=WorkLimitError)
    assert len(added) <= 1000  # refused before the oversized graph is built


@pytest.mark.parametrize("content,needle", [
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),  # libyaml's own composer would crash the process
    ("name: 2001-02-30\n", "cannot be read"),
    ("name: !!python/object:os.system {}\n", "not valid YAML"),
    ("n: " + "1" * 5000 + "\n", "cannot be read"),
    ("name: a\x00b\n", "not valid YAML"),
    ("npus: [{name: a, <<: 5}]\n", "not valid YAML"),
    ("? [a, b]\n: 1\n", "not valid YAML"),
])
def test_unreadable_yaml_is_one_line(tmp_path, content, needle):
    path = write(tmp_path, content)
    one_line(lambda: load_topology(path), str(path), needle)


def test_nesting_limit_of_newer_libyaml_reads_as_nested_too_deeply(tmp_path, monkeypatch):
    """libyaml 0.2.6 and later stop a document at 1,000 levels themselves, with their own words
    ("exceeded maximum nesting depth"): the message is the same whichever libyaml a machine has."""
    from hcsim.topology import io

    def deep(text):
        raise yaml.parser.ParserError(None, None, "exceeded maximum nesting depth",
                                      yaml.Mark("u", 1000, 0, 1000, None, None))
    monkeypatch.setattr(io, "_fast_document", deep)
    path = write(tmp_path, "[" * 2000 + "]" * 2000)
    one_line(lambda: load_topology(path), str(path), "line 1, column 1001", "nested too deeply")


def test_paths_that_are_not_files(tmp_path):
    one_line(lambda: load_topology(tmp_path), "a directory")
    one_line(lambda: load_topology(tmp_path / "missing.yaml"), "missing.yaml", "not a built-in name")
    one_line(lambda: load_topology("a\x00b"), "not a built-in name")
    one_line(lambda: load_topology("x" * 5000), "5002 chars")
    one_line(lambda: load_topology("../topologies/atlas800t-a2"), "not a built-in name")
    for bad in (5, None, b"atlas800t-a2", ["atlas800t-a2"], 1.5):
        one_line(lambda bad=bad: load_topology(bad), "topology = ")
    one_line(lambda: topology_from_dict({"npus": [{"name": "a"}]}, tmp_path / "w.yaml", servers=2), "servers = 2")


def test_alias_that_stays_small_is_fine(tmp_path):
    path = write(tmp_path, "npus: [&n {name: a}, {<<: *n, name: b}]\n"
                           "links: [&l {src: a, dst: b, bandwidth_GBps: 1}]\n")
    assert load_topology(path).num_npus == 2


def test_yaml_that_is_too_large_is_refused(tmp_path, monkeypatch):
    import hcsim.topology.io as io

    monkeypatch.setattr(io, "MAX_FILE_BYTES", 100)
    path = write(tmp_path, RING + "# " + "x" * 200 + "\n")
    one_line(lambda: load_topology(path), "larger than", kind=WorkLimitError)
    monkeypatch.setattr(io, "MAX_FILE_BYTES", 64 << 20)
    monkeypatch.setattr(io, "MAX_YAML_NODES", 50)
    path = write(tmp_path, "provenance: {x: [" + ", ".join(["1"] * 60) + "]}\n" + RING)
    one_line(lambda: load_topology(path), "more than 50 values", kind=WorkLimitError)


def test_topology_from_dict_takes_any_python_object():
    for doc in (None, 5, [1], {1: 2}, {"npus": set()}, {"npus": [{"name": "a", "server": np.int64(1)}]},
                {"npus": [{"name": "a"}], "defaults": {"step_overhead_us": np.float64(1.0)}}):
        try:
            t = topology_from_dict(doc, "d")
        except HcsimError as exc:
            assert "\n" not in str(exc) and str(exc).startswith("d: ")
        else:
            assert isinstance(t, Topology)


# ---- 2. servers= on every topology --------------------------------------------------------

@pytest.mark.parametrize("name,servers,npus", [
    ("atlas900-a2-pod", 2, 16), ("atlas800-9000", 3, 24), ("atlas900-a3-superpod", 2, 32), ("atlas800t-a2", 1, 8),
])
def test_servers_maps_onto_each_builders_scale_parameter(name, servers, npus):
    t = load_topology(name, servers=servers)
    assert t.num_npus == npus
    assert len({(t.npu_spec(n).pod, t.npu_spec(n).server) for n in t.npus}) == servers


def test_scale_parameter():
    assert scale_parameter("atlas900-a2-pod") == "servers"
    assert scale_parameter("atlas800-9000") == "servers"
    assert scale_parameter("atlas900-a3-superpod") == "nodes"
    assert scale_parameter("atlas800t-a2") is None
    assert scale_parameter(ring(4, 1e9)) is None
    one_line(lambda: scale_parameter("nowhere"), "topology = 'nowhere'")


@pytest.mark.parametrize("source,kw,needles", [
    ("atlas800t-a2", {"servers": 4}, ["servers = 4: topology 'atlas800t-a2' is one fixed server",
                                      "use atlas900-a2-pod"]),
    ("atlas900-a3-superpod", {"servers": 100}, ["servers = 100 (the builder's nodes): at most 48"]),
    ("atlas900-a3-superpod", {"servers": 2, "nodes": 3}, ["servers = 2", "give one"]),
    ("atlas900-a2-pod", {"servers": 0}, ["servers = 0", "integer"]),
    ("atlas900-a2-pod", {"servers": "2"}, ["servers = '2'"]),
    ("atlas900-a2-pod", {"servers": True}, ["servers = True"]),
    ("atlas900-a2-pod", {"servers": 2.0}, ["servers = 2.0"]),
    ("atlas900-a2-pod", {"servers": 2, "hccs_bandwidth_GBps": float("nan")}, ["overrides.hccs_bandwidth_GBps = nan"]),
    ("atlas900-a2-pod", {"servers": 2, "hccs_bandwidth_Bps": 0}, ["overrides.hccs_bandwidth_Bps = 0"]),
    ("atlas900-a2-pod", {"bandwidth_GBps": 3}, ["overrides.bandwidth_GBps = 3", "did you mean"]),
    ("atlas900-a2-pod", {"hccs_bandwidth_GBps": 3, "hccs_bandwidth_Bps": 3e9}, ["overridden twice"]),
    ("atlas900-a2-pod", {"spines": 1.5}, ["overrides.spines = 1.5"]),
])
def test_servers_and_overrides_refused_in_one_line(source, kw, needles):
    one_line(lambda: load_topology(source, **kw), *needles)


def test_servers_on_topologies_that_cannot_scale(tmp_path):
    path = write(tmp_path, RING)
    one_line(lambda: load_topology(path, servers=4), "servers = 4", "builder ring has no server count")
    assert load_topology(path, servers=1).num_npus == 4  # it has one server already
    explicit = save_topology(atlas900_a2_pod(servers=2), tmp_path / "pod.yaml")
    one_line(lambda: load_topology(explicit, servers=3), "servers = 3", "cannot be scaled")
    assert load_topology(explicit, servers=2).num_npus == 16
    one_line(lambda: load_topology(ring(4, 1e9), servers=2), "overrides = ['servers']")


def test_servers_refuses_beyond_the_limit_at_once(monkeypatch):
    added = count_links_built(monkeypatch)
    one_line(lambda: load_topology("atlas900-a2-pod", servers=10_000), "servers = 10000", "80,000 NPUs",
             kind=WorkLimitError)
    assert added == []  # refused before building


# ---- 3. builders ------------------------------------------------------------------------

BAD_CALLS = [
    (ring, (1, 1e9), {}, "n = 1"), (ring, (4.0, 1e9), {}, "n = 4.0"), (ring, (True, 1e9), {}, "n = True"),
    (ring, ("4", 1e9), {}, "n = '4'"), (ring, (4, "1e9"), {}, "bandwidth_Bps = '1e9'"),
    (ring, (4, float("nan")), {}, "bandwidth_Bps = nan"), (ring, (4, float("inf")), {}, "bandwidth_Bps = inf"),
    (ring, (4, True), {}, "bandwidth_Bps = True"), (ring, (4, 1e9, -1), {}, "latency_s = -1"),
    (ring, (4, 1e9), {"bidirectional": "no"}, "bidirectional = 'no'"), (ring, (4, 1e9), {"tier": 5}, "tier = 5"),
    (ring, (4, 1e9), {"npus_per_server": 0}, "npus_per_server = 0"),
    (ring, (4, 1e9), {"server": 3}, "server = 3"), (ring, (4, 1e9), {"reduce_Bps": "x"}, "reduce_bandwidth = 'x'"),
    (full_mesh, (4, 0), {}, "bandwidth_Bps = 0"), (full_mesh, (4, 1e9), {"inline_reduce": 1}, "inline_reduce = 1"),
    (full_mesh, (4, 1e-320), {}, "bandwidth_Bps = 1e-320"), (full_mesh, (4, 1e9, 1e300), {}, "latency_s = 1e+300"),
    (single_switch, (4, -5e9), {}, "bandwidth_Bps = -5000000000.0"),
    (leaf_spine, (2, 2, 1, 1e9), {"oversubscription": 0}, "oversubscription = 0"),
    (leaf_spine, (2, 2, 1, 1e9), {"oversubscription": float("nan")}, "oversubscription = nan"),
    (leaf_spine, (2, 2, 1, 1e9), {"oversubscription": 1e-300}, "oversubscription = 1e-300"),
    (leaf_spine, (2, 2.0, 1, 1e9), {}, "npus_per_leaf = 2.0"), (leaf_spine, (1, 1, 1, 1e9), {}, "at least 2 NPUs"),
    (torus, ((4,), 1e9), {}, "dims = (4,)"), (torus, ("44", 1e9), {}, "dims = '44'"), (torus, (5, 1e9), {}, "dims = 5"),
    (torus, ((2.0, 2.0), 1e9), {}, "dims = (2.0, 2.0)"), (torus, ((True, 2), 1e9), {}, "dims = (True, 2)"),
    (torus, (object, 1e9), {}, "dims = "), (torus, (range(2, 10**12), 1e9), {}, "dims = (2, 3, 4, 5)"),
    (tiered_mesh, ((1, 1), 1e9), {}, "at least 2 NPUs"), (tiered_mesh, ((2, 2), (1e9,)), {}, "bandwidth_Bps = (1000"),
    (tiered_mesh, ((2, 2), (1e9, "x")), {}, "bandwidth_Bps[1] = 'x'"),
    (tiered_mesh, ((2, 2), 1e9), {"inline_reduce": (True, 2)}, "inline_reduce[1] = 2"),
    (atlas800t_a2, (), {"npus_per_server": 1}, "npus_per_server = 1"),
    (atlas800t_a2, (), {"hccs_bandwidth_Bps": "fast"}, "hccs_bandwidth_Bps = 'fast'"),
    (atlas800t_a2, (), {"roce_latency_s": float("nan")}, "roce_latency_s = nan"),
    (atlas800t_a2, (), {"endpoint_bandwidth_Bps": 0}, "endpoint_bandwidth_Bps = 0"),
    (atlas800t_a2, (), {"step_overhead_s": -1}, "step_overhead_s = -1"),
    (atlas900_a2_pod, (), {"servers": 0}, "servers = 0"), (atlas900_a2_pod, (), {"servers": 2.5}, "servers = 2.5"),
    (atlas900_a2_pod, (), {"servers": 2, "spines": None}, "spines = None"),
    (atlas900_a2_pod, (), {"servers": 2, "oversubscription": float("inf")}, "oversubscription = inf"),
    (atlas900_a2_pod, (), {"servers": 2, "switch_latency_s": "1"}, "switch_latency_s = '1'"),
    (atlas800_9000, (), {"servers": -1}, "servers = -1"), (atlas800_9000, (), {"reduce_Bps": None}, "reduce_Bps = None"),
    (atlas900_a3_superpod, (), {"nodes": 49}, "nodes = 49"), (atlas900_a3_superpod, (), {"nodes": 1.0}, "nodes = 1.0"),
    (atlas900_a3_superpod, (), {"nodes": 1, "npus_per_node": 10**6}, "npus_per_node = 1000000"),
    (atlas900_a3_superpod, (), {"nodes": 1, "ub_bandwidth_Bps": [1]}, "ub_bandwidth_Bps = [1]"),
]


@pytest.mark.parametrize("fn,args,kw,needle", BAD_CALLS, ids=range(len(BAD_CALLS)))
def test_builder_arguments_are_checked_by_name(fn, args, kw, needle):
    one_line(lambda: fn(*args, **kw), needle)


HUGE = [
    (full_mesh, (100_000, 1e9), {}), (ring, (10**9, 1e9), {}), (ring, (10**400, 1e9), {}),
    (single_switch, (2**63, 1e9), {}), (leaf_spine, (10**5, 10**5, 10**5, 1e9), {}),
    (torus, ((1000, 1000, 1000), 1e9), {}), (tiered_mesh, ((8, 2048, 100), 1e9), {}),
    (atlas800t_a2, (), {"npus_per_server": 3000}), (atlas900_a2_pod, (), {"servers": 100_000}),
    (atlas900_a2_pod, (), {"servers": 2, "spines": 10**6}), (atlas800_9000, (), {"servers": 10**6}),
    (atlas900_a3_superpod, (), {"nodes": 48, "superpods": 10**5}),
    (atlas900_a3_superpod, (), {"nodes": 1, "l2_switches": 10**7}),
]


@pytest.mark.parametrize("fn,args,kw", HUGE, ids=range(len(HUGE)))
def test_builders_refuse_beyond_the_limits_before_building(fn, args, kw, monkeypatch):
    added = count_links_built(monkeypatch)
    text = one_line(lambda: fn(*args, **kw), "would make", "at most", "hcsim.limits.MAX_", kind=WorkLimitError)
    assert text.split(" = ")[0].isidentifier()  # it starts by naming an argument
    assert added == []  # refused before building


SMALL = [
    (ring, (2, 1e9), {}), (ring, (2, 1e9), {"bidirectional": False}), (ring, (5, 1e9), {"bidirectional": False}),
    (full_mesh, (5, 1e9), {}), (single_switch, (3, 1e9), {}), (leaf_spine, (3, 2, 2, 1e9), {}),
    (torus, ((2, 3), 1e9), {}), (torus, ((3, 2, 4), 1e9), {}), (tiered_mesh, ((3, 2), 1e9), {}),
    (tiered_mesh, ((2, 3, 2), 1e9), {}), (atlas800t_a2, (), {"npus_per_server": 3}),
    (atlas900_a2_pod, (), {"servers": 5, "servers_per_leaf": 2, "spines": 3}),
    (atlas800_9000, (), {}), (atlas800_9000, (), {"servers": 5, "servers_per_leaf": 2, "spines": 3}),
    (atlas900_a3_superpod, (), {"nodes": 2}),
    (atlas900_a3_superpod, (), {"nodes": 3, "npus_per_node": 2, "superpods": 3, "l2_switches": 2, "spines": 3}),
]


@pytest.mark.parametrize("fn,args,kw", SMALL, ids=range(len(SMALL)))
def test_size_estimates_are_exact(fn, args, kw, monkeypatch):
    import hcsim.topology.ascend as ascend
    import hcsim.topology.builders as builders

    seen = []
    real = builders.check_size

    def spy(builder, what, npus, nodes, links):
        seen.append((npus, nodes, links))
        return real(builder, what, npus, nodes, links)

    monkeypatch.setattr(builders, "check_size", spy)
    monkeypatch.setattr(ascend, "check_size", spy)
    t = fn(*args, **kw)
    assert seen == [(t.num_npus, t.graph.number_of_nodes(), t.graph.number_of_edges())]


def test_numpy_numbers_are_accepted_and_stored_as_python_ones():
    t = ring(np.int64(4), np.float64(1e9), latency_s=np.float32(1e-6), npus_per_server=np.int64(2))
    spec = t.link_spec("npu0", "npu1")
    assert type(spec.bandwidth_Bps) is float and type(t.npu_spec("npu3").server) is int
    assert t.npu_spec("npu3").server == 1
    assert torus(np.array([2, 3]), 1e9).num_npus == 6


def test_a_2048_server_pod_still_builds():
    t = atlas900_a2_pod(servers=2048)
    assert t.num_npus == 16_384


# ---- 4. editing a topology after it was compiled --------------------------------------------

def test_edits_after_a_simulation_are_seen():
    t = full_mesh(4, 1e9)
    before = hcsim.simulate(t, "allgather", "1M", "ring").time_s
    t.graph.edges["npu1", "npu2"]["spec"] = LinkSpec(0.5e9)  # replace one direction's spec
    slower = hcsim.simulate(t, "allgather", "1M", "ring").time_s
    assert slower > before * 1.5
    t.graph.edges["npu1", "npu2"]["spec"] = LinkSpec(1e9)
    assert hcsim.simulate(t, "allgather", "1M", "ring").time_s == pytest.approx(before, rel=1e-12)
    t.graph.remove_edge("npu1", "npu2")  # npu1 -> npu2 now goes through a third NPU
    rerouted = t.compiled()
    assert rerouted.num_links == 11
    a, b = rerouted.node_index["npu1"], rerouted.node_index["npu2"]
    assert len(rerouted.route(a, b)) == 1 and rerouted.paths.res_ptr[-1] - rerouted.paths.res_ptr[-2] == 2
    t.graph.nodes["npu0"]["spec"] = NpuSpec(injection_Bps=1e3)
    assert 1e3 in t.compiled().capacity_Bps.tolist()


def test_the_compiled_view_is_reused_while_nothing_changes():
    t = leaf_spine(2, 2, 2, 1e9)
    c = t.compiled()
    assert t.compiled() is c
    t.graph.add_edge("npu0", "npu1", spec=LinkSpec(1e9))  # networkx calls count too
    assert t.compiled() is not c and t.compiled().num_links == c.num_links + 1
    moved = copy.deepcopy(t)  # a copy compiles on its own
    moved.graph.remove_edge("npu0", "npu1")
    assert moved.compiled().num_links == c.num_links and t.compiled().num_links == c.num_links + 1


@pytest.mark.parametrize("edit,needle", [
    (lambda g: g.add_edge("npu0", "npu2"), "link npu0->npu2: needs a LinkSpec"),
    (lambda g: g.add_edge("npu0", "npu2", spec=5), "has int"),
    (lambda g: g.add_edge("npu0", "npu0", spec=LinkSpec(1e9)), "two different nodes"),
    (lambda g: g.add_node("x"), "node 'x': kind = None"),
    (lambda g: g.add_node("x", kind="router"), "kind = 'router'"),
    (lambda g: g.add_node(7, kind="switch"), "node 7: node names are non-empty strings"),
    (lambda g: g.add_node("x", kind="npu"), "an NPU needs an NpuSpec"),
    (lambda g: g.nodes["npu1"].update(spec="fast"), "node 'npu1': an NPU needs an NpuSpec"),
])
def test_edits_that_break_the_graph_are_one_line(edit, needle):
    t = ring(4, 1e9)
    hcsim.simulate(t, "allreduce", "1K", "ring")
    edit(t.graph)
    one_line(lambda: hcsim.simulate(t, "allreduce", "1K", "ring"), needle, kind=TopologyError)
    one_line(t.compiled, needle)


def test_a_graph_replaced_by_something_else_is_refused():
    t = ring(4, 1e9)
    t.graph = nx.MultiDiGraph(t.graph)
    one_line(t.compiled, "graph = 'MultiDiGraph'")
    t.graph = {"not": "a graph"}
    one_line(lambda: t.npus, "graph = 'dict'")
    assert "Topology(" in repr(t)


def test_routes_of_any_length_and_summaries_of_edited_graphs():
    from hcsim.topology.summary import summarize

    net = ring(20_000, 1e9).compiled()  # a path of 10,000 hops, both ways round
    paths = net.route(net.node_index["npu0"], net.node_index["npu10000"], "spray")
    assert len(paths) == 2 and net.paths.res_ptr[-1] - net.paths.res_ptr[-2] == 10_000
    t = ring(4, 1e9)
    assert summarize(t)["npus"] == 4
    t.graph.add_edge("npu0", "npu2")
    one_line(lambda: summarize(t), "link npu0->npu2", kind=TopologyError)
    t.graph = None
    one_line(lambda: summarize(t), "graph = 'NoneType'")
    one_line(lambda: summarize("atlas800t-a2"), "topology = 'str'")


# ---- 5. specs and the Topology's own methods ---------------------------------------------------

@pytest.mark.parametrize("make,needle", [
    (lambda: LinkSpec("1e9"), "bandwidth_Bps = '1e9'"), (lambda: LinkSpec(True), "bandwidth_Bps = True"),
    (lambda: LinkSpec(10**400), "bandwidth_Bps = 1000"), (lambda: LinkSpec(None), "bandwidth_Bps = None"),
    (lambda: LinkSpec(1e9, "0"), "latency_s = '0'"), (lambda: LinkSpec(1e9, math.inf), "latency_s = inf"),
    (lambda: LinkSpec(1e9, 0, ["roce"]), "tier = ['roce']"), (lambda: LinkSpec(1e9, 0, np.array([1])), "tier = "),
    (lambda: LinkSpec(1e9, 0, "roce", "yes"), "inline_reduce = 'yes'"),
    (lambda: LinkSpec(1e9, 0, "roce", 1), "inline_reduce = 1"),
    (lambda: NpuSpec(server=1.0), "server = 1.0"), (lambda: NpuSpec(pod="0"), "pod = '0'"),
    (lambda: NpuSpec(local_index=True), "local_index = True"), (lambda: NpuSpec(server=10**12), "server = 1000"),
    (lambda: NpuSpec(reduce_Bps=None), "reduce_bandwidth = None"),
    (lambda: NpuSpec(injection_Bps="x"), "injection_bandwidth = 'x'"),
    (lambda: NpuSpec(engine_Bps=math.inf), "engine_bandwidth = inf"),
    (lambda: NpuSpec(injection_Bps=1e9, half_duplex="yes"), "half_duplex = 'yes'"),
    (lambda: ExecutionDefaults("1"), "step_overhead_s = '1'"),
    (lambda: ExecutionDefaults(0, True), "launch_overhead_s = True"),
    (lambda: ExecutionDefaults(0, 0, 5), "launch_overhead_by_collective_s = 5"),
    (lambda: ExecutionDefaults(0, 0, (("allreduce",),)), "launch_overhead_by_collective_s = "),
    (lambda: ExecutionDefaults(0, 0, (("allreduc", 1e-6),)), "collective = 'allreduc'"),
    (lambda: ExecutionDefaults(0, 0, (("allreduce", "x"),)), "launch_overhead_by_collective_s[allreduce] = 'x'"),
    (lambda: ExecutionDefaults(0, 0, (("allreduce", 1e-6), ("allreduce", 2e-6))), "each collective once"),
    (lambda: ExecutionDefaults(expansion_mode=["HOST"]), "expansion_mode = ['HOST']"),
    (lambda: ExecutionDefaults(other_modes=(("AIV", 0),)), "other_modes = "),
    (lambda: ExecutionDefaults(other_modes=(("AIV", 0, "x"),)), "other_modes[AIV].launch_overhead_s = 'x'"),
    (lambda: ExecutionDefaults(message_regimes=5), "message_regimes = 5"),
])
def test_specs_reject_wrong_types(make, needle):
    one_line(make, needle)


def test_specs_store_plain_values_and_hash():
    d = ExecutionDefaults(np.float64(1e-6), 0, [["allreduce", 1e-6]], "HOST", [["AIV", 0, 0]])
    assert d.launch_overhead_by_collective_s == (("allreduce", 1e-6),) and hash(d) == hash(d)
    assert LinkSpec(10**9) == LinkSpec(1e9) and hash(LinkSpec(10**9)) == hash(LinkSpec(1e9))


@pytest.mark.parametrize("call,needle", [
    (lambda t: t.npu_spec("nope"), "NPU = 'nope'"), (lambda t: t.npu_spec(["x"]), "NPU = ['x']"),
    (lambda t: t.npu_spec("nic0"), "NPU = 'nic0'"), (lambda t: t.link_spec("npu0", "npu9"), "link = 'npu0->npu9'"),
    (lambda t: t.link_spec([1], "npu0"), "link = "), (lambda t: t.resolve_ranks(range(10**12)), "at most 8 NPUs"),
    (lambda t: t.resolve_ranks("npu0"), "ranks = 'npu0'"), (lambda t: t.resolve_ranks(2.0), "ranks = 2.0"),
    (lambda t: t.resolve_ranks([["npu0"]]), "ranks = ['npu0']"), (lambda t: t.add_npu(5), "node name = 5"),
    (lambda t: t.add_npu("x", spec=LinkSpec(1e9)), "NPU spec = "), (lambda t: t.add_node("x", ["switch"]), "kind = "),
    (lambda t: t.add_link("npu0", "npu1", LinkSpec(1e9)), "declared twice"),
    (lambda t: t.add_link("npu0", "nic1", 1e9), "spec = 1000000000.0"),
    (lambda t: t.add_link("npu0", "nic1", LinkSpec(1e9), "yes"), "bidirectional = 'yes'"),
    (lambda t: t.add_link(["npu0"], "nic1", LinkSpec(1e9)), "link end = ['npu0']"),
    (lambda t: setattr(t, "name", 5), "topology name = 5"), (lambda t: setattr(t, "defaults", None), "defaults = None"),
    (lambda t: setattr(t, "product", "910C"), "product = '910C'"), (lambda t: setattr(t, "provenance", [1]), "provenance"),
    (lambda t: setattr(t, "description", None), "description = None"),
    (lambda t: Topology("x", product=["910B"]), "product = ['910B']"),
])
def test_topology_methods_refuse_in_one_line(call, needle):
    one_line(lambda: call(atlas800t_a2()), needle)


def test_save_topology_checks_its_arguments(tmp_path):
    one_line(lambda: save_topology("atlas800t-a2", tmp_path / "t.yaml"), "topology = 'atlas800t-a2'")
    one_line(lambda: save_topology(ring(4, 1e9), tmp_path), "path = ", "cannot be written")
    one_line(lambda: save_topology(ring(4, 1e9), 5), "path = 5")
    t = ring(4, 1e9)
    t.provenance = {"fit": object()}
    one_line(lambda: save_topology(t, tmp_path / "t.yaml"), "cannot be written as YAML")


def test_save_writes_each_two_way_link_once_and_reads_back_the_same(tmp_path, monkeypatch):
    t = ring(5, 1e9, 1e-6, bidirectional=False)
    t.add_link("npu0", "npu2", LinkSpec(2e9, 0.0, "roce", True))
    t.graph.edges["npu2", "npu0"]["spec"] = LinkSpec(3e9)  # the two directions differ
    path = save_topology(t, tmp_path / "t.yaml")
    links = yaml.safe_load(path.read_text())["links"]
    assert len(links) == 7 and sum(1 for x in links if x.get("bidirectional", True)) == 0
    back = load_topology(path)
    assert {(u, v): d["spec"] for u, v, d in back.graph.edges(data=True)} == \
           {(u, v): d["spec"] for u, v, d in t.graph.edges(data=True)}
    pod = atlas900_a2_pod(servers=2)
    path = save_topology(pod, tmp_path / "pod.yaml")
    assert len(yaml.safe_load(path.read_text())["links"]) == pod.graph.number_of_edges() // 2
    doc = yaml.safe_load(path.read_text())  # the same file with every direction written on its own
    doc["links"] = [{"src": u, "dst": v, "bandwidth_GBps": d["spec"].bandwidth_Bps / 1e9,
                     "latency_us": d["spec"].latency_s * 1e6, "tier": d["spec"].tier,
                     "inline_reduce": d["spec"].inline_reduce, "bidirectional": False}
                    for u, v, d in pod.graph.edges(data=True)]
    assert hcsim.simulate(load_topology(path), "allreduce", "1M").time_s == \
           pytest.approx(hcsim.simulate(topology_from_dict(doc), "allreduce", "1M").time_s, rel=1e-12)
    import hcsim.topology.io as io

    monkeypatch.setattr(io, "MAX_YAML_NODES", 100)
    one_line(lambda: save_topology(pod, tmp_path / "big.yaml"), "would hold", "MAX_YAML_NODES", kind=WorkLimitError)
    assert not (tmp_path / "big.yaml").exists()


# ---- 6. mutated built-in files ------------------------------------------------------------------

def _small(doc):
    """A built-in document cut down so that building it is quick."""
    params = doc.get("params") or {}
    if doc.get("builder") == "atlas900_a2_pod":
        params["servers"] = 2
    if doc.get("builder") == "atlas900_a3_superpod":
        params["nodes"] = 1
    return doc


BUILTIN_DOCS = [_small(yaml.safe_load(p.read_text())) for p in BUILTIN]

SCALARS = st.one_of(
    st.none(), st.booleans(), st.sampled_from([-1, 0, 1, 2, 3, 7, 10**6, 10**9, 2**63, 10**400]),
    st.integers(-5, 12), st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", "x", "ring", "1e9", "910B", "HOST", "allreduce", "roce", "npu0", ".inf", "\x85", "é"]),
    st.text(max_size=8),
)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.one_of(st.text(max_size=6), st.integers(0, 3)), inner, max_size=4)),
    max_leaves=8)


def _paths(node, prefix=()):
    """Every path into a document (dict keys and list indices)."""
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, prefix + (i,))


def _swap(value):
    """The same content in another type: a number as text, a list as a mapping, and so on."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return [value] if value > 0 else str(value)
    if isinstance(value, str):
        return {value: value} if value else None
    if isinstance(value, list):
        return dict(enumerate(value))
    if isinstance(value, dict):
        return list(value.items()) if value else 0
    return "null"


@st.composite
def mutated_docs(draw):
    doc = copy.deepcopy(draw(st.sampled_from(BUILTIN_DOCS)))
    for _ in range(draw(st.integers(1, 3))):
        paths = list(_paths(doc))
        path = draw(st.sampled_from(paths))
        op = draw(st.sampled_from(["drop", "replace", "swap", "add"]))
        if not path:
            if op == "replace":
                doc = draw(VALUES)
            continue
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        key = path[-1]
        if op == "drop":
            del parent[key]
        elif op == "replace":
            parent[key] = draw(VALUES)
        elif op == "swap":
            parent[key] = _swap(parent[key])
        elif isinstance(parent[key], dict):
            parent[key][draw(st.sampled_from(["bogus", "servers", "n", "npus", "bandwidth_GBps", 3]))] = draw(VALUES)
        if not isinstance(doc, (dict, list)):
            break
    return doc


def _check_load(text: str):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "m.yaml"
        path.write_text(text, encoding="utf-8")
        try:
            topo = load_topology(path)
        except HcsimError as exc:
            msg = str(exc)
            assert msg and "\n" not in msg and "\r" not in msg and msg.startswith(str(path)), msg
            return None
        assert isinstance(topo, Topology) and topo.num_npus >= 1
        if topo.num_npus >= 2:  # a topology that loads runs a small call
            hcsim.simulate(topo, "allreduce", 4096, "ring", ranks=2)
        return topo


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_docs())
def test_mutated_builtin_files_load_or_fail_in_one_line(doc):
    try:
        text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    except yaml.YAMLError:
        return
    _check_load(text)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(BUILTIN), st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 4),
                                                     st.sampled_from(["", "\t", ":", "- ", "{", "]", "&a ", "*a",
                                                                      "!!", "'", "\n  ", "1e9", "0x", "--- "])),
                                           min_size=1, max_size=4))
def test_text_edits_of_builtin_files_load_or_fail_in_one_line(path, edits):
    text = path.read_text()
    for pos, cut, insert in edits:
        pos %= len(text) + 1
        text = text[:pos] + insert + text[pos + cut:]
    _check_load(text)


def test_npu_order_follows_edits_after_it_was_read():
    """The NPU list is kept between calls; replacing a spec, adding an NPU or turning a switch
    into an NPU must show in the next read (and in the rank layout built from it)."""
    import dataclasses

    from hcsim.api import rank_layout
    from hcsim.topology import NpuSpec, single_switch

    t = single_switch(4, 1e9, npus_per_server=2)
    first = t.npus
    assert rank_layout(t, first)[0] == (2, 2)
    a = first[0]
    t.graph.nodes[a]["spec"] = dataclasses.replace(t.npu_spec(a), server=5)  # moves to the end
    assert t.npus == first[1:] + [a]
    assert rank_layout(t, t.npus)[0] == (1, 2, 1)
    t.add_npu("extra", NpuSpec(server=9))
    assert t.npus[-1] == "extra"
    t.graph.remove_node("extra")
    assert "extra" not in t.npus
    t.graph.nodes[a]["spec"] = "not a spec"
    with pytest.raises(TopologyError):
        _ = t.npus


def test_unchanged_checks_the_graph_once_and_edits_between_sweeps_are_seen():
    import pickle

    from hcsim.topology import LinkSpec, single_switch

    t = single_switch(4, 1e9, 1e-6)
    with t.unchanged():
        view = t.compiled()
        assert t.compiled() is view and t.npus == t.npus
        assert pickle.loads(pickle.dumps(t))._held is None  # a copy sent to a worker checks again
    before = hcsim.sweep(t, "allreduce", sizes=("1M", "2M"), algorithms=["ring"], mode="analytical")
    u, v = next(iter(t.graph.edges))
    t.graph.edges[u, v]["spec"] = LinkSpec(bandwidth_Bps=1e8, latency_s=1e-6)  # one slow link
    after = hcsim.sweep(t, "allreduce", sizes=("1M", "2M"), algorithms=["ring"], mode="analytical")
    assert t.compiled() is not view
    assert (after["time_us"].to_numpy() > before["time_us"].to_numpy() * 5).all()
    slow = hcsim.select(t, "allreduce", sizes=("1M", "1M"), mode="analytical")
    assert slow["hccl_time_us"].iloc[0] > before["time_us"].iloc[0] * 5


def test_unchanged_trusts_a_list_read_before_the_block_after_one_check():
    from hcsim.topology import single_switch

    t = single_switch(4, 1e9, 1e-6)
    t.npus  # noqa: B018  read before the block
    calls = []
    real = t._npu_nodes
    t._npu_nodes = lambda: calls.append(1) or real()
    with t.unchanged():
        for _ in range(3):
            assert len(t.npus) == 4
        assert t._held == {"npus"}
    assert calls == []  # checked against the graph once, never listed again
