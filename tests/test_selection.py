"""HCCL's default selection, HCCL_ALGO in simulate, CCL buffer loops, and "best"."""

import pytest

import hcsim
from hcsim.algorithms import get_algorithm
from hcsim.algorithms.registry import make_args
from hcsim.errors import ConfigError
from hcsim.hccl.algo_env import parse_hccl_algo
from hcsim.hccl.buffer import loop_count, looped
from hcsim.hccl.selection import HcclConfig, candidates, select_algorithm
from hcsim.topology import atlas900_a2_pod, tiered_mesh
from hcsim.verify import verify

A2 = (8,) * 16


@pytest.mark.parametrize("product,coll,size,servers,expected", [
    ("910B", "allreduce", 64 << 20, (8,), "mesh"),            # one server: level 0 only
    ("910B", "broadcast", 1 << 20, (8,), "star"),
    ("910B", "allreduce", 8 << 10, A2, "mesh/nhr"),           # cost comparison, m = 16 >= 4 -> NHR
    ("910B", "allreduce", 8 << 10, (8,) * 2, "mesh/ring"),    # m = 2: ring and NHR tie -> ring
    ("910B", "allreduce", 8 << 10, (8,) * 3, "mesh/ring"),    # m = 3: tie again
    ("910B", "allgather", 256 << 20, A2, "pipeline"),         # >= 2 MB per rank (128 ranks), mesh level 0
    ("910B", "allgather", (256 << 20) - 128, A2, "mesh/nhr"),
    ("910B", "reducescatter", 256 << 20, A2, "pipeline"),
    ("910B", "allreduce", 128 << 20, A2, "pipeline"),         # 128 MB / 128 ranks = 1 MB per rank
    ("910B", "allreduce", (128 << 20) - 128, A2, "mesh/nhr"), # just under 1 MB per rank
    ("910B", "allreduce", 1 << 36, (8,) * 1600, "mesh/hd"),   # pipeline would need > 65535 contexts
    ("910B", "broadcast", 8 << 10, A2, "mesh/nb"),            # HCCL's H-D_R broadcast: NB stands in
    ("910B", "reduce", 8 << 10, A2, "mesh/tree"),
    ("910B", "gather", 8 << 10, A2, "mesh/ring"),
    ("910B", "alltoall", 1 << 20, (8, 4), "pairwise"),        # unequal servers
    ("910B", "sendrecv", 1 << 20, A2, "ring"),
    ("910B", "alltoall", 1 << 20, A2, "mesh/pairwise"),
    ("910A", "allreduce", 1 << 20, (8,), "hd"),               # 910A single server <= 1 MB, 8 ranks
    ("910A", "allreduce", 2 << 20, (8,), "ring"),             # 8P ring
    ("910A", "allreduce", 2 << 20, (4,), "mesh"),             # 4P mesh
    ("910A", "allreduce", 64 << 20, (8,) * 3, "ring/ring"),   # server count not a power of two
    ("910A", "allreduce", 64 << 20, (8,) * 4, "ring/hd"),
    ("910_93", "allreduce", 8 << 10, (16,) * 4, "mesh/nhr"),
])
def test_default_selection_rules(product, coll, size, servers, expected):
    assert select_algorithm(product, coll, size, servers)[0] == expected


def test_deterministic_turns_off_the_reduce_pipelines():
    cfg = HcclConfig(deterministic=True)
    assert select_algorithm("910B", "reducescatter", 256 << 20, A2, config=cfg)[0] == "mesh/nhr"
    assert select_algorithm("910B", "allgather", 256 << 20, A2, config=cfg)[0] == "pipeline"


def test_hccl_algo_constrains_level1():
    algo = parse_hccl_algo("level0:NA;level1:H-D_R")
    assert select_algorithm("910B", "allreduce", 1 << 20, A2, hccl_algo=algo)[0] == "mesh/hd"
    per_op = parse_hccl_algo("allgather=level0:NA;level1:ring")
    assert select_algorithm("910B", "allgather", 64 << 20, A2, hccl_algo=per_op)[0] == "mesh/ring"
    assert select_algorithm("910B", "allreduce", 8 << 10, A2, hccl_algo=per_op)[0] == "mesh/nhr"  # not listed
    ignored = parse_hccl_algo("level0:NA;level1:fullmesh")
    name, why = select_algorithm("910B", "allreduce", 8 << 10, A2, hccl_algo=ignored)
    assert name == "mesh/nhr" and "ignored" in why
    assert select_algorithm("910B", "allreduce", 8 << 10, A2, hccl_algo=parse_hccl_algo("level0:NA;level1:AHC"))[0] \
        == "ahc"
    assert select_algorithm("910B", "allreduce", 8 << 10, (8, 4))[0] == "ahc"  # unequal servers
    assert select_algorithm("910B", "allgather", 8 << 10, (8, 4))[0] == "nhr"


