"""The :class:`Topology`: a networkx DiGraph of NPUs, switches and links, plus routing."""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import sys
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from ..engine.regimes import MessageRegimes
from ..errors import TopologyError, WorkLimitError, bad_value, is_int, is_real
from ..limits import FREE_GROWN, MAX_LINKS, MAX_NODES, MAX_NPUS
from . import routing
from .routing import MAX_PATHS, ROUTING_POLICIES, SearchCache, collector_paused, ecmp_index
from .spec import NODE_KINDS, LinkSpec, NpuSpec, choice, flag, seconds

PRODUCTS = ("910A", "910B", "910_93")
"""Ascend products (HCCL's names; 910_93 is A3). HCCL's selection rules depend on it."""

EXPANSION_MODES = ("HOST", "AI_CPU", "AIV", "HOST_TS")
"""HCCL_OP_EXPANSION_MODE values (FACTS.md s2)."""


def _pairs(field_name: str, value, width: int, what: str) -> tuple:
    """``value`` as a tuple of ``width``-tuples (a list of lists from a file, a dict of pairs)."""
    if isinstance(value, dict) and width == 2:
        value = tuple(value.items())
    if not isinstance(value, (tuple, list)) or not all(
            isinstance(item, (tuple, list)) and len(item) == width for item in value):
        raise bad_value(field_name, value, what)
    return tuple(tuple(item) for item in value)


@dataclass(frozen=True)
class ExecutionDefaults:
    """Collective execution costs a topology carries (a simulate() call may override them).

    Every field is checked for its type and range when the defaults are made (seconds from 0
    to :data:`~hcsim.topology.spec.MAX_TIME_s`); sequences are stored as tuples.

    Attributes
    ----------
    step_overhead_s : float
        Added to every transfer's start: the per-step synchronisation (HCCL's notify
        record/wait) and task launch cost.
    launch_overhead_s : float
        Added once per collective before its first step (host or device launch).

    Examples
    --------
    >>> ExecutionDefaults(1e-6, 30e-6, (("allreduce", 40e-6),)).launch_for("allreduce")
    4e-05
    """

    step_overhead_s: float = 0.0
    launch_overhead_s: float = 0.0
    launch_overhead_by_collective_s: tuple = ()
    """``((collective, seconds), ...)``: per-operator launch costs that replace
    ``launch_overhead_s`` (HCCL runs a different executor, with its own task graph, per operator)."""
    expansion_mode: str = "HOST"
    """The HCCL_OP_EXPANSION_MODE the figures above describe."""
    other_modes: tuple = ()
    """``((mode, step_overhead_s, launch_overhead_s), ...)`` for other expansion modes."""
    message_regimes: MessageRegimes | None = None
    """Per-message cost by message size (eager versus rendezvous transports); event-driven
    mode only (:class:`~hcsim.engine.regimes.MessageRegimes`)."""
    launch_overlap: bool = False
    """Whether a call's launch overlaps the device work of the call before it, as in a benchmark's
    loop of asynchronous calls timed together (nccl-tests' and rccl-tests' ``BenchTime``, hccl_test's
    back-to-back iterations): a call then costs the larger of its launch and its device time, not
    their sum. False (default): one call alone, its launch first. It sets the time :func:`hcsim.simulate`
    and :func:`hcsim.sweep` report (a benchmark's call); a call's step and transfer tables still show it
    alone, launch first, and a job's collectives (:mod:`hcsim.workload`) keep their launch first."""

    def __post_init__(self):
        from ..algorithms.schedule import COLLECTIVES  # lazily: algorithms sit below topology

        def put(name, value):
            object.__setattr__(self, name, value)

        put("step_overhead_s", seconds("step_overhead_s", self.step_overhead_s))
        put("launch_overhead_s", seconds("launch_overhead_s", self.launch_overhead_s))
        per_op = _pairs("launch_overhead_by_collective_s", self.launch_overhead_by_collective_s, 2,
                        "a tuple of (collective, seconds) pairs")
        seen = set()
        for c, _ in per_op:
            choice("launch_overhead_by_collective_s collective", c, COLLECTIVES)
            if c in seen:
                raise bad_value("launch_overhead_by_collective_s", c, "each collective once")
            seen.add(c)
        put("launch_overhead_by_collective_s",
            tuple((c, seconds(f"launch_overhead_by_collective_s[{c}]", v)) for c, v in per_op))
        choice("expansion_mode", self.expansion_mode, EXPANSION_MODES)
        modes = _pairs("other_modes", self.other_modes, 3, "a tuple of (mode, step_overhead_s, launch_overhead_s)")
        put("other_modes", tuple((choice("other_modes mode", m, EXPANSION_MODES),
                                  seconds(f"other_modes[{m}].step_overhead_s", s),
                                  seconds(f"other_modes[{m}].launch_overhead_s", la)) for m, s, la in modes))
        if self.message_regimes is not None and not isinstance(self.message_regimes, MessageRegimes):
            raise bad_value("message_regimes", self.message_regimes, "a MessageRegimes or None")
        if not isinstance(self.launch_overlap, (bool, np.bool_)):
            raise bad_value("launch_overlap", self.launch_overlap, "True or False")
        put("launch_overlap", bool(self.launch_overlap))

    def launch_for(self, collective: str) -> float:
        """Launch overhead of ``collective`` (its own if given, else the common one)."""
        return dict(self.launch_overhead_by_collective_s).get(collective, self.launch_overhead_s)

    def call_time(self, launch_s: float, device_s: float) -> float:
        """A call's time from its launch and its device time: their sum, or with
        :attr:`launch_overlap` the larger of the two.

        Examples
        --------
        >>> ExecutionDefaults().call_time(30e-6, 10e-6), ExecutionDefaults(launch_overlap=True).call_time(30e-6, 10e-6)
        (4e-05, 3e-05)
        """
        return max(launch_s, device_s) if self.launch_overlap else launch_s + device_s

    def for_mode(self, mode: str | None) -> ExecutionDefaults:
        """These defaults under another HCCL_OP_EXPANSION_MODE (HOST, AI_CPU, AIV, HOST_TS)."""
        if mode is None or mode == self.expansion_mode:
            return self
        choice("expansion_mode", mode, EXPANSION_MODES)
        for name, step_s, launch_s in self.other_modes:
            if name == mode:
                return ExecutionDefaults(step_s, launch_s, (), mode, self.other_modes, self.message_regimes,
                                         self.launch_overlap)
        known = ", ".join([self.expansion_mode] + [m for m, _, _ in self.other_modes])
        raise bad_value("expansion_mode", mode, f"this topology has figures for {known} only; add "
                        f"defaults.modes.{mode} (step_overhead_us, launch_overhead_us) to its file")


def _name(field_name: str, value) -> str:
    if not isinstance(value, str) or not value:
        raise bad_value(field_name, value, "a non-empty string")
    return value


