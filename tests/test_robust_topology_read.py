"""Reading YAML topology files fast (issue 12): the event-built document is exactly what
PyYAML's safe loader builds, with libyaml's parser or the pure-Python one; what only the
general reader reads is read by it up to MAX_GENERAL_YAML_BYTES; the file limits are what
reads in a few seconds and their refusals are one line naming the limit."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hcsim
import hcsim.topology.io as io
from hcsim.errors import HcsimError, WorkLimitError
from hcsim.topology import builders, load_topology, save_topology
from hcsim.topology.io import builtin_dirs


def _read_all(text: str):
    """(fast with libyaml, fast with the pure-Python parser, general) results or error lines."""
    out = []
    for read, parser in ((io._fast_document, io._EventParser), (io._fast_document, io._PyEventParser),
                         (io._general_document, None)):
        saved = io._EventParser
        if parser is not None:
            io._EventParser = parser
        try:
            out.append(("ok", io._parse_with(read, text, "f.yaml")))
        except HcsimError as exc:
            out.append((type(exc).__name__, str(exc)))
        except io._General:
            out.append(("general", None))
        finally:
            io._EventParser = saved
    return out


def _same(text: str):
    fast, pure, general = _read_all(text)
    # the same document; an error of the same kind (libyaml words a syntax error its own way)
    assert pure == fast if fast[0] == "ok" else pure[0] == fast[0]
    if fast[0] != "general":
        assert fast == general, text
    return general


def test_libyaml_is_used_here():
    assert yaml.__with_libyaml__ and io._EventParser is not io._PyEventParser


def test_every_builtin_file_reads_the_same_three_ways():
    paths = sorted(p for d in builtin_dirs() for p in d.glob("*.yaml"))
    assert paths
    for path in paths:
        assert _same(path.read_text())[0] == "ok", path


YAML_SNIPPETS = [
    "a: 1\nb: 1.5\nc: .inf\nd: -.Inf\ne: .nan\nf: 1e9\ng: 1.0e+9\nh: 0x1f\ni: 0o17\nj: 017\nk: 1_000\nl: 1:30\n",
    "a: yes\nb: No\nc: on\nd: OFF\ne: true\nf: ~\ng: null\nh:\ni: ''\nj: 'yes'\nk: \"1\"\nl: !!str 5\n",
    "t: 2001-12-14\nu: 2001-12-14t21:59:43.10-05:00\nv: 2002-12-14 21:59:43\n",
    "x: &a {p: [1, 2, &b three]}\ny: *a\nz: [*b, *b]\n",
    "- [1, [2, [3, [4, {k: v}]]]]\n- {a: {b: {c: {}}}}\n- []\n",
    "k: v\nk: w\n",  # a repeated key: the last wins, at the first one's place
    "{1: a, 1.5: b, true: c, null: d, 2001-01-01: e}\n",
    "npus: [&n {name: a}, {<<: *n, name: b}]\n",  # a merge key: the general reader
    "a: !!omap [{x: 1}]\n",
    "? [1, 2]\n: v\n",
    "a: *missing\n",
    "a: &x 1\nb: &x 2\n",
    "a: 1\n---\nb: 2\n",
    "a: 2001-02-30\n",
    "a: [1, 2\n",
    "a: &r [1, *r]\n",
    "=: 1\n",
    "a: =\n",
    "!!map {a: 1}\n",
    "!!seq [1]\n",
    "! a\n",
    "",
    "# only a comment\n",
    "plain scalar\n",
    "a: |\n  two\n  lines\nb: >\n  folded\n  text\n",
    "a: \"esc\\t\\u00e9\\n\"\nb: 'it''s'\n",
    "[" * 100 + "]" * 100,
]


@pytest.mark.parametrize("text", YAML_SNIPPETS)
def test_hand_written_yaml_reads_the_same(text):
    _same(text)


def test_the_general_reader_reads_what_the_fast_one_leaves():
    assert _read_all("npus: [&n {name: a}, {<<: *n, name: b}]\n")[0][0] == "general"
    assert io._parse("npus: [&n {name: a}, {<<: *n, name: b}]\n", "f") == \
        {"npus": [{"name": "a"}, {"name": "a"} | {"name": "b"}]}
    assert io._parse("a: 2001-12-14\n", "f") == {"a": datetime.date(2001, 12, 14)}


_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20),
                     st.floats(allow_nan=False), st.text(max_size=12),
                     st.sampled_from(["yes", "no", "~", "0x1f", "1_0", "1:30", ".inf", "1e9", "a,b", "[x]", "#c",
                                      "- x", "x: y", "&a", "*a", "!t", "2001-12-14", "=", "<<", " lead", "é"]))
_docs = st.recursive(_scalars, lambda kids: st.one_of(st.lists(kids, max_size=4),
                                                      st.dictionaries(st.text(max_size=6), kids, max_size=4)),
                     max_leaves=25)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_docs, st.booleans())
def test_any_dumped_document_reads_back_the_same(doc, flow):
    text = yaml.safe_dump(doc, default_flow_style=flow, allow_unicode=True)
    result = _same(text)
    assert result == ("ok", yaml.safe_load(text))


def _plain(value, approx=False):
    """Dataclasses, mappings and tuples as dicts and lists; with ``approx`` numbers as
    pytest.approx (a file holds microseconds and GB/s: x * 1e6 * 1e-6 may move the last bit, as
    it always has)."""
    if dataclasses.is_dataclass(value):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {k: _plain(v, approx) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, approx) for v in value]
    if approx and isinstance(value, float):
        return pytest.approx(value, rel=1e-12)
    return value


def _equal(a, b, exact=False):
    assert a.name == b.name and a.description == b.description and a.product == b.product
    for x, y in ((a.defaults, b.defaults), (dict(a.graph.nodes(data=True)), dict(b.graph.nodes(data=True))),
                 (sorted(a.graph.edges(data=True)), sorted(b.graph.edges(data=True)))):
        if exact:
            assert y == x
        else:
            assert _plain(y) == _plain(x, approx=True)


@pytest.mark.parametrize("name", ["atlas800t-a2", "atlas900-a3-superpod", "atlas800-9000"])
def test_saved_then_loaded_topologies_are_equal(tmp_path, name):
    topo = load_topology(name)
    path = save_topology(topo, tmp_path / "t.yaml")
    _equal(topo, load_topology(path))
    _same(path.read_text())


def test_a_saved_pod_and_mesh_load_equal_with_both_parsers(tmp_path, monkeypatch):
    for topo in (load_topology("atlas900-a2-pod", servers=4), builders.full_mesh(12, 10e9, 1e-6),
                 builders.leaf_spine(4, 4, 2, 25e9)):
        path = save_topology(topo, tmp_path / "t.yaml")
        fast = load_topology(path)
        _equal(topo, fast)
        monkeypatch.setattr(io, "_EventParser", io._PyEventParser)
        _equal(fast, load_topology(path), exact=True)
        monkeypatch.undo()
        general = io.topology_from_dict(io._general_document(path.read_text()), str(path))
        _equal(fast, general, exact=True)
        # specs read once per distinct figures are shared, as the builder shares them
        specs = {id(d["spec"]) for *_, d in fast.graph.edges(data=True)}
        assert len(specs) <= len({d["spec"] for *_, d in topo.graph.edges(data=True)})
        assert hcsim.simulate(fast, "allreduce", "1M").time_s == pytest.approx(
            hcsim.simulate(topo, "allreduce", "1M").time_s, rel=1e-12)


def test_a_bad_link_is_named_even_when_its_figures_were_read_before(tmp_path):
    text = ("npus: [{name: a}, {name: b}, {name: c}]\nlinks:\n- {src: a, dst: b, bandwidth_GBps: 1}\n"
            "- {src: b, dst: c, bandwidth_GBps: 1, tier: nope}\n- {src: a, dst: c, bandwidth_GBps: true}\n")
    path = tmp_path / "t.yaml"
    path.write_text(text)
    with pytest.raises(HcsimError, match=r"links\[1\]\.tier = 'nope'"):
        load_topology(path)
    path.write_text(text.replace(", tier: nope", ""))
    with pytest.raises(HcsimError, match=r"links\[2\]\.bandwidth_GBps = True"):
        load_topology(path)


def test_the_limits_read_in_a_few_seconds_and_say_so(tmp_path):
    assert io.MAX_FILE_BYTES == 16 << 20 and io.MAX_YAML_NODES == 1_000_000 and io.MAX_YAML_TYPED == 100_000
    assert io.MAX_GENERAL_YAML_BYTES == 512 << 10
    path = tmp_path / "big.yaml"
    path.write_text("name: x\n# " + "x" * (16 << 20) + "\n")
    with pytest.raises(WorkLimitError) as info:
        load_topology(path)
    msg = str(info.value)
    assert "larger than 16 MiB (hcsim.topology.io.MAX_FILE_BYTES, about 4 s to read" in msg and "\n" not in msg


def test_too_many_values_are_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(io, "MAX_YAML_NODES", 1_000)
    path = tmp_path / "many.yaml"
    path.write_text("provenance: {x: [" + ", ".join(str(i) for i in range(2_000)) + "]}\nnpus: [{name: a}]\n")
    with pytest.raises(WorkLimitError, match=r"more than 1,000 values \(hcsim.topology.io.MAX_YAML_NODES, about 4 s"):
        load_topology(path)


def test_the_general_reader_is_bounded(tmp_path, monkeypatch):
    path = tmp_path / "merge.yaml"
    path.write_text("npus: [&n {name: a}, {<<: *n, name: b}]\nprovenance: {x: '" + "y" * 2_000 + "'}\n")
    assert load_topology(path).num_npus == 2
    monkeypatch.setattr(io, "MAX_GENERAL_YAML_BYTES", 1_024)
    with pytest.raises(WorkLimitError) as info:
        load_topology(path)
    msg = str(info.value)
    assert "\n" not in msg
    assert "using the key '<<', which only the general YAML reader reads, at most 1 KiB " \
           "(hcsim.topology.io.MAX_GENERAL_YAML_BYTES)" in msg


def test_the_cli_shows_a_saved_pod(tmp_path, capsys):
    path = save_topology(load_topology("atlas900-a2-pod", servers=2), tmp_path / "pod.yaml")
    assert hcsim.cli.main(["topo", "show", str(path)]) == 0
    assert "16" in capsys.readouterr().out


_entries = st.lists(st.dictionaries(st.text(max_size=6), st.one_of(_scalars, st.dictionaries(
    st.text(max_size=4), st.one_of(_scalars, st.dictionaries(st.text(max_size=3), _scalars, max_size=2)),
    max_size=3)), max_size=4), max_size=4)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(["name", "description", "provenance"]), _docs, max_size=3),
       _entries, _entries, _entries)
def test_the_compact_writer_reads_back_what_it_was_given(head, npus, nodes, links):
    doc = {**head, "npus": npus, "nodes": nodes, "links": links}
    text = io._dump(doc)
    assert io._fast_document(text) == doc == yaml.safe_load(text)


def test_a_saved_pod_is_one_flow_mapping_a_line(tmp_path):
    topo = load_topology("atlas900-a2-pod", servers=2)
    text = save_topology(topo, tmp_path / "pod.yaml").read_text()
    assert "\n- {src: npu0, dst: " in text and "\nnpus:\n- {name: npu0, server: 0, pod: 0, " in text
    assert io._parse(text, "f") == io._parse(yaml.dump(yaml.safe_load(text), Dumper=yaml.SafeDumper), "f")
    # a value the emitter writes on two lines: the whole document is dumped as before
    doc = {"name": "x", "npus": [{"name": "a\nb"}], "nodes": [], "links": []}
    assert yaml.safe_load(io._dump(doc)) == doc