def test_simulate_auto_and_hccl_algo_report_their_choice():
    pod = atlas900_a2_pod(servers=4)
    r = hcsim.simulate(pod, "allreduce", "1M", "auto")
    assert r.algorithm == "mesh/nhr" and "GetDefaultAlgoLevel1V2" in r.config["selected_by"]
    r = hcsim.simulate(pod, "allreduce", "1M", hccl_algo="level0:NA;level1:ring")
    assert r.algorithm == "mesh/ring" and r.config["selected_by"] == "HCCL_ALGO level1 ring"
    with pytest.raises(ConfigError, match="hccl_algo"):
        hcsim.simulate(pod, "allreduce", "1M", "ring", hccl_algo="level0:NA;level1:ring")
    with pytest.raises(ConfigError, match="HCCL_ALGO = 'level1:Ring'"):
        hcsim.simulate(pod, "allreduce", "1M", hccl_algo="level1:Ring")


def test_best_is_the_fastest_candidate():
    pod = atlas900_a2_pod(servers=4)
    r = hcsim.simulate(pod, "allgather", "4M", "best")
    times = r.config["candidates"]
    assert set(times) == set(candidates("allgather", (8,) * 4, (), "910B"))
    assert r.time_s == min(times.values()) and r.algorithm == min(times, key=times.get)


@pytest.mark.parametrize("coll,algo", [("allreduce", "ring"), ("allgather", "hd"), ("reducescatter", "mesh"),
                                       ("alltoall", "pairwise"), ("broadcast", "tree"), ("scatter", "nhr"),
                                       ("allreduce", "mesh/ring"), ("allgather", "pipeline")])
def test_buffer_loops_verify(coll, algo):
    args = make_args(coll, 8, 10000, 3, servers=(4, 4))
    s = looped(get_algorithm(coll, algo), args, 3000)
    assert s.notes["buffer_loops"] == loop_count(10000, 3000) == 4
    verify(s)