class Topology:
    """A network of NPUs and switches.

    Wraps a :class:`networkx.DiGraph` whose nodes carry ``kind`` (one of
    :data:`~hcsim.topology.spec.NODE_KINDS`) and, for NPUs, an :class:`NpuSpec`
    under ``spec``; every directed edge carries a :class:`LinkSpec` under ``spec``.
    Ranks are NPUs in the order of :attr:`npus` (pod, server, local index).

    **Editing.** Build with :meth:`add_npu`, :meth:`add_node` and :meth:`add_link`, which
    check what they are given. ``graph`` may also be edited directly at any time, as any
    networkx graph (add or remove nodes and edges, replace a node's or an edge's ``spec``):
    the next simulation sees the edit. :meth:`compiled` (the integer view the engine runs on,
    with its route cache) compares a cheap fingerprint of the graph -- every node with its
    ``kind`` and ``spec``, every edge with its ``spec``, compared by identity first -- with
    the one it was built from, and rebuilds (and re-checks the graph) when they differ.
    Specs are frozen, so an edit is always a replacement the fingerprint sees. A graph
    edited into something hcsim cannot run (an edge without a :class:`LinkSpec`, a node
    without a kind) is refused then, in one line naming the node or edge.

    Examples
    --------
    >>> from hcsim.topology import Topology, LinkSpec, NpuSpec
    >>> t = Topology("pair")
    >>> t.add_npu("a"); t.add_npu("b", NpuSpec(local_index=1))
    >>> t.add_link("a", "b", LinkSpec(bandwidth_Bps=1e9, latency_s=1e-6))
    >>> t.npus
    ['a', 'b']
    >>> t.graph.edges["a", "b"]["spec"] = LinkSpec(2e9, 1e-6)  # seen by the next simulation
    >>> t.compiled().capacity_Bps.tolist()
    [2000000000.0, 1000000000.0]
    """

    def __init__(self, name: str = "topology", description: str = "",
                 defaults: ExecutionDefaults | None = None, provenance: dict | None = None,
                 product: str | None = None):
        self.name = name
        self.description = description
        self.defaults = ExecutionDefaults() if defaults is None else defaults
        self.provenance = {} if provenance is None else provenance
        self.product = product
        self.graph = nx.DiGraph()
        self._compiled: _Compiled | None = None
        self._npu_table: tuple | None = None  # (node key, names in rank order, {name: spec})
        self._held: set | None = None  # inside unchanged(): what has been checked once since

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_held"] = None  # a copy sent elsewhere checks the graph again
        return state

    def copy(self) -> Topology:
        """A new topology with a copy of the graph (node and edge attribute mappings copied;
        the specs in them are frozen, so they are shared) and the same defaults: a change to the
        copy's links leaves this one, and its compiled routes, as they were. Far cheaper than
        ``copy.deepcopy`` (a calibration builds hundreds of candidates).

        Examples
        --------
        >>> from hcsim.topology import ring
        >>> t = ring(4, 1e9)
        >>> c = t.copy()
        >>> c.graph.remove_edge(*next(iter(c.graph.edges)))
        >>> (t.graph.number_of_edges(), c.graph.number_of_edges())
        (8, 7)
        """
        out = Topology(self.name, self.description, self.defaults, dict(self.provenance), self.product)
        out.graph = self.graph.copy()
        return out

    # -- checked attributes -------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, value):
        self._name = _name("topology name", value)

    @property
    def description(self) -> str:
        return self._description

    @description.setter
    def description(self, value):
        if not isinstance(value, str):
            raise bad_value("description", value, "a string")
        self._description = value

    @property
    def defaults(self) -> ExecutionDefaults:
        return self._defaults

    @defaults.setter
    def defaults(self, value):
        if not isinstance(value, ExecutionDefaults):
            raise bad_value("defaults", value, "an ExecutionDefaults")
        self._defaults = value

    @property
    def provenance(self) -> dict:
        return self._provenance

    @provenance.setter
    def provenance(self, value):
        if not isinstance(value, dict):
            raise bad_value("provenance", value, "a dict")
        self._provenance = dict(value)

    @property
    def product(self) -> str | None:
        return self._product

    @product.setter
    def product(self, value):
        if value is not None:
            choice("product", value, PRODUCTS, " (or none)")
        self._product = value

    # -- building ---------------------------------------------------------------------
    def add_npu(self, name: str, spec: NpuSpec | None = None) -> None:
        """Add an NPU node."""
        if spec is not None and not isinstance(spec, NpuSpec):
            raise bad_value("NPU spec", spec, "an NpuSpec or None")
        self._add_node(name, "npu", spec or NpuSpec())

    def add_node(self, name: str, kind: str = "switch", in_network_efficiency: float | None = None) -> None:
        """Add a non-NPU node (switch, nic or pcie).

        ``in_network_efficiency`` (a switch only): the switch reduces and multicasts in the network
        (NVLink SHARP), its transfers moving at this share of the link rate (NCCL's
        ``nvlsEfficiency``: 0.85 Hopper, 0.74 Blackwell); None (default): it only forwards. The
        ``nvls`` algorithm needs one.
        """
        if not isinstance(kind, str) or kind not in NODE_KINDS or kind == "npu":
            raise bad_value("kind", kind, "one of switch, nic, pcie (use add_npu for NPUs)")
        if in_network_efficiency is not None:
            e = in_network_efficiency
            if kind != "switch" or not is_real(e) or not 0 < e <= 1:
                raise bad_value("in_network_efficiency", e, "a share of the link rate in (0, 1], on a switch (or None)")
        self._add_node(name, kind, None)
        if in_network_efficiency is not None:
            self.graph.nodes[name]["in_network_efficiency"] = float(in_network_efficiency)

    def _add_node(self, name, kind, spec):
        _name("node name", name)
        if name in self.graph:
            raise bad_value("node name", name, "must be unique")
        if self.graph.number_of_nodes() >= MAX_NODES:
            raise WorkLimitError(f"node name = {name!r}: a topology holds at most {MAX_NODES:,} nodes "
                                 "(hcsim.limits.MAX_NODES)")
        self.graph.add_node(name, kind=kind, spec=spec)
        self._compiled = None

    def add_link(self, src: str, dst: str, spec: LinkSpec, bidirectional: bool = True) -> None:
        """Add a link; ``bidirectional`` adds both directions, each with the full bandwidth."""
        for end in (src, dst):
            if not isinstance(end, str) or end not in self.graph:
                raise bad_value("link end", end, "must name a node added before")
        if src == dst:
            raise bad_value("link", f"{src}->{dst}", "must join two different nodes")
        if not isinstance(spec, LinkSpec):
            raise bad_value(f"link {src}->{dst} spec", spec, "a LinkSpec")
        pairs = [(src, dst), (dst, src)] if flag("bidirectional", bidirectional) else [(src, dst)]
        for u, v in pairs:
            if self.graph.has_edge(u, v):
                raise bad_value("link", f"{u}->{v}", "is declared twice")
        for u, v in pairs:
            self.graph.add_edge(u, v, spec=spec)
        self._compiled = None

    # -- queries ----------------------------------------------------------------------
    def _npu_nodes(self):
        """(name, NpuSpec) of every NPU in insertion order; a node edited into something
        hcsim cannot read is refused here."""
        graph = self.graph
        if not isinstance(graph, nx.DiGraph) or graph.is_multigraph():
            raise bad_value("graph", type(graph).__name__, "a networkx DiGraph")
        out = []
        for n, d in graph.nodes(data=True):
            kind = d.get("kind")
            if kind == "npu":
                if not isinstance(d.get("spec"), NpuSpec):
                    raise TopologyError(f"node {n!r}: an NPU needs an NpuSpec under 'spec', has "
                                        f"{type(d.get('spec')).__name__} ({self.name!r})")
                out.append((n, d["spec"]))
            elif not isinstance(kind, str) or kind not in NODE_KINDS:
                raise TopologyError(f"node {n!r}: kind = {kind!r}: one of {', '.join(NODE_KINDS)} "
                                    f"({self.name!r})")
        return out

    def _npus_and_specs(self) -> tuple[list[str], dict]:
        """(NPU names in rank order, {name: NpuSpec}), kept while every node, its ``kind`` and
        its ``spec`` stay as they were (compared by identity first: a few milliseconds for
        16,384 NPUs, where listing and sorting them again takes about 0.1 s)."""
        if self._held is not None and "npus" in self._held and self._npu_table is not None:
            return self._npu_table[1], self._npu_table[2]
        graph = self.graph
        try:  # three C-level passes (map of dict.get), no tuple per node
            attrs = graph._node
            key = (list(attrs), list(map(dict.get, attrs.values(), itertools.repeat("kind"))),
                   list(map(dict.get, attrs.values(), itertools.repeat("spec"))))
        except (AttributeError, TypeError):  # not a networkx graph, or attributes that are not
            key = None                       # dicts: _npu_nodes says what is wrong
        cached = self._npu_table
        if key is not None and cached is not None and isinstance(graph, nx.DiGraph) and not graph.is_multigraph():
            try:
                if cached[0] == key:
                    self._checked("npus")
                    return cached[1], cached[2]
            except Exception:  # a spec edited into an object whose == misbehaves: list again
                pass
        nodes = self._npu_nodes()
        order = [(s.pod, s.server, s.local_index, i, n) for i, (n, s) in enumerate(nodes)]
        names = [o[-1] for o in sorted(order)]
        specs = dict(nodes)
        self._npu_table = None if key is None else (key, names, specs)
        if key is not None:
            self._checked("npus")
        return names, specs

    def _checked(self, what: str) -> None:
        """Inside :meth:`unchanged`: ``what`` ("npus", "compiled") has been checked against the graph."""
        if self._held is not None:
            self._held.add(what)

    @contextlib.contextmanager
    def unchanged(self):
        """Within the block the graph is taken as not edited: the NPU list and the compiled
        view are checked against the graph once, at their first use, not at every call. For
        the many calls of one study (a sweep's points), where those checks cost as much as a
        point on a big topology (about 0.1 s each at 16,384 NPUs). Nested blocks share the
        outer one's checks.

        Examples
        --------
        >>> from hcsim.topology import ring
        >>> t = ring(4, 1e9)
        >>> with t.unchanged():
        ...     t.npus == t.npus
        True
        """
        if self._held is not None:
            yield self
            return
        self._held = set()
        try:
            yield self
        finally:
            self._held = None

    @property
    def npus(self) -> list[str]:
        """NPU names in rank order: by pod, server, local index, then insertion."""
        return list(self._npus_and_specs()[0])

    def npu_spec(self, name: str) -> NpuSpec:
        """The :class:`NpuSpec` of NPU ``name``."""
        try:
            d = self.graph.nodes[name]
        except (KeyError, TypeError):
            d = None
        if d is None or d.get("kind") != "npu" or not isinstance(d.get("spec"), NpuSpec):
            raise bad_value("NPU", name, f"an NPU of topology {self.name!r}")
        return d["spec"]

    def link_spec(self, src: str, dst: str) -> LinkSpec:
        """The :class:`LinkSpec` of the directed link ``src -> dst``."""
        try:
            d = self.graph.edges[src, dst]
        except (KeyError, TypeError):
            d = None
        if d is None or not isinstance(d.get("spec"), LinkSpec):
            raise bad_value("link", f"{src}->{dst}", f"a link of topology {self.name!r}")
        return d["spec"]

    @property
    def num_npus(self) -> int:
        return len(self._npu_nodes())

    def resolve_ranks(self, ranks=None) -> list[str]:
        """Turn a ranks argument into NPU names.

        ``None``: every NPU; an int k: the first k NPUs; a list of NPU names or NPU indices.
        """
        npus = self.npus
        if ranks is None:
            chosen = npus
        elif is_int(ranks):
            if not 2 <= ranks <= len(npus):
                raise bad_value("ranks", int(ranks), f"an integer from 2 to {len(npus)} (NPUs in {self.name})")
            chosen = npus[: int(ranks)]
        else:
            allowed = "None, a count, or a list of NPU names or indices"
            if isinstance(ranks, (str, bytes, dict)):
                raise bad_value("ranks", ranks, allowed)
            try:  # never more than one past the NPUs (a range(10**12) is not listed)
                items = list(itertools.islice(iter(ranks), len(npus) + 1))
            except TypeError:
                raise bad_value("ranks", ranks, allowed) from None
            except Exception:  # an object whose iteration fails
                raise bad_value("ranks", f"a {type(ranks).__name__} that does not read as a list", allowed) from None
            if len(items) > len(npus):
                raise bad_value("ranks", ranks, f"at most {len(npus)} NPUs (the NPUs of {self.name})")
            chosen = []
            for item in items:
                if isinstance(item, str) and item in self.graph and self.graph.nodes[item].get("kind") == "npu":
                    chosen.append(item)
                elif is_int(item) and 0 <= item < len(npus):
                    chosen.append(npus[int(item)])
                else:
                    raise bad_value("ranks", item, f"an NPU name or an index from 0 to {len(npus) - 1} of {self.name}")
            if len(set(chosen)) != len(chosen):
                raise bad_value("ranks", items, "must not repeat an NPU")
            if len(chosen) < 2:
                raise bad_value("ranks", items, "at least 2 NPUs")
        return chosen

    def compiled(self) -> _Compiled:
        """Integer-indexed form used by routing and the engine.

        Cached with its routes while the graph stays as it was: each call compares the
        graph's fingerprint (:func:`_fingerprint`, linear in its size but cheap: about 0.1 s
        for 184,000 links) with the cached view's and rebuilds after any edit.
        """
        cached = self._compiled
        if self._held is not None and "compiled" in self._held and cached is not None:
            return cached
        fp = _fingerprint(self.graph)
        if cached is not None:
            try:
                if cached.fingerprint == fp:
                    self._checked("compiled")
                    return cached
            except Exception:  # a spec edited into an object whose == misbehaves: rebuild (and refuse)
                pass
        self._compiled = None
        self._compiled = _Compiled(self, fp)
        self._checked("compiled")
        return self._compiled

    def __repr__(self):
        try:
            return f"Topology({self.name!r}, npus={self.num_npus}, links={self.graph.number_of_edges()})"
        except Exception:  # a graph edited into something unreadable still has a repr
            return f"Topology({self.name!r}, <graph not readable>)"

    def to_dict(self) -> dict:
        """Plain description (used by YAML save)."""
        _check_graph(self)
        nodes, npus = [], []
        for n, d in self.graph.nodes(data=True):
            if d["kind"] == "npu":
                npus.append({"name": n, **_npu_to_yaml(d["spec"])})
            else:
                nodes.append({"name": n, "kind": d["kind"],
                              **({"in_network_efficiency": d["in_network_efficiency"]}
                                 if d.get("in_network_efficiency") else {})})
        links, written = [], set()
        for u, v, d in self.graph.edges(data=True):
            if (u, v) in written:
                continue
            s = d["spec"]
            link = {"src": u, "dst": v, "bandwidth_GBps": s.bandwidth_Bps / 1e9, "latency_us": s.latency_s * 1e6,
                    "tier": s.tier}
            if s.inline_reduce:
                link["inline_reduce"] = True
            back = self.graph.get_edge_data(v, u)
            if back is not None and back["spec"] == s:  # one entry for both directions
                written.add((v, u))
            else:
                link["bidirectional"] = False
            links.append(link)
        defaults = {"step_overhead_us": self.defaults.step_overhead_s * 1e6,
                    "launch_overhead_us": self.defaults.launch_overhead_s * 1e6}
        if self.defaults.launch_overhead_by_collective_s:
            defaults["launch_overhead_by_collective_us"] = {
                c: v * 1e6 for c, v in self.defaults.launch_overhead_by_collective_s}
        if self.defaults.launch_overlap:
            defaults["launch_overlap"] = True
        reg = self.defaults.message_regimes
        if reg is not None:
            pairs = reg.pair_limit if reg.pair_limit is not None else (None,) * len(reg.from_bytes)
            when = reg.overhead_when if reg.overhead_when is not None else (None,) * len(reg.from_bytes)
            newp = reg.new_peer_efficiency if reg.new_peer_efficiency is not None else (None,) * len(reg.from_bytes)
            many = reg.many_peer_efficiency if reg.many_peer_efficiency is not None else (None,) * len(reg.from_bytes)
            local = reg.local_efficiency if reg.local_efficiency is not None else (None,) * len(reg.from_bytes)
            send_o = reg.send_overhead_s if reg.send_overhead_s is not None else (0.0,) * len(reg.from_bytes)
            send_c = reg.send_copy_Bps if reg.send_copy_Bps is not None else (float("inf"),) * len(reg.from_bytes)
            start = reg.start_when if reg.start_when is not None else ("both",) * len(reg.from_bytes)
            call = reg.call_overhead_s if reg.call_overhead_s is not None else (0.0,) * len(reg.from_bytes)
            defaults["message_regimes"] = [
                {"from_bytes": int(b), "overhead_us": float(o) * 1e6, "efficiency": float(e),
                 **({} if pl is None else {"pair_limit": bool(pl)}), **({} if w is None else {"overhead_when": w}),
                 **({} if ne is None else {"new_peer_efficiency": float(ne)}),
                 **({} if me is None else {"many_peer_efficiency": float(me)}),
                 **({} if le is None else {"local_efficiency": float(le)}),
                 **({} if so == 0 else {"send_overhead_us": float(so) * 1e6}),
                 **({} if sc == float("inf") else {"send_copy_GBps": float(sc) / 1e9}),
                 **({} if sw == "both" else {"start_when": sw}),
                 **({} if co == 0 else {"call_overhead_us": float(co) * 1e6})}
                for b, o, e, pl, w, ne, me, le, so, sc, sw, co in zip(reg.from_bytes, reg.overhead_s, reg.efficiency,
                                                                      pairs, when, newp, many, local, send_o, send_c,
                                                                      start, call, strict=True)]
        out = {"name": self.name, "description": self.description, "defaults": defaults}
        if self.provenance:
            out["provenance"] = self.provenance
        if self.product:
            out["product"] = self.product
        out.update({"npus": npus, "nodes": nodes, "links": links})
        return out


