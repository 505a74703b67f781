"""The analytical fast path (sweep, select) answers exactly what per-point simulate() does.

sweep(mode="analytical") and select(mode="analytical") prepare each algorithm once -- schedule,
verification, transfer count, path parameters -- and price every size with the closed form
alone. That is only right because a schedule's rank pairs, chunk flows and transfer count do
not depend on its size: the first test checks that claim for every algorithm family, the
others compare the fast answers with simulate() point by point.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np
import pandas as pd
import pytest

import hcsim
from hcsim import analytical
from hcsim.algorithms.registry import REGISTRY, get_algorithm, make_args, run_builder
from hcsim.algorithms.schedule import COLLECTIVES, ROOTED, min_size
from hcsim.api import rank_layout
from hcsim.errors import WorkLimitError
from hcsim.hccl.selection import candidates
from hcsim.study import select
from hcsim.topology import leaf_spine
from hcsim.topology.io import load_topology

LOOPED = 300_000_017  # over the 200 MB CCL buffer on an Ascend topology, and not a multiple of 8
SIZES = [8, 1000, 4096, 65_537, 1 << 20, 10_000_019, 1 << 28, LOOPED]


def reference_sweep(topo, collective, sizes, algorithms, **kwargs) -> pd.DataFrame:
    """sweep() as it was: one simulate() and one row dict per point."""
    p = len(topo.resolve_ranks(kwargs.get("ranks")))
    rows = []

    def refused(algo, n, reason):
        return {"collective": collective, "algorithm": getattr(algo, "__name__", algo),
                "mode": kwargs.get("mode", "des"), "ranks": p, "size_bytes": n, "time_us": math.nan,
                "algbw_GBps": math.nan, "busbw_GBps": math.nan, "refused": reason}

    for n in sizes:
        for algo in algorithms:
            if n < min_size(collective, p):
                rows.append(refused(algo, n, f"size = {n}: at least {min_size(collective, p)}"))
                continue
            try:
                r = hcsim.simulate(topo, collective, n, algo, **kwargs)
            except WorkLimitError as exc:
                rows.append(refused(algo, n, str(exc)))
                continue
            row = r.row()
            row["selected"] = r.algorithm
            if isinstance(algo, str):
                row["algorithm"] = algo
            rows.append(row)
    df = pd.DataFrame(rows)
    if "refused" in df:
        df["refused"] = df["refused"].fillna("")
    return df


def assert_same(fast: pd.DataFrame, ref: pd.DataFrame) -> None:
    assert list(fast.columns) == list(ref.columns)
    for col in ("time_us", "algbw_GBps", "busbw_GBps"):  # bit for bit, NaN where refused
        a, b = fast[col].to_numpy(), ref[col].to_numpy()
        assert np.array_equal(a, b, equal_nan=True), (col, fast[a != b], ref[a != b])
    if "refused" in ref:  # the messages of too-small sizes are sweep's own wording
        assert ((fast["refused"] == "") == (ref["refused"] == "")).all()
        fast, ref = fast.drop(columns="refused"), ref.drop(columns="refused")
    pd.testing.assert_frame_equal(fast, ref, check_exact=True)


def _signature(schedule):
    """Everything of a schedule that is not bytes: rank pairs, reduce flags, chunk ranges."""
    flows = []
    for step in schedule.steps:
        st = step.chunks() if getattr(step, "is_message", False) else step
        flows.append((step.src.tobytes(), step.dst.tobytes(), step.reduce.tobytes(), st.src.tobytes(),
                      st.dst.tobytes(), st.reduce.tobytes(), st.chunk_lo.tobytes(), st.chunk_hi.tobytes()))
    owner = None if schedule.chunk_owner is None else np.asarray(schedule.chunk_owner).tobytes()
    return schedule.num_chunks, owner, schedule.barriers, flows


LAYOUTS = [((8,), (1,)), ((6,), (1,)), ((4, 4, 4), (3,)), ((4, 4, 4, 4), (2, 2)), ((5, 3), (2,))]


@pytest.mark.parametrize("servers,pods", LAYOUTS)
def test_schedule_structure_does_not_depend_on_size(servers, pods):
    """The claim the fast path rests on, for every algorithm (flat and HCCL's hierarchical
    candidates): the same steps between the same ranks over the same chunks at every size,
    down to one byte per rank and at sizes the chunks do not divide."""
    p = sum(servers)
    checked = 0
    for coll in COLLECTIVES:
        names = set(REGISTRY[coll]) | set(candidates(coll, servers, pods, "910B"))
        if len(set(servers)) == 1 and len(servers) > 1 and coll in ("allreduce", "allgather", "reducescatter"):
            names |= {"ring/ring", "mesh/hd", "ring/nb"}
        for name in sorted(names):
            spec = get_algorithm(coll, name)
            root = 1 if coll in ROOTED else 0
            sigs = {}
            for n in sorted({min_size(coll, p), min_size(coll, p) + 1, 7 * p + 3, 1000, 65_537, 1 << 20,
                             (1 << 20) + 7, 3 << 20}):
                args = make_args(coll, p, n, root, servers, pods)
                try:
                    sched = run_builder(spec, args)
                except hcsim.errors.HcsimError:
                    break  # the algorithm does not take this layout (at any size)
                # an algorithm with a shape (the pipelined chain's segment count) has one structure per shape
                sigs.setdefault(None if spec.shape is None else spec.shape(args), []).append(_signature(sched))
            for same in sigs.values():
                assert all(s == same[0] for s in same), (coll, name, servers)
            assert spec.shape is not None or len(sigs) <= 1, (coll, name)
            checked += bool(sigs)
    assert checked > 30


@pytest.mark.parametrize("collective", COLLECTIVES)
def test_sweep_matches_simulate_atlas800t_a2(collective):
    """Every algorithm, sizes from one byte per rank to a CCL-buffer-looped size that no
    chunk count divides, bit for bit."""
    topo = load_topology("atlas800t-a2")
    algos = [a for a, spec in REGISTRY[collective].items() if not spec.in_network]  # no NVLink SHARP switch here
    fast = hcsim.sweep(topo, collective, sizes=SIZES, algorithms=algos, mode="analytical")
    assert_same(fast, reference_sweep(topo, collective, SIZES, algos, mode="analytical"))
    assert fast["time_us"].notna().all()


@pytest.mark.parametrize("collective", ["allreduce", "allgather", "broadcast", "alltoall", "scatter"])
def test_sweep_matches_simulate_on_a_pod_with_selection(collective):
    """Hierarchical candidates, "auto" and "best", on a 3-server A2 pod with ECMP on 2 QPs."""
    topo = load_topology("atlas900-a2-pod", servers=3)
    servers, pods = rank_layout(topo, topo.npus)
    algos = candidates(collective, servers, pods, topo.product) + ["auto", "best"]
    kw = dict(mode="analytical", qps=2)
    sizes = [64, 4097, 1 << 22, LOOPED]
    assert_same(hcsim.sweep(topo, collective, sizes=sizes, algorithms=algos, **kw),
                reference_sweep(topo, collective, sizes, algos, **kw))


def test_sweep_matches_simulate_with_options():
    """Spray routing, a dtype the SDMA engine cannot reduce inline (vector-core gamma, scaled),
    a subset of ranks and a root: the same as simulate()."""
    topo = leaf_spine(2, 4, 2, 25e9, 1e-6)
    for coll, kw in [("allreduce", dict(routing="spray", dtype="int64", reduce_op="prod")),
                     ("reduce", dict(root=3, ranks=6, ecmp_seed=7, step_overhead_s=2e-6)),
                     ("alltoallv", dict(send_matrix=np.arange(64).reshape(8, 8)))]:
        algos = [a for a, spec in REGISTRY[coll].items() if not spec.in_network]  # a leaf-spine: no NVLS switch
        sizes = [64, 8192, 1_000_000]
        kw = dict(kw, mode="analytical")
        assert_same(hcsim.sweep(topo, coll, sizes=sizes, algorithms=algos, **kw),
                    reference_sweep(topo, coll, sizes, algos, **kw))


def test_refusals_match_simulate():
    """A work bound between one and two CCL-buffer pieces' transfers refuses exactly the points
    simulate() refuses, with its message."""
    topo = load_topology("atlas800t-a2")
    transfers = sum(len(s) for s in run_builder(get_algorithm("allreduce", "ring"),
                                                 make_args("allreduce", 8, 1 << 20)).steps)
    kw = dict(mode="analytical", max_transfers=transfers + 1)
    fast = hcsim.sweep(topo, "allreduce", sizes=SIZES, algorithms=["ring"], **kw)
    ref = reference_sweep(topo, "allreduce", SIZES, ["ring"], **kw)
    assert_same(fast, ref)
    assert list(fast["refused"]) == list(ref["refused"])
    assert list(fast["refused"] != "") == [n > 200 * 2**20 for n in SIZES]  # the looped sizes: two pieces


def test_select_analytical_matches_simulate():
    topo = load_topology("atlas800t-a2")
    df = select(topo, "allreduce", sizes=SIZES, mode="analytical")
    for _, row in df.iterrows():
        chosen = hcsim.simulate(topo, "allreduce", int(row["size_bytes"]), "auto", mode="analytical")
        assert row["hccl_choice"] == chosen.algorithm and row["hccl_time_us"] == chosen.time_us
        assert row["selected_by"] == chosen.config["selected_by"]
        for col in df.columns:
            if col.startswith("time_us["):
                algo = col[len("time_us["):-1]
                r = hcsim.simulate(topo, "allreduce", int(row["size_bytes"]), algo, mode="analytical")
                assert row[col] == r.time_s * 1e6


def test_path_parameters_cache_follows_the_topology():
    """A cached answer equals a fresh one, and an edited graph is priced afresh."""
    topo = leaf_spine(2, 4, 2, 25e9, 1e-6)
    sched = run_builder(get_algorithm("allreduce", "ring"), make_args("allreduce", 8, 4096))
    key = ("test", "ring", "allreduce", 8)
    first = analytical.cached_path_parameters(topo, topo.npus, key, sched)
    assert first == analytical.path_parameters(topo, topo.npus, sched)
    assert analytical.cached_path_parameters(topo, topo.npus, key, None) == first  # not rebuilt
    for _, _, data in topo.graph.edges(data=True):  # every link 4x slower
        data["spec"] = dataclasses.replace(data["spec"], bandwidth_Bps=data["spec"].bandwidth_Bps / 4)
    again = analytical.cached_path_parameters(topo, topo.npus, key, sched)
    assert again.beta_s_per_B == pytest.approx(4 * first.beta_s_per_B)


def test_an_algorithm_with_a_shape_is_priced_once_per_shape_as_simulate_prices_it(monkeypatch):
    """The pipelined chain's segment count follows the size: the fast path prepares each shape once
    (its schedule built, counted and verified, its path parameters cached with the shape in the
    key) and prices every size with the closed form, value for value as simulate() does, which it
    no longer calls (before, each point was simulated: 50 times slower, docs/performance.md)."""
    from hcsim import api

    # shapes 1, 1, 16, 16; 1 GiB: five 200 MiB CCL-buffer pieces (1,024 segments) and 24 MiB (384); 5 GiB: 1,024
    sizes = [8, 100_000, 1 << 20, (1 << 20) + 7, 1 << 30, 5 << 30]
    topo = load_topology("atlas800t-a2")
    want = {c: [hcsim.simulate(topo, c, n, "chain", mode="analytical").time_us for n in sizes]
            for c in ("broadcast", "reduce")}
    built = []
    real = api._SpecPlan._prepare

    def counting(self, first, shape=None):
        built.append((self.spec.collective, shape))
        return real(self, first, shape)

    @functools.wraps(api.simulate)  # sweep checks its options against simulate's signature
    def fail(*args, **kwargs):
        raise AssertionError(f"simulate called for {args[1:4]}")

    monkeypatch.setattr(api, "simulate", fail)
    monkeypatch.setattr(api._SpecPlan, "_prepare", counting)
    for c in ("broadcast", "reduce"):
        df = hcsim.sweep(topo, c, sizes=sizes, algorithms=["chain"], mode="analytical")
        assert df["time_us"].tolist() == want[c]
    # one preparation per shape the pieces have, not one per size
    assert sorted(built) == sorted((c, k) for c in ("broadcast", "reduce") for k in {1, 16, 384, 1024})


def test_fast_path_does_not_call_simulate(monkeypatch):
    """The fast path answers these itself (a sweep that fell back to simulate() would still be
    right, only slow): every flat and hierarchical algorithm, "auto" and "best", looped sizes."""
    from hcsim import api

    @functools.wraps(api.simulate)  # sweep checks its options against simulate's signature
    def fail(*args, **kwargs):
        raise AssertionError(f"simulate called for {args[1:4]}")

    pod = load_topology("atlas900-a2-pod", servers=2)
    servers, pods = rank_layout(pod, pod.npus)
    monkeypatch.setattr(api, "simulate", fail)
    monkeypatch.setattr(hcsim.study, "simulate", fail)
    for coll in COLLECTIVES:
        # every algorithm the server can run (the chain too: its shapes are prepared once each)
        hcsim.sweep("atlas800t-a2", coll, sizes=SIZES, mode="analytical",
                    algorithms=[a for a, spec in REGISTRY[coll].items() if not spec.in_network])
        algos = [a for a in candidates(coll, servers, pods, pod.product) if get_algorithm(coll, a).cost]
        if algos:  # (hierarchical alltoallv has no closed form)
            hcsim.sweep(pod, coll, sizes=SIZES, algorithms=algos + ["auto"], mode="analytical")
    select(pod, "allgather", sizes=SIZES[1:], mode="analytical")


def _path_parameters_pair_by_pair(topo, rank_nodes, schedule, routing, seed, qps, inline_reduce, factor, levels):
    """path_parameters as first written: one pair at a time (the reference)."""
    net = topo.compiled()
    p = schedule.p
    node = [net.node_index[n] for n in rank_nodes]
    pairs, reducing = set(), set()
    for step in schedule.steps:
        keys = (step.src * p + step.dst).tolist()
        pairs.update(keys)
        reducing.update(k for k, r in zip(keys, step.reduce.tolist(), strict=True) if r)
    server = np.repeat(np.arange(len(schedule.args.server_sizes)), schedule.args.server_sizes)
    pods = schedule.args.pods or (len(schedule.args.server_sizes),)
    pod = np.repeat(np.arange(len(pods)), pods)[server]
    lat, bw, gamma = [0.0] * levels, [np.inf] * levels, [0.0] * levels
    for key in sorted(pairs):
        a, b = divmod(key, p)
        lv = 0 if levels == 1 or server[a] == server[b] else 1 if pod[a] == pod[b] or levels == 2 else 2
        ids = list(net.route(node[a], node[b], routing, seed, qps))
        _, _, p_lat, p_inline, p_bw = net.paths.arrays()
        lat[lv] = max(lat[lv], float(p_lat[ids].max()))
        bw[lv] = min(bw[lv], float(p_bw[ids[0]]) if len(ids) == 1 else analytical._spray_bandwidth(net, ids))
        if key in reducing and not (inline_reduce and p_inline[ids].all()):
            g = 1.0 / float(net.reduce_Bps[node[b]])
            gamma[lv] = max(gamma[lv], g * factor if factor != 1.0 else g)
    return [(lat[lv], 0.0 if bw[lv] == np.inf else 1.0 / bw[lv], gamma[lv]) for lv in range(levels)]


@pytest.mark.parametrize("routing,qps,inline,factor", [("ecmp", 1, True, 1.0), ("spray", 1, False, 1.0),
                                                        ("ecmp", 3, False, 2.5)])
def test_path_parameters_match_pair_by_pair(routing, qps, inline, factor):
    topo = load_topology("atlas900-a2-pod", servers=3)
    servers, pods = rank_layout(topo, topo.npus)
    for coll, name in [("allreduce", "ring"), ("allreduce", "mesh/nhr"), ("reducescatter", "nb"),
                       ("alltoall", "mesh/pairwise"), ("reduce", "tree")]:
        spec = get_algorithm(coll, name)
        sched = run_builder(spec, make_args(coll, len(topo.npus), 1 << 20, 0, servers, pods))
        got = analytical.path_parameters(topo, topo.npus, sched, routing, 5, 0.0, spec.levels, qps,
                                         inline_reduce=inline, reduce_time_factor=factor)
        got = [got] if spec.levels == 1 else list(got)
        want = _path_parameters_pair_by_pair(topo, topo.npus, sched, routing, 5, qps, inline, factor, spec.levels)
        assert [(m.alpha_s, m.beta_s_per_B, m.gamma_s_per_B) for m in got] == want, (coll, name)
