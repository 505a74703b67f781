"""The fabric's small compiled passes against the numpy expressions they replace, exactly."""

import numpy as np
import pytest

pytest.importorskip("numba")


def test_demand_sums_equal_bincount_bit_for_bit():
    from hcsim.engine._kernels import demand_sums

    rng = np.random.default_rng(5)
    for trial in range(200):
        n_res, n_paths, width, n_slots = (int(rng.integers(1, 50)), int(rng.integers(1, 40)),
                                          int(rng.integers(1, 6)), int(rng.integers(1, 300)))
        pad = n_res
        path_mat = np.where(rng.random((n_paths, width)) < 0.8, rng.integers(0, n_res, (n_paths, width)), pad)
        path_bw = rng.choice([np.inf, 1e30, 2.5e10, 2.03e10, 1 / 3], n_paths) * rng.uniform(0.5, 2, n_paths)
        big = 1e12
        s_active = rng.random(n_slots) < 0.6
        s_path = rng.integers(0, n_paths, n_slots)
        paths = s_path[s_active]
        mat = path_mat[paths]
        want = np.bincount(mat.ravel(), np.repeat(np.minimum(path_bw[paths], big), width), minlength=pad + 1)
        want[pad] = 0.0
        got = np.full(pad + 1, np.nan)
        demand_sums(s_active, s_path, path_mat, path_bw, big, pad, got)
        assert np.array_equal(got, want), trial


def test_active_flows_equal_numpy():
    from hcsim.engine._kernels import active_flows

    rng = np.random.default_rng(6)
    for _ in range(50):
        n_slots, n_res = int(rng.integers(0, 200)), int(rng.integers(1, 100))
        s_active = rng.random(n_slots) < 0.5
        s_path = rng.integers(0, 1000, n_slots)
        demand, hot_at = rng.choice([0.0, 1.0, 2.0], n_res), rng.choice([0.5, 1.0, 1.5], n_res)
        hot = rng.random(n_res) < 0.5
        slots, paths = active_flows(s_active, s_path, demand, hot_at, hot)
        assert np.array_equal(slots, np.flatnonzero(s_active))
        assert np.array_equal(paths, s_path[s_active])
        assert np.array_equal(hot, demand > hot_at)


@pytest.mark.parametrize("case", ["ring", "torus", "pod", "leaf_spine"])
def test_unbounded_runs_count_the_routing_work_of_bounded_ones(case):
    """Without a work bound the searches' work is summed after routing instead of pair by pair
    (``des._search_work``): the same total, on fabrics whose paths are long (a ring, a torus:
    hop and walk work) and short (a pod, a leaf-spine: none)."""
    import hcsim
    from hcsim.topology import leaf_spine, load_topology, ring, torus

    topo = {"ring": lambda: ring(64, 25e9, 1e-6), "torus": lambda: torus((12, 12), 25e9, 1e-6),
            "pod": lambda: load_topology("atlas900-a2-pod", servers=4),
            "leaf_spine": lambda: leaf_spine(4, 4, 2, 25e9, 1e-6)}[case]()
    for op, algo in (("allreduce", "ring"), ("alltoall", "auto"), ("broadcast", "auto")):
        free = hcsim.simulate(topo, op, "1MiB", algo, max_work=None)
        bound = hcsim.simulate(topo, op, "1MiB", algo, max_work=10**15)
        assert free.config["work"] == bound.config["work"], (op, algo)
        assert free.time_s == bound.time_s


def test_hot_outside_equals_numpy():
    from hcsim.engine._kernels import hot_outside

    rng = np.random.default_rng(7)
    for _ in range(300):
        n = int(rng.integers(1, 60))
        demand, hot_at = rng.choice([0.0, 1.0, 2.0], n), rng.choice([0.5, 1.0, 1.5], n)
        res_ids = rng.choice(n, int(rng.integers(0, n + 1)), replace=False).astype(np.int64)
        on = rng.random(res_ids.size + int(rng.integers(0, 4))) < 0.7  # (the groups' entries follow)
        mark = np.zeros(n, dtype=bool)
        kept = np.zeros(n, dtype=bool)
        kept[res_ids[on[:res_ids.size]]] = True
        assert hot_outside(demand, hot_at, res_ids, on, mark) == bool(((demand > hot_at) & ~kept).any())
        assert not mark.any()