def _npu_to_yaml(spec: NpuSpec) -> dict:
    d = {"server": spec.server, "pod": spec.pod, "local_index": spec.local_index}
    if spec.reduce_Bps != float("inf"):
        d["reduce_GBps"] = spec.reduce_Bps / 1e9
    if spec.injection_Bps is not None:
        d["injection_GBps"] = spec.injection_Bps / 1e9
    if spec.ejection_Bps is not None:
        d["ejection_GBps"] = spec.ejection_Bps / 1e9
    if spec.half_duplex:
        d["half_duplex"] = True
    if spec.exchange_Bps is not None:
        d["exchange_GBps"] = spec.exchange_Bps / 1e9
    if spec.engine_Bps is not None:
        d["engine_GBps"] = spec.engine_Bps / 1e9
    return d


@dataclass
class PathStore:
    """Every path routed so far, as growing CSR arrays over resource indices.

    :meth:`arrays` and :meth:`matrix` convert only the paths added since their last call and
    append them to what they gave then (a large run routes step by step, and converting every
    path again at each step cost time quadratic in the paths); the arrays are the same."""

    res_ptr: list = field(default_factory=lambda: [0])
    res: list = field(default_factory=list)
    latency_s: list = field(default_factory=list)
    inline_reduce: list = field(default_factory=list)
    bottleneck_Bps: list = field(default_factory=list)
    _arrays: tuple | None = None
    _matrix: tuple | None = None

    def longest(self, ids) -> int:
        """Resources on the longest of paths ``ids`` (0 for none)."""
        ptr = self.res_ptr
        return max((ptr[i + 1] - ptr[i] for i in ids), default=0)

    def add(self, resources, latency_s, inline, bottleneck) -> int:
        self.res.extend(resources)
        self.res_ptr.append(len(self.res))
        self.latency_s.append(latency_s)
        self.inline_reduce.append(inline)
        self.bottleneck_Bps.append(bottleneck)
        return len(self.latency_s) - 1

    def matrix(self, pad: int) -> np.ndarray:
        """Resources of every path as rows of a matrix, short rows padded with ``pad``.

        The rows sit at the top of a buffer with room to grow (half as many rows again when it
        is reallocated), so paths added since the last call are written after the others
        instead of the whole matrix being copied each time; the result is a view of it (the
        same values as a fresh conversion: tests/test_routing_structure.py)."""
        n = len(self.latency_s)
        kept = self._matrix
        if kept is not None and kept[0] == n and kept[1] == pad:
            return kept[2][:n]
        start = kept[0] if kept is not None and kept[1] == pad and 0 < kept[0] <= n else 0
        ptr = np.asarray(self.res_ptr[start:n + 1], dtype=np.int64)
        lens = np.diff(ptr)
        width = int(lens.max()) if n else 1
        old = kept[2] if start else None
        if old is not None and old.shape[1] >= width and old.shape[0] >= n:
            buf = old
        else:
            if old is not None:
                width = max(width, old.shape[1])
            buf = np.full((n + n // 2 if start else n, width), pad, dtype=np.int64)
            if old is not None:
                buf[:start, :old.shape[1]] = old[:start]
        new = buf[start:n, :width]
        new[...] = pad  # rows past the old ones may hold nothing yet, or (a reused buffer) pad
        mask = np.arange(width)[None, :] < lens[:, None]
        new[mask] = np.asarray(self.res[ptr[0]:ptr[-1]], dtype=np.int64)
        self._matrix = (n, pad, buf)
        return buf[:n]

    def arrays(self):
        """(res_ptr, res, latency_s, inline_reduce, bottleneck_Bps) as numpy arrays."""
        n = len(self.latency_s)
        kept = self._arrays
        if kept is not None and kept[0] == n:
            return kept[1]
        start = kept[0] if kept is not None and kept[0] <= n else 0
        new = (np.asarray(self.res_ptr[start + 1 if start else 0:n + 1], dtype=np.int64),
               np.asarray(self.res[self.res_ptr[start]:], dtype=np.int64),
               np.asarray(self.latency_s[start:], dtype=float), np.asarray(self.inline_reduce[start:], dtype=bool),
               np.asarray(self.bottleneck_Bps[start:], dtype=float))
        out = tuple(np.concatenate([a, b]) for a, b in zip(kept[1], new, strict=True)) if start else new
        self._arrays = (n, out)
        return out


def _fingerprint(graph) -> list:
    """What the compiled view depends on, flat: the graph object, then every node with its
    ``kind`` and ``spec``, then every node's successors and the specs of its out-links, in
    the graph's order. Two fingerprints compare equal (by identity first, so in a fraction
    of a millisecond) exactly when the graph still holds the same nodes, links and specs."""
    if not isinstance(graph, nx.DiGraph) or graph.is_multigraph():
        raise bad_value("graph", type(graph).__name__, "a networkx DiGraph")
    out = [graph]
    put = out.extend
    try:  # networkx's own dicts, read directly: the views cost several times more
        for n, d in graph._node.items():
            put((n, d.get("kind"), d.get("spec")))
        for u, nbrs in graph._succ.items():
            out.append(u)
            put(nbrs)
            put([d.get("spec") for d in nbrs.values()])
    except AttributeError:
        raise TopologyError("graph: its node or edge attributes are not dicts; edit it with networkx calls") from None
    return out


def _check_graph(topo) -> list:
    """Refuse, in one line, a graph hcsim cannot run (edited by hand after it was built);
    returns the NPUs as :meth:`Topology._npu_nodes` does."""
    g = topo.graph
    where = f"topology {topo.name!r}"
    if not isinstance(g, nx.DiGraph) or g.is_multigraph():
        raise bad_value("graph", type(g).__name__, "a networkx DiGraph")
    if g.number_of_nodes() > MAX_NODES or g.number_of_edges() > MAX_LINKS:
        raise WorkLimitError(f"graph = {g.number_of_nodes():,} nodes, {g.number_of_edges():,} links: at most "
                             f"{MAX_NODES:,} nodes and {MAX_LINKS:,} links (hcsim.limits) in {where}")
    for n in g:
        if not isinstance(n, str) or not n:
            raise TopologyError(f"node {n!r}: node names are non-empty strings ({where})")
    npus = topo._npu_nodes()
    if len(npus) > MAX_NPUS:
        raise WorkLimitError(f"graph = {len(npus):,} NPUs: at most {MAX_NPUS:,} (hcsim.limits.MAX_NPUS) in {where}")
    for u, v, d in g.edges(data=True):
        if u == v:
            raise TopologyError(f"link {u}->{v}: a link joins two different nodes ({where})")
        if not isinstance(d.get("spec"), LinkSpec):
            raise TopologyError(f"link {u}->{v}: needs a LinkSpec under 'spec', has "
                                f"{type(d.get('spec')).__name__} ({where})")
    return npus


COMPILED_SEARCH_PAIRS = 256
"""A :meth:`_Compiled.route_many` call with at least this many node pairs not routed yet searches
them with the compiled search (:mod:`hcsim.topology._search_kernel`, numba: ``hcsim[fast]``;
``HCSIM_NO_NUMBA=1``: never), the same paths in the same order as the Python search
(about 10-30 us a pair on a pod, the compiled one 1-6 us)."""

COLD_SEARCH_PAIRS = 16384
"""In a process that has not imported numba yet, the compiled search waits for a call with this
many pairs: numba's start-up (about 0.3 s) costs what the Python search of about as many does."""

COLD_SEARCH_GROWN = 500_000
"""... or until this process's Python searches have grown their breadth-first layers by this many
nodes (about 0.3 s of them at about 0.6 us a node), after which numba's start-up pays for itself
even on calls of few pairs: a 32 x 32 x 16 torus's 16,383 star pairs, searched in calls of a few
hundred, grew 14.8M nodes in 9.8 s of CPU (:data:`hcsim.topology.routing.GROWN`)."""

COLD_SEARCH_CHUNK = 512
""":meth:`_Compiled.route_many` searches a call's pairs in chunks of this many while the compiled
search is not loaded (:func:`_search_cold`), so that a call whose Python searches grow past
:data:`COLD_SEARCH_GROWN` hands the rest to it: the bmtree broadcast's 16,383 pairs on a
32 x 32 x 16 torus took 12.9 s of CPU in one Python call (3.4 s so). The same routes either way (the
compiled search gives the Python search's paths, in its order)."""

_SEARCH = None  # the compiled search: None not looked for yet, False unavailable


def _search_cold() -> bool:
    """Whether the compiled search has not been looked for yet (it may still be loaded)."""
    return _SEARCH is None and not os.environ.get("HCSIM_NO_NUMBA")


def _shifted(after, by: int):
    """``after`` with its pair index counted from ``by`` pairs earlier (None stays None)."""
    if after is None or not by:
        return after
    return lambda k, ids: after(k + by, ids)


def _compiled_search(pairs: int) -> bool:
    """Whether :func:`~hcsim.topology._search_kernel.search_many` is in use for ``pairs`` pairs
    (loaded into ``_SEARCH`` on first use)."""
    global _SEARCH
    if _SEARCH is None:
        if os.environ.get("HCSIM_NO_NUMBA"):
            _SEARCH = False
        elif pairs < COLD_SEARCH_PAIRS and "numba" not in sys.modules and routing.GROWN < COLD_SEARCH_GROWN:
            return False
        else:
            try:
                from ._search_kernel import search_many
            except ImportError:
                _SEARCH = False
            else:
                _SEARCH = search_many
    return _SEARCH is not False


def warm_search() -> bool:
    """Compile the compiled search now (numba keeps it in its cache, as
    :func:`hcsim.engine.fairshare.warm_kernels` does the max-min kernels, which calls this);
    returns whether it is in use."""
    if not _compiled_search(COLD_SEARCH_PAIRS):
        return False
    adj = [[(1, 0)], [(0, 1)]]
    for bound in ((), (SEARCH_PIECE_LINKS,)):  # unbounded, and in pieces (route_many with ``ahead``)
        _SEARCH(*_csr(adj), *_csr([[(1, 1)], [(0, 0)]]), np.array([0], dtype=np.int64), np.array([1], dtype=np.int64),
                MAX_PATHS, *bound)
    return True


def _csr(adj) -> tuple:
    """``(ptr, neighbour, link)`` arrays of adjacency lists ``[[(neighbour, link), ...], ...]``."""
    ptr = np.zeros(len(adj) + 1, dtype=np.int64)
    np.cumsum([len(a) for a in adj], out=ptr[1:])
    flat = [way for a in adj for way in a]
    ways = np.array(flat, dtype=np.int64).reshape(len(flat), 2)
    return ptr, ways[:, 0].copy(), ways[:, 1].copy()


SEARCH_PIECE_LINKS = 1 << 22
"""Links a piece of a bounded compiled search finds before its costs are checked (32 MB of them):
:meth:`_Compiled._search_new`."""


def _joined(pieces) -> tuple:
    """``(pair_ptr, path_ptr, links)`` of consecutive pieces of one search, as one search's."""
    if len(pieces) == 1:
        return pieces[0]
    pair_ptrs, path_ptrs, links = [pieces[0][0]], [pieces[0][1]], [pieces[0][2]]
    n_paths, n_links = pieces[0][1].size - 1, pieces[0][2].size
    for pair_ptr, path_ptr, more in pieces[1:]:
        pair_ptrs.append(pair_ptr[1:] + n_paths)
        path_ptrs.append(path_ptr[1:] + n_links)
        links.append(more)
        n_paths, n_links = n_paths + path_ptr.size - 1, n_links + more.size
    return np.concatenate(pair_ptrs), np.concatenate(path_ptrs), np.concatenate(links)


def _search_costs(pair_ptr: np.ndarray, path_ptr: np.ndarray) -> tuple:
    """For each pair of a compiled search: the links of its shortest path (all its paths are that
    long; 0 for a pair not reached) and the links over all the paths found (what it walked)."""
    searched = path_ptr[pair_ptr[1:]] - path_ptr[pair_ptr[:-1]]
    some = pair_ptr[1:] > pair_ptr[:-1]  # (a pair not reached has no path: its error comes in order)
    shortest = np.zeros(searched.size, dtype=np.int64)
    first = pair_ptr[:-1][some]
    shortest[some] = path_ptr[first + 1] - path_ptr[first]
    return shortest, searched


def _rows_of(off: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Positions of rows starting at ``off`` with ``n`` entries each (concatenated)."""
    total = int(n.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    return np.arange(total, dtype=np.int64) + np.repeat(off - (np.cumsum(n) - n), n)


def _ecmp_many(src: np.ndarray, dst: np.ndarray, n_paths: np.ndarray, seed: int) -> np.ndarray:
    """:func:`~hcsim.topology.routing.ecmp_index` of many pairs (``uint64`` node arrays; ``n_paths``
    at least 1 each): the same hash, its products and sums taken modulo 2**64 by uint64 arithmetic."""
    mask = 2**64 - 1
    with np.errstate(over="ignore"):
        x = src * np.uint64(0x9E3779B97F4A7C15) + dst * np.uint64(0xC2B2AE3D27D4EB4F) + np.uint64(
            (int(seed) * 0x165667B19E3779F9) & mask)
        x ^= x >> np.uint64(29)
        x = x * np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(32)
    return (x % n_paths.astype(np.uint64)).astype(np.int64)


@dataclass
class _Found:
    """What :meth:`_Compiled._search_new` found: the route keys of a :meth:`_Compiled.route_many`
    call (``keys``, one per pair), those not made yet (``new``, in order of first appearance),
    and the paths the compiled search gave for each of these, in that order (new route k's
    paths ``pair_ptr[k]:pair_ptr[k + 1]``, path q's links ``links[path_ptr[q]:path_ptr[q + 1]]``)."""

    keys: list
    new: dict
    pair_ptr: np.ndarray
    path_ptr: np.ndarray
    links: np.ndarray

    def ends(self) -> tuple:
        """The new routes' source and destination nodes (int64 arrays)."""
        src, dst = list(zip(*self.new, strict=True))[:2]
        return np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)

    def search(self, python):
        """``search(src, dst, max_paths)``: these paths as lists of links for the pairs searched,
        ``python(src, dst, max_paths)`` for any other."""
        todo = {}
        for k, key in enumerate(self.new):
            todo.setdefault(key[:2], k)
        flat, pair_ptr, path_ptr = self.links.tolist(), self.pair_ptr.tolist(), self.path_ptr.tolist()

        def search(src, dst, max_paths):
            k = todo.get((src, dst))
            if k is None or max_paths != MAX_PATHS:
                return python(src, dst, max_paths)
            return [flat[path_ptr[q]:path_ptr[q + 1]] for q in range(pair_ptr[k], pair_ptr[k + 1])]
        return search


_PAUSE_LINKS = 16384
"""Compiling a graph of at least this many links pauses the cyclic collector
(:func:`~hcsim.topology.routing.collector_paused`), without a full collection first: compiling
is short, and the run that follows (a simulation's) makes one before its own paused work,
which frees a finished call's state then (a collection here, 60 ms at 2,048 NPUs, found it
and the run's found nothing)."""


class _Compiled:
    """Integer view of a topology: link and endpoint resources, adjacency, route cache.

    **Canonical order.** Nodes are indexed NPUs first, then the other nodes, each group in
    the graph's order; links are ordered by (source index, destination index), so each
    node's adjacency lists run in its neighbours' index order. That is exactly the order a
    file written by :func:`~hcsim.topology.io.save_topology` lists them in (NPUs, then nodes)
    and however its links were declared, so a saved and reloaded topology has the same
    indices, the same path search order and the same ECMP choices as the original
    (docs/architecture.md, "Decisions").

    ``fingerprint`` is the graph's :func:`_fingerprint` when it was built; it also keeps the
    specs it saw alive, so no new spec can reuse one's identity."""

    def __init__(self, topo: Topology, fingerprint: list | None = None):
        if topo.graph.number_of_edges() < _PAUSE_LINKS:
            self._build(topo, fingerprint)
            return
        with collector_paused():  # a large fabric's adjacency: tuples per link, no cycle
            self._build(topo, fingerprint)

    def _build(self, topo: Topology, fingerprint: list | None) -> None:
        g = topo.graph
        self.fingerprint = _fingerprint(g) if fingerprint is None else fingerprint
        _check_graph(topo)
        self.topo = topo
        kinds = g.nodes(data="kind")
        self.node_names = [n for n, k in kinds if k == "npu"] + [n for n, k in kinds if k != "npu"]
        self.node_index = {n: i for i, n in enumerate(self.node_names)}
        index = self.node_index
        self.links = sorted(g.edges, key=lambda e: (index[e[0]], index[e[1]]))
        specs = [g.edges[e]["spec"] for e in self.links]
        self.link_specs = specs
        self.num_links = len(self.links)
        caps = [s.bandwidth_Bps for s in specs]
        self.out_adj = [[] for _ in self.node_names]
        self.in_adj = [[] for _ in self.node_names]
        for li, (u, v) in enumerate(self.links):
            ui, vi = self.node_index[u], self.node_index[v]
            self.out_adj[ui].append((vi, li))
            self.in_adj[vi].append((ui, li))
        # Endpoint resources: virtual links after the real ones.
        self.tx_res = {}
        self.rx_res = {}
        self.reduce_Bps = np.full(len(self.node_names), np.inf)
        for n, d in g.nodes(data=True):
            if d["kind"] != "npu":
                continue
            i = self.node_index[n]
            s = d["spec"]
            self.reduce_Bps[i] = s.reduce_Bps
            if s.half_duplex:
                self.tx_res[i] = self.rx_res[i] = len(caps)
                caps.append(s.duplex_Bps)
            else:
                if s.injection_Bps is not None:
                    self.tx_res[i] = len(caps)
                    caps.append(s.injection_Bps)
                if s.ejection_Bps is not None:
                    self.rx_res[i] = len(caps)
                    caps.append(s.ejection_Bps)
        # Engine resources: one per NPU that caps send + receive together.
        self.engine_res = {}
        for n, d in g.nodes(data=True):
            if d["kind"] == "npu" and d["spec"].engine_Bps is not None:
                self.engine_res[self.node_index[n]] = len(caps)
                caps.append(d["spec"].engine_Bps)
        # Exchange resources: one per NPU that limits its exchanges (traffic with peers that
        # send back to it in the same step, both directions and all such peers together).
        self.exchange_res = {}
        for n, d in g.nodes(data=True):
            if d["kind"] == "npu" and d["spec"].exchange_Bps is not None:
                self.exchange_res[self.node_index[n]] = len(caps)
                caps.append(d["spec"].exchange_Bps)
        self.capacity_Bps = np.asarray(caps, dtype=float)
        self.paths = PathStore()
        self._search_cache = None  # the Python search's per-node layers (SearchCache), made on first use
        self._routes: dict[tuple[int, int, str, int], tuple[int, ...]] = {}
        self._walked: dict[tuple[int, int], int] = {}  # node pair -> links over its shortest paths
        self._grown: dict[tuple[int, int], int] = {}  # node pair -> nodes its Python search grew (> FREE_GROWN)
        self._io_cap = None  # route_many's per-node end capacities, made on first use
        self._csr = None  # the adjacency as CSR arrays (out, then in), for the compiled search
        self._io_arrays = None  # _route_found's per-node NIC resources and per-link figures, as arrays
        self._lat_rank = None  # each link's latency's rank among the distinct ones, + 1
        # Per-link and per-resource figures as Python lists: a route reads a few of each.
        self._link_lat = [s.latency_s for s in specs]
        self._link_inline = [s.inline_reduce for s in specs]
        self._caps = self.capacity_Bps.tolist()
        # Per node: its (injection, ejection, engine, exchange) resources, each a 0- or 1-list.
        self._ends = [tuple([table[n]] if n in table else []
                            for table in (self.tx_res, self.rx_res, self.engine_res, self.exchange_res))
                      for n in range(len(self.node_names))]

    @property
    def _search(self) -> SearchCache:
        """The Python search (:class:`~hcsim.topology.routing.SearchCache`), made on first use: a
        run whose pairs all go to the compiled search never needs its per-node tables."""
        if self._search_cache is None:
            self._search_cache = SearchCache(self.out_adj, self.in_adj)
        return self._search_cache

    def route(self, src: int, dst: int, policy: str = "ecmp", seed: int = 0, qps: int = 1,
              pair: bool = False) -> tuple[int, ...]:
        """Path ids a transfer from node ``src`` to node ``dst`` uses under ``policy``.

        With ``qps > 1`` (ECMP only) the transfer is split over that many queue pairs, each
        hashed onto a path on its own (two may land on the same path), as RDMA traffic with
        HCCL_RDMA_QPS_PER_CONNECTION is. ``pair=True`` adds both NPUs' exchange limits (for a
        transfer whose receiver sends back to its sender in the same step, in a message
        regime where the transport does not overlap an exchange's directions).
        """
        # Python ints from here on (a numpy seed or node index would overflow the ECMP hash).
        src, dst, seed, qps = int(src), int(dst), int(seed), int(qps)
        key = (src, dst, policy, seed, qps, pair)
        hit = self._routes.get(key)
        if hit is not None:
            return hit
        if policy not in ROUTING_POLICIES:
            raise bad_value("routing", policy, "one of " + ", ".join(ROUTING_POLICIES))
        before = routing.GROWN
        link_paths = self._search.all_shortest_paths(src, dst, MAX_PATHS)
        self._walked[(src, dst)] = sum(map(len, link_paths))
        self._note_grown(src, dst, before)
        lat_of = self._link_lat.__getitem__
        if len(link_paths) > 1:  # fewest hops first, then the lowest latency (UB before RoCE on A3)
            lats = [sum(map(lat_of, lp)) for lp in link_paths]
            best = min(lats)
            link_paths = [lp for lp, lat in zip(link_paths, lats, strict=True) if lat <= best * (1 + 1e-12)]
        if not link_paths:
            raise TopologyError(
                f"route {self.node_names[src]} -> {self.node_names[dst]}: unreachable in topology "
                f"{self.topo.name!r}")
        if policy == "ecmp":
            link_paths = ([link_paths[ecmp_index(src, dst, len(link_paths), seed)]] if len(link_paths) == 1 or qps == 1
                          else [link_paths[ecmp_index(src, dst, len(link_paths), seed * 64 + q)] for q in range(qps)])
        # Resources each path adds at its ends, in the order a path lists them: the sender's
        # injection, then the receiver's ejection, both engines, both exchange limits.
        ends = self._ends
        tail = ends[dst][1] + ends[src][2] + ends[dst][2]
        if pair:
            tail = tail + ends[src][3] + ends[dst][3]
        head = ends[src][0]
        inline_of, cap_of = self._link_inline.__getitem__, self._caps.__getitem__
        add = self.paths.add
        ids = []
        for lp in link_paths:
            res = [*head, *lp, *tail]
            lat = float(sum(map(lat_of, lp)))
            inline = bool(lp) and all(map(inline_of, lp))
            ids.append(add(res, lat, inline, float(min(map(cap_of, res)))))
        out = tuple(ids)
        self._routes[key] = out
        return out

    def walked(self, src: int, dst: int) -> int:
        """Links over all the shortest paths (up to ``MAX_PATHS`` of them) found from node ``src``
        to node ``dst``, what finding them walked; 0 for a pair not routed yet. A property of
        the pair, not of what was searched before: the work bound prices a search by it."""
        return self._walked.get((src, dst), 0)

    def _note_grown(self, src: int, dst: int, before: int) -> None:
        """Record what the search of ``src`` -> ``dst`` just grew (``routing.GROWN`` was ``before``);
        a search that grew nothing (its layers were kept) leaves the pair's record as it was."""
        nodes = routing.GROWN - before
        if nodes > FREE_GROWN:
            self._grown[(src, dst)] = nodes
        elif nodes and self._grown:
            self._grown.pop((src, dst), None)

    @property
    def searches_grew(self) -> bool:
        """Whether any Python search of this topology grew past :data:`~hcsim.limits.FREE_GROWN`
        (so :meth:`grown` can be skipped, per pair, where none did)."""
        return bool(self._grown)

    def grown(self, src: int, dst: int) -> int:
        """Nodes the Python search's breadth-first layers grew to route ``src`` -> ``dst`` when
        that was more than :data:`~hcsim.limits.FREE_GROWN` (the compiled search grows none it
        counts), else 0: the work bound prices it (:func:`~hcsim.limits.grow_work`). Unlike
        :meth:`walked` it depends on the searches before (their layers are kept)."""
        return self._grown.get((src, dst), 0)

    def route_many(self, srcs, dsts, pairs, policy: str = "ecmp", seed: int = 0, qps: int = 1,
                   out: list | None = None, after=None, ahead=None) -> list:
        """:meth:`route` of many node pairs: ``[route(s, d, policy, seed, qps, p) for s, d, p in
        zip(srcs, dsts, pairs)]``, the same path ids added to the store in the same order.

        One call for a step's pairs instead of one per pair: the options are checked once, each
        node's end resources joined once, and the bottleneck of a path is the smaller of its
        links' (kept per link path) and its end resources' (``min`` is exact in any grouping).

        Parameters
        ----------
        srcs, dsts : sequence of int
            Node indices (Python ints).
        pairs : sequence of bool
            ``pair`` for each, as for :meth:`route`.
        policy, seed, qps
            As for :meth:`route`.
        out : list, optional
            Append the routes to this list (those found before an error stay in it).
        after : callable, optional
            ``after(k, ids)`` once pair ``k`` is routed (and appended), before the next is: it
            may raise to stop the routing there (a work bound).
        ahead : callable, optional
            ``ahead(hops, walked)`` after each piece of about :data:`SEARCH_PIECE_LINKS` links
            the compiled search finds, before any route is made: int64 arrays, per new route
            searched so far, of the links on its shortest path (all its paths are that long; at
            most the resources ``after`` will see on it) and of the links over all the paths it
            found (``walked``). It may raise to refuse the whole call before the rest is searched
            and before the routes, which can hold far more than the search's arrays, are built
            (a ring of 16,384 NPUs: 67M links for a star's pairs).

        Returns
        -------
        list of tuple of int
            ``out``, with each pair's path ids appended.
        """
        seed, qps = int(seed), int(qps)
        if policy not in ROUTING_POLICIES:
            raise bad_value("routing", policy, "one of " + ", ".join(ROUTING_POLICIES))
        out = [] if out is None else out
        if len(srcs) <= 256:
            return self._route_many(srcs, dsts, pairs, policy, seed, qps, out, after, ahead)
        with collector_paused():  # tens of thousands of tuples and lists, none in a cycle
            done = 0
            while _search_cold() and len(srcs) - done > 2 * COLD_SEARCH_CHUNK:
                # the compiled search not loaded yet: a chunk by the Python search, after which it
                # may have grown enough to load it for the rest (a torus: each search grows far)
                part = slice(done, done + COLD_SEARCH_CHUNK)
                self._route_many(srcs[part], dsts[part], pairs[part], policy, seed, qps, out,
                                 _shifted(after, done), ahead)
                done += COLD_SEARCH_CHUNK
            if done:
                srcs, dsts, pairs, after = srcs[done:], dsts[done:], pairs[done:], _shifted(after, done)
            return self._route_many(srcs, dsts, pairs, policy, seed, qps, out, after, ahead)

    def _search_new(self, srcs, dsts, pairs, policy, seed, qps, ahead=None) -> _Found | None:
        """The compiled search's paths (:mod:`hcsim.topology._search_kernel`) for
        :meth:`route_many`'s routes not made yet; None when it is not in use or there are fewer
        than :data:`COMPILED_SEARCH_PAIRS` node pairs to search. With ``ahead`` (see
        :meth:`route_many`) the search runs in pieces of about :data:`SEARCH_PIECE_LINKS` links,
        ``ahead`` seeing all the pairs searched so far after each, so that it can stop a batch
        whose paths alone would not fit in memory (a star on a 2 x 8,192 torus: up to 64 paths
        of 4,096 links for each of 16,383 pairs, 4.3G links)."""
        if len(srcs) < COMPILED_SEARCH_PAIRS or not _compiled_search(len(srcs)):
            return None
        if not len(srcs) == len(dsts) == len(pairs):
            return None  # (the loop refuses them)
        routes, same = self._routes, itertools.repeat
        keys = list(zip(srcs, dsts, same(policy), same(seed), same(qps), pairs, strict=False))  # (lengths checked)
        new = dict.fromkeys(key for key in keys if key not in routes)  # in order of first appearance
        if len(new) < COMPILED_SEARCH_PAIRS:
            return None
        if self._csr is None:
            self._csr = tuple(a for adj in (self.out_adj, self.in_adj) for a in _csr(adj))
        src, dst = list(zip(*new, strict=True))[:2]  # (a pair new under both exchange flags: searched twice)
        src, dst = np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)
        if ahead is None:
            return _Found(keys, new, *_SEARCH(*self._csr, src, dst, MAX_PATHS))
        pieces, costs, done = [], [], 0
        while done < src.size:
            piece = _SEARCH(*self._csr, src[done:], dst[done:], MAX_PATHS, SEARCH_PIECE_LINKS)
            pieces.append(piece)
            costs.append(_search_costs(piece[0], piece[1]))
            done += piece[0].size - 1
            ahead(*(np.concatenate(c) for c in zip(*costs, strict=True)))  # every pair searched so far
        return _Found(keys, new, *_joined(pieces))

    def _route_many(self, srcs, dsts, pairs, policy, seed, qps, out, after, ahead=None) -> list:
        routes, walked = self._routes, self._walked
        found = self._search_new(srcs, dsts, pairs, policy, seed, qps, ahead)
        if found is not None and not self.engine_res and not self.exchange_res and self._route_found(found, out, after):
            return out
        search = self._search.all_shortest_paths if found is None else found.search(self._search.all_shortest_paths)
        ends = self._ends
        lat_of, inline_of, cap_of = self._link_lat.__getitem__, self._link_inline.__getitem__, self._caps.__getitem__
        store = self.paths
        s_res, s_ptr, s_lat, s_inline, s_cap = (store.res, store.res_ptr, store.latency_s, store.inline_reduce,
                                                store.bottleneck_Bps)
        ecmp = policy == "ecmp"
        first = len(out)
        only_io = not self.engine_res and not self.exchange_res
        if only_io and self._io_cap is None:  # per node: its injection and ejection capacity, or None
            self._io_cap = [tuple(min(map(cap_of, e), default=None) for e in end[:2]) for end in ends]
        io_cap = self._io_cap
        for src, dst, pair in zip(srcs, dsts, pairs, strict=True):
            key = (src, dst, policy, seed, qps, pair)
            hit = routes.get(key)
            if hit is not None:
                out.append(hit)
                if after is not None:
                    after(len(out) - 1 - first, hit)
                continue
            before = routing.GROWN
            link_paths = search(src, dst, MAX_PATHS)
            walked[(src, dst)] = sum(map(len, link_paths))
            self._note_grown(src, dst, before)
            lats = None
            if len(link_paths) > 1:
                lats = [sum(map(lat_of, lp)) for lp in link_paths]
                cut = min(lats) * (1 + 1e-12)
                if max(lats) > cut:  # (mostly every path ties and is kept)
                    kept = [k for k, lat in enumerate(lats) if lat <= cut]
                    link_paths = [link_paths[k] for k in kept]
                    lats = [lats[k] for k in kept]
            if not link_paths:
                raise TopologyError(
                    f"route {self.node_names[src]} -> {self.node_names[dst]}: unreachable in topology "
                    f"{self.topo.name!r}")
            if ecmp and len(link_paths) > 1:
                if qps == 1:
                    pick = [ecmp_index(src, dst, len(link_paths), seed)]
                else:
                    pick = [ecmp_index(src, dst, len(link_paths), seed * 64 + q) for q in range(qps)]
                link_paths = [link_paths[k] for k in pick]
                lats = [lats[k] for k in pick]
            end_s, end_d = ends[src], ends[dst]
            head = end_s[0]
            if only_io:  # no engine or exchange resource anywhere: the ends are the two NIC limits
                tail = end_d[1]
                end_cap = io_cap[src][0]
                cap_d = io_cap[dst][1]
                if end_cap is None or (cap_d is not None and cap_d < end_cap):
                    end_cap = cap_d
            else:
                tail = end_d[1] + end_s[2] + end_d[2]
                if pair:
                    tail = tail + end_s[3] + end_d[3]
                end_cap = min(map(cap_of, head + tail), default=None)
            ids = []
            for n, lp in enumerate(link_paths):
                s_res.extend(head)
                s_res.extend(lp)
                s_res.extend(tail)
                s_ptr.append(len(s_res))
                s_lat.append(float(sum(map(lat_of, lp)) if lats is None else lats[n]))
                s_inline.append(bool(lp) and all(map(inline_of, lp)))
                cap = min(map(cap_of, lp), default=end_cap)
                if cap is None:  # no resource at all: the ValueError route() raises
                    cap = min(())
                elif end_cap is not None and end_cap < cap:
                    cap = end_cap
                s_cap.append(float(cap))
                ids.append(len(s_lat) - 1)
            hit = routes[key] = tuple(ids)
            out.append(hit)
            if after is not None:
                after(len(out) - 1 - first, hit)
        return out

    def _route_found(self, found: _Found, out: list, after) -> bool:
        """:meth:`_route_many`'s loop over pairs the compiled search has searched, on a fabric
        whose only end resources are NIC limits, the store's arrays made with numpy; False
        (nothing done) where that loop has to run instead: a pair that cannot be reached (its
        error comes in order), or a path without any resource.

        The same routes: each new route in order of first appearance gets the next path ids,
        its paths those the loop keeps (the lowest latency ones, the ECMP picks), each path's
        latency Python's ``sum`` of its links' in order (as there), its bottleneck the ``min``
        of its resources' capacities and its inline flag whether every link reduces inline
        (exact in any grouping). If ``after`` raises after pair k, the routes first made after
        pair k are taken back out of the store, as the loop would never have made them."""
        keys, new, pair_ptr, path_ptr = found.keys, found.new, found.pair_ptr, found.path_ptr
        counts = np.diff(pair_ptr)  # new route j searched as pair j
        if not counts.all():
            return False
        chosen, lats, per_key = self._choose(new, counts, found)
        starts = np.zeros(len(new) + 1, dtype=np.int64)
        np.cumsum(per_key, out=starts[1:])
        n_links = path_ptr[chosen + 1] - path_ptr[chosen]
        links = found.links[_rows_of(path_ptr[chosen], n_links)]
        src, dst = found.ends()
        src, dst = np.repeat(src, per_key), np.repeat(dst, per_key)
        if self._io_arrays is None:  # per node: its injection and ejection resource (-1: none) and capacity
            tx = np.array([self.tx_res.get(n, -1) for n in range(len(self.node_names))], dtype=np.int64)
            rx = np.array([self.rx_res.get(n, -1) for n in range(len(self.node_names))], dtype=np.int64)
            cap = np.append(self.capacity_Bps, np.inf)  # (-1: none, no limit)
            self._io_arrays = (tx, rx, cap[tx], cap[rx], np.array(self._link_inline, dtype=bool),
                               np.array(self._caps, dtype=float))
        tx, rx, tx_cap, rx_cap, inline_of, cap_of = self._io_arrays
        head, tail = tx[src], rx[dst]
        some = n_links > 0
        if not (some | (head >= 0) | (tail >= 0)).all():
            return False  # a path of no resource at all: the loop raises min()'s error
        end_cap = np.minimum(tx_cap[src], rx_cap[dst])
        width = (head >= 0) + n_links + (tail >= 0)
        res_end = np.cumsum(width)
        res = np.empty(int(res_end[-1]) if width.size else 0, dtype=np.int64)
        first = res_end - width
        res[first[head >= 0]] = head[head >= 0]
        res[_rows_of(first + (head >= 0), n_links)] = links
        res[res_end[tail >= 0] - 1] = tail[tail >= 0]
        link_start = np.cumsum(n_links) - n_links
        link_cap = np.full(chosen.size, np.inf)
        inline = np.zeros(chosen.size, dtype=bool)
        if some.any():
            link_cap[some] = np.minimum.reduceat(cap_of[links], link_start[some])
            inline[some] = np.logical_and.reduceat(inline_of[links], link_start[some])
        store = self.paths
        base_res, base_id = len(store.res), len(store.latency_s)
        store.res.extend(res.tolist())
        store.res_ptr.extend((res_end + base_res).tolist())
        store.latency_s.extend(lats)
        store.inline_reduce.extend(inline.tolist())
        store.bottleneck_Bps.extend(np.minimum(link_cap, end_cap).tolist())
        routes, walked = self._routes, self._walked
        bounds = (starts + base_id).tolist()
        searched = (path_ptr[pair_ptr[1:]] - path_ptr[pair_ptr[:-1]]).tolist()  # links over each one's paths
        for j, key in enumerate(new):
            routes[key] = tuple(range(bounds[j], bounds[j + 1]))
            walked[key[:2]] = searched[j]
        first_out = len(out)
        try:
            for i, key in enumerate(keys):
                hit = routes[key]
                out.append(hit)
                if after is not None:
                    after(i, hit)
        except BaseException:
            made = len({key for key in keys[:len(out) - first_out] if key in new})
            if made < len(new):  # the routes first made after the last pair routed: never made
                for key in itertools.islice(new, made, None):
                    del routes[key]
                cut = bounds[made]
                del store.res[store.res_ptr[cut]:], store.res_ptr[cut + 1:], store.latency_s[cut:]
                del store.inline_reduce[cut:], store.bottleneck_Bps[cut:]
            raise
        return True

    def _choose(self, new, counts, found):
        """The paths the routes ``new`` keep (path positions in ``found``, in route order), their
        latencies (Python floats, as :meth:`_route_many` sums them) and how many each route
        keeps: of a pair's paths, those within ``1e-12`` of the lowest latency, of which ECMP
        picks one per queue pair (:func:`~hcsim.topology.routing.ecmp_index`, in uint64).

        A path's latency is Python's ``sum`` of its links' latencies in order, a function of that
        sequence alone: it is summed once per distinct sequence (a fabric has few)."""
        cand = _rows_of(found.pair_ptr[:-1], counts)  # every path of every new route, route by route
        lat = self._latencies(cand, found)
        key_of = np.repeat(np.arange(len(new)), counts)
        best = np.minimum.reduceat(lat, np.cumsum(counts) - counts)
        kept = lat <= (best * (1 + 1e-12))[key_of]
        n_kept = np.bincount(key_of[kept], minlength=len(new))
        cand, lat, key_of = cand[kept], lat[kept], key_of[kept]
        policy, seed, qps = next(iter(new))[2:5]
        if policy != "ecmp" or (n_kept == 1).all():
            return cand, lat.tolist(), n_kept
        # ECMP: route j keeps its ecmp_index-th path (one per queue pair) when it has several
        start = np.cumsum(n_kept) - n_kept
        src, dst = (a.astype(np.uint64) for a in found.ends())
        several = n_kept > 1
        if qps == 1:
            off = np.where(several, _ecmp_many(src, dst, n_kept, seed), 0)
        else:  # queue pair q's pick, q = 0..qps-1, for a route of several paths; its one path for the others
            which = np.stack([_ecmp_many(src, dst, n_kept, seed * 64 + q) for q in range(qps)], axis=1)
            off = np.concatenate([which[j] if several[j] else which[j, :1] * 0 for j in range(len(new))])
        per_key = np.where(several, qps, 1)
        pos = np.repeat(start, per_key) + off
        return cand[pos], lat[pos].tolist(), per_key

    def _latencies(self, paths, found) -> np.ndarray:
        """Each path's latency as ``sum(map(self._link_lat.__getitem__, links))``: a function of
        its sequence of link latencies, summed once per distinct sequence (a fabric has few
        distinct link latencies), each sequence told by a number: its latencies' ranks among
        the distinct ones (+ 1, 0 past its end) as digits. A sequence too long for that (more
        than 62 bits of digits) is summed path by path."""
        path_ptr, flat = found.path_ptr, found.links
        n = path_ptr[paths + 1] - path_ptr[paths]
        if self._lat_rank is None:
            self._lat_rank = np.unique(np.array(self._link_lat, dtype=float), return_inverse=True)[1].ravel() + 1
        radix = int(self._lat_rank.max(initial=0)) + 1
        width = int(n.max(initial=0))
        lat_of = self._link_lat.__getitem__
        if width * math.log2(radix) > 62:
            links, ptr = flat.tolist(), path_ptr.tolist()
            return np.array([float(sum(map(lat_of, links[ptr[q]:ptr[q + 1]]))) for q in paths.tolist()])
        digits = np.zeros((paths.size, width), dtype=np.int64)
        digits[np.arange(width)[None, :] < n[:, None]] = self._lat_rank[flat[_rows_of(path_ptr[paths], n)]]
        code = digits @ (radix ** np.arange(width, dtype=np.int64))
        _, first, inverse = np.unique(code, return_index=True, return_inverse=True)
        links, ptr = flat.tolist(), path_ptr[paths[first]].tolist()
        sums = [float(sum(map(lat_of, links[a:a + k]))) for a, k in zip(ptr, n[first].tolist(), strict=True)]
        return np.array(sums)[inverse]