def test_buffer_loops_cost_what_the_pieces_cost():
    topo = tiered_mesh((4, 2), (18.3e9, 5e9), (0.6e-6, 4e-6), inline_reduce=(True, False))
    size = 8 * 8 * 64 * 10
    cfg = HcclConfig(buffer_bytes=size // 4)
    des = hcsim.simulate(topo, "allreduce", size, "mesh/ring", hccl=cfg, step_overhead_s=1e-6)
    ana = hcsim.simulate(topo, "allreduce", size, "mesh/ring", hccl=cfg, step_overhead_s=1e-6, mode="analytical")
    one = hcsim.simulate(topo, "allreduce", size // 4, "mesh/ring", step_overhead_s=1e-6)
    assert des.config["buffer_loops"] == 4
    assert des.time_s == pytest.approx(ana.time_s, rel=1e-9)
    assert des.time_s == pytest.approx(4 * one.time_s, rel=1e-9)  # four back-to-back quarter-size runs


def test_expansion_modes_take_their_figures_from_the_topology_file(tmp_path):
    import yaml

    doc = {"name": "x", "builder": "full_mesh", "params": {"n": 4, "bandwidth_GBps": 10},
           "defaults": {"step_overhead_us": 1.0, "launch_overhead_us": 30.0, "expansion_mode": "HOST",
                        "modes": {"AIV": {"step_overhead_us": 0.5, "launch_overhead_us": 5.0}}}}
    path = tmp_path / "modes.yaml"
    path.write_text(yaml.safe_dump(doc))
    host = hcsim.simulate(path, "allgather", 4000, "ring", hccl=HcclConfig())
    aiv = hcsim.simulate(path, "allgather", 4000, "ring", hccl=HcclConfig(expansion_mode="AIV"))
    # ring allgather on 4 ranks: 3 steps of 1000 B at 10 GB/s
    assert host.time_s == pytest.approx(30e-6 + 3 * (1e-6 + 0.1e-6))
    assert aiv.time_s == pytest.approx(5e-6 + 3 * (0.5e-6 + 0.1e-6))
    with pytest.raises(ConfigError, match="figures for HOST, AIV only"):
        hcsim.simulate(path, "allgather", 4000, "ring", hccl=HcclConfig(expansion_mode="AI_CPU"))
    with pytest.raises(ConfigError, match="expansion_mode = 'GPU'"):
        hcsim.simulate(path, "allgather", 4000, "ring", hccl=HcclConfig(expansion_mode="GPU"))


@pytest.mark.parametrize("coll", ["allreduce", "allgather", "reducescatter", "broadcast", "reduce", "scatter",
                                  "gather", "alltoall", "alltoallv", "sendrecv"])
@pytest.mark.parametrize("product,servers", [("910B", 4), ("910A", 2), ("910_93", 4)])
def test_auto_runs_for_every_collective_and_product(coll, product, servers):
    from hcsim.topology import atlas800_9000, atlas900_a3_superpod

    topo = {"910B": lambda: atlas900_a2_pod(servers=servers), "910A": lambda: atlas800_9000(servers=servers),
            "910_93": lambda: atlas900_a3_superpod(nodes=servers)}[product]()
    for size in ("8K", "64M"):
        r = hcsim.simulate(topo, coll, size, "auto")
        assert r.time_s > 0 and r.config["selected_by"]
    assert hcsim.simulate(topo, coll, "8K", "best").config["candidates"]


def test_buffer_pieces_fill_the_buffer_then_the_rest():
    from hcsim.hccl.buffer import piece_sizes

    assert piece_sizes(make_args("allreduce", 4, 5003), 1000) == [1000] * 5 + [3]
    assert piece_sizes(make_args("allreduce", 4, 3000), 1000) == [1000] * 3


def test_ascend_topologies_loop_through_the_buffer_by_default():
    r = hcsim.simulate("atlas800t-a2", "allgather", "1G", "ring")
    assert r.config["buffer_loops"] == 6  # 1 GiB through 200 MiB: five full pieces and the rest
    assert hcsim.simulate(tiered_mesh((2, 2), 1e9), "allgather", "1G", "ring").config["buffer_loops"] == 1


def test_select_reports_no_crossover_between_equal_algorithms():
    from hcsim.study import select

    topo = tiered_mesh((4, 4), (2e9, 25e9))
    df = select(topo, "allgather", sizes=("256K", "64M"), factor=4)
    for size, old, new in df.attrs["crossovers"]:
        row = df[df.size_bytes == size].iloc[0]
        assert row[f"time_us[{old}]"] > row[f"time_us[{new}]"] * (1 + 1e-9)
    for _, row in df.iterrows():
        cand = [row[c] for c in df.columns if c.startswith("time_us[")]
        assert row["best_time_us"] == min(cand)


@pytest.mark.parametrize("mode", ["des", "analytical"])
def test_auto_adds_no_ccl_buffer_off_ascend(mode):
    """On a topology with no product (not an Ascend machine) a call runs through no CCL buffer
    unless hccl= is given; 'auto' and 'best' must not add one (they did: a 512 MiB allreduce
    chosen by auto ran as 3 loops while the same algorithm named ran as one call)."""
    from hcsim.hccl.selection import HcclConfig
    from hcsim.topology import leaf_spine

    t = leaf_spine(2, 4, 2, 25e9, 1e-6)
    auto = hcsim.simulate(t, "allreduce", "512M", "auto", mode=mode)
    named = hcsim.simulate(t, "allreduce", "512M", auto.algorithm, mode=mode)
    assert auto.time_s == named.time_s and auto.config["buffer_loops"] == named.config["buffer_loops"] == 1
    looped = hcsim.simulate(t, "allreduce", "512M", "auto", mode=mode, hccl=HcclConfig())
    assert looped.config["buffer_loops"] == 3 and looped.time_s != auto.time_s
    best = hcsim.simulate(t, "allreduce", "512M", "best", mode=mode)
    assert best.time_s <= named.time_s
    df = hcsim.sweep(t, "allreduce", sizes=["512M"], algorithms=["auto", auto.algorithm], mode=mode)
    assert df["time_us"].iloc[0] == df["time_us"].iloc[1]


def test_select_never_reports_a_best_slower_than_hccls_choice():
    """Ties within rel 1e-9 go to the previous size's best, but not when HCCL's choice is tied
    and faster by a last bit (judge11's pilot: scatter on 7 NPUs at 32 B, best mesh/nb
    3.0010800000000004 us against HCCL's mesh/nhr 3.00108 us, slowdown 0.9999999999999999)."""
    import hcsim
    from hcsim.topology import builders

    d = hcsim.select(builders.single_switch(7, 25e9, 5e-7), "scatter", sizes=(8, 2048))
    assert (d["slowdown"] >= 1).all()
    assert (d["best_time_us"] <= d["hccl_time_us"]).all()
    at32 = d[d["size_bytes"] == 32].iloc[0]
    assert at32["best"] == at32["hccl_choice"] and at32["slowdown"] == 1
