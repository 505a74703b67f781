"""A step's routing read from the fabric's route table (numpy lookups) equals routing each
transfer with ``net.route``, and counts the routing work of each new node pair once."""

from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hcsim.algorithms import build_schedule
from hcsim.algorithms.schedule import Step
from hcsim.engine.des import EngineConfig, FlowSimulator
from hcsim.limits import WORK_PER_INSTANT, WORK_PER_ROUTED_STEP
from hcsim.topology import leaf_spine
from hcsim.topology.io import load_topology


def _step(src, dst):
    n = len(src)
    return Step(np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64), np.full(n, 1000, dtype=np.int64),
                np.zeros(n, dtype=bool), None, None)


def _expected(sim, step):
    net, cfg = sim.net, sim.cfg
    _, _, p_lat, p_inline, _ = net.paths.arrays()
    groups = [net.route(sim.rank_node[s], sim.rank_node[d], cfg.routing, cfg.ecmp_seed, cfg.qps)
              for s, d in zip(step.src.tolist(), step.dst.tolist(), strict=True)]
    _, _, p_lat, p_inline, _ = net.paths.arrays()
    return groups, [float(p_lat[list(g)].max()) for g in groups], [bool(p_inline[list(g)].all()) for g in groups]


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), routing=st.sampled_from(["ecmp", "spray"]), qps=st.integers(1, 3),
       kind=st.sampled_from(["leaf_spine", "pod"]))
def test_route_table_equals_per_pair_routes(seed, routing, qps, kind):
    rng = np.random.default_rng(seed)
    if kind == "pod":
        topo = load_topology("atlas900-a2-pod", servers=4, servers_per_leaf=2)
    else:
        topo = leaf_spine(int(rng.integers(2, 4)), int(rng.integers(2, 4)), int(rng.integers(1, 4)), 1e9)
    p = topo.num_npus
    sim = FlowSimulator(topo, topo.npus, build_schedule("allgather", "ring", p, 1000 * p),
                        EngineConfig(routing=routing, qps=qps if routing == "ecmp" else 1))
    seen, steps_seen = set(), set()
    for _ in range(int(rng.integers(1, 8))):
        n = int(rng.integers(0, 3 * p))
        src = rng.integers(0, p, n)
        dst = (src + rng.integers(1, p, n)) % p  # never to itself
        if rng.random() < 0.3 and seen:  # pairs routed before, in new arrays
            old = np.array(sorted(seen))
            pick = old[rng.integers(0, len(old), max(n, 1))]
            src, dst = pick[:, 0], pick[:, 1]
        step = _step(src, dst)
        n_tr = len(src)
        before = sim.fabric.route_work
        r = sim._routing(step)
        pairs = {(int(sim.rank_node[s]), int(sim.rank_node[d])) for s, d in zip(src.tolist(), dst.tolist(), strict=True)}
        content = tuple(zip(sim.rank_node[src].tolist(), sim.rank_node[dst].tolist(), strict=True))
        # a step with the node pairs of an earlier one reuses its routing and counts nothing; any
        # other counts its fixed cost, one unit a transfer, and each node pair new to the fabric
        expected = 0 if content in steps_seen else WORK_PER_ROUTED_STEP + n_tr + WORK_PER_INSTANT * len(
            pairs - {(int(sim.rank_node[a]), int(sim.rank_node[b])) for a, b in seen})
        assert sim.fabric.route_work - before == expected
        steps_seen.add(content)
        seen |= {(int(s), int(d)) for s, d in zip(src.tolist(), dst.tolist(), strict=True)}
        groups, lat, inline = _expected(sim, step)
        assert [tuple(r.sub_path[r.sub_ptr[i]:r.sub_ptr[i + 1]].tolist()) for i in range(len(step))] == groups
        assert r.lat.tolist() == lat
        assert r.inline.tolist() == inline
        assert r.single == all(len(g) == 1 for g in groups)
        everyone = np.arange(p)
        assert r.degree(everyone).tolist() == (np.bincount(src, minlength=p) + np.bincount(dst, minlength=p)).tolist()
        part = everyone[r.degree(everyone) > 0]  # each rank's transfers, through the (dense or sparse) CSR
        at = r.positions(part)
        for rank, i in zip(part.tolist(), at.tolist(), strict=True):
            assert sorted(r.out_tr[r.out_ptr[i]:r.out_ptr[i + 1]].tolist()) == np.flatnonzero(src == rank).tolist()
            assert sorted(r.in_tr[r.in_ptr[i]:r.in_ptr[i + 1]].tolist()) == np.flatnonzero(dst == rank).tolist()


def test_route_table_merges_its_recent_keys():
    """Many small additions (merged into the sorted array now and then) keep every key's group."""
    from hcsim.engine.des import _RouteTable

    rng = np.random.default_rng(3)
    t, truth = _RouteTable(), {}
    p_lat, p_inline = rng.random(5000), rng.random(5000) < 0.5
    paths = SimpleNamespace(latency_s=p_lat.tolist(), inline_reduce=p_inline.tolist())
    for _ in range(60):
        keys = np.unique(rng.integers(0, 4000, int(rng.integers(1, 40))))
        new = keys[t.lookup(keys) == -2]
        t.count(new)
        assert (t.lookup(new) == -1).all()
        groups = [tuple(rng.integers(0, 5000, int(rng.integers(1, 4))).tolist()) for _ in new]
        t.set_groups(new, groups, paths)
        truth.update(zip(new.tolist(), groups, strict=True))
        every = np.array(sorted(truth))
        gid = t.lookup(every)
        assert (gid >= 0).all()
        got = [tuple(t.flat[t.g_off[g]:t.g_off[g] + t.g_n[g]].tolist()) for g in gid]
        assert got == [truth[k] for k in every.tolist()]
        assert np.allclose(t.g_lat[gid], [p_lat[list(truth[k])].max() for k in every.tolist()])


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), routing=st.sampled_from(["ecmp", "spray"]), qps=st.integers(1, 3))
def test_small_step_routing_equals_the_vectorised_one(seed, routing, qps):
    # steps of at most 8 transfers take the list-based path; both paths give the same routing,
    # indexed by rank (many ranks take part) or by position in the step's members (few do)
    from hcsim.engine.des import _RouteTable

    rng = np.random.default_rng(seed)
    topo = load_topology("atlas900-a2-pod", servers=int(rng.choice([1, 2, 16])))
    p = topo.num_npus
    sim = FlowSimulator(topo, topo.npus, build_schedule("allgather", "ring", p, 1000 * p),
                        EngineConfig(routing=routing, qps=qps if routing == "ecmp" else 1))
    table = _RouteTable()
    for _ in range(5):
        n = int(rng.integers(0, 9))
        src = rng.integers(0, p, n)
        step = _step(src, (src + rng.integers(1, p, n)) % p)
        keys = (sim.rank_node[step.src] * sim.n_nodes + sim.rank_node[step.dst]) * 2
        small, large = sim._route_small(step, keys, table), sim._route_large(step, keys, table)
        for name in ("sub_ptr", "sub_path", "lat", "inline", "out_ptr", "out_tr", "in_ptr", "in_tr", "deg"):
            assert getattr(small, name).tolist() == getattr(large, name).tolist(), name
        assert small.single == large.single and small.one_each == large.one_each
        assert (small.members is None) == (large.members is None)
        if small.members is not None:
            assert small.members.tolist() == large.members.tolist()
