"""Fuzz topology loading and building: YAML files mutated from the built-in ones and from
small builder-form and explicit-form files (also truncated, non-UTF-8 and hostile YAML), and
the builders called directly. A topology that loads must simulate a small call to a finite
time, and survive save_topology -> load_topology unchanged."""

from __future__ import annotations

import hashlib

from hypothesis import strategies as st

import hcsim
from hcsim.topology.io import load_topology, save_topology

from .harness import Violation, check_result, close, fuzz, guarded
from .strategies import (
    _BUILDER_HOSTILE,
    builder_call,
    out_path,
    show,
    shrink_call,
    topology_doc,
    unwrap,
    write_case_file,
)

OVERRIDES = st.one_of(
    st.just({}), st.just({}),
    st.fixed_dictionaries({}, optional={
        "servers": st.sampled_from([1, 2, 0, -1, "2", 2.0, True, None, 10**6, 2**63]),
        "nodes": st.sampled_from([1, 2, 0, "x"]),
        "n": st.sampled_from([2, 3, 0, 10**7]),
        "bandwidth_GBps": st.sampled_from([10, 0, -1, float("nan"), float("inf"), "10", 1e-320, 1e308]),
        "latency_us": st.sampled_from([0, 1, -1, float("nan"), 1e308]),
        "bandwidth_Bps": st.sampled_from([1e9, 0, float("nan")]),
        "bogus": st.sampled_from([1]),
        "dims": st.sampled_from([(2, 2), [2, 3], (0,), "22"]),
    }),
)


ROUNDTRIP_LINKS = 20_000
"""Topologies with more directed links skip the save -> load round trip (a 300-NPU full mesh,
89,700 links, takes about 4 s to save and 6 s to load again: each call within the limit, the
three together not)."""


def exercise(topo, where: str):
    """A loaded topology: NPUs, a small simulated call with a finite time, and the same time
    after save_topology -> load_topology."""
    if not isinstance(topo, hcsim.Topology):
        raise Violation(f"{where} gave {type(topo).__name__}, not a Topology")
    if topo.num_npus < 1:
        raise Violation(f"{where} has {topo.num_npus} NPUs")
    if topo.num_npus < 2:
        return topo
    r = hcsim.simulate(topo, "allreduce", 4096, "ring", ranks=2)
    check_result(r, 4096, 2)
    ana = hcsim.simulate(topo, "allreduce", 4096, "ring", ranks=2, mode="analytical") \
        if topo.defaults.message_regimes is None else None
    if ana is not None:
        check_result(ana, 4096, 2)
    if topo.graph.number_of_edges() > ROUNDTRIP_LINKS:
        return topo  # the 10 s limit is per case: load + save + load of a big file is three calls' work
    saved = out_path(f"roundtrip-{hashlib.sha1(where.encode()).hexdigest()[:12]}.yaml")
    save_topology(topo, saved)
    try:
        back = load_topology(saved)
    except hcsim.HcsimError as exc:
        raise Violation(f"save_topology wrote a file load_topology refuses: {exc}") from None
    r2 = hcsim.simulate(back, "allreduce", 4096, "ring", ranks=2)
    if not close(r2.time_s, r.time_s, 1e-12):  # GB/s and us in the file: a last-bit change is expected
        raise Violation(f"after save_topology -> load_topology: {r2.time_s!r} s, before {r.time_s!r} s")
    return topo


def load_and_exercise(path, overrides):
    return exercise(load_topology(str(path), **overrides), f"{path} {overrides}")


@fuzz(st.tuples(topology_doc(), OVERRIDES), weight=1.5)
def test_topology_file(case):
    """load_topology on mutated YAML files (built-in, builder form, explicit form)."""
    (raw, origin), overrides = case
    path = write_case_file(raw, ".yaml")
    kw = ", ".join(f"{k}={show(v)}" for k, v in overrides.items())
    repro = f"hcsim.load_topology({str(path)!r}{', ' + kw if kw else ''})  # {origin}"
    return repro, guarded(load_and_exercise, path, overrides)


def build_and_exercise(call):
    from hcsim.topology import ascend, builders

    args, kw = call.real()
    fn = {"hcsim.topology.builders": builders, "hcsim.topology.ascend": ascend}[call.fn.rsplit(".", 1)[0]]
    topo = getattr(fn, call.fn.rsplit(".", 1)[1])(*args, **kw)
    return exercise(topo, call.repro())


@fuzz(builder_call(), weight=1.0, shrink=shrink_call)
def test_builders(call):
    """The topology builders (generic and Ascend) with small valid and odd arguments."""
    return call.repro(), guarded(build_and_exercise, call)


__all__ = ["_BUILDER_HOSTILE", "unwrap"]
