"""The 910B's one-server mesh executors size their CCL-buffer loops from the whole buffer
(hcsim.hccl.buffer.loop_buffer_bytes; hcomm's legacy ascend910 executors, docs/facts.md s10).

Every expected loop count below is worked by hand from HCCL's rules, not read off hcsim."""

import math

import pytest

import hcsim
from hcsim.algorithms.registry import make_args
from hcsim.hccl.buffer import loop_buffer_bytes, loop_pieces
from hcsim.hccl.selection import HcclConfig
from hcsim.topology.ascend import atlas800t_a2, atlas900_a2_pod

MiB = 1 << 20
B = 200 * MiB  # HCCL_BUFFSIZE's default, 209,715,200 bytes per CCL buffer
AG_PER_RANK = (B - 16384) // 128 * 128  # CalcLoopMaxCount: 209,698,816


def loops(collective, nbytes, p=8, product="910B", algorithm="mesh", servers=None, inline=True):
    a = make_args(collective, p, nbytes, servers=(p,) if servers is None else servers)
    return sum(loop_pieces(a, loop_buffer_bytes(a, B, product, algorithm, inline)).values())


@pytest.mark.parametrize("per_rank, expected", [
    (AG_PER_RANK, 1), (AG_PER_RANK + 1, 2), (256 * MiB, 2),  # 2 GiB on 8 NPUs: 256 MiB a rank, 2 loops
    (25 * MiB, 1),  # buffer / ranks would have made it 1 too; 26 MiB shows the difference
    (26 * MiB, 1),
])
def test_allgather_loops_over_a_ranks_whole_buffer(per_rank, expected):
    assert loops("allgather", 8 * per_rank) == expected


def test_reducescatter_and_allreduce_loop_over_the_whole_buffer_a_rank():
    assert loops("reducescatter", 8 * B) == 1 and loops("reducescatter", 8 * B + 8) == 2
    assert loops("allreduce", 8 * B) == 1 and loops("allreduce", 8 * B + 1) == 2
    assert loops("allreduce", 2 << 30) == 2  # 2 GiB: 1,677,721,600 bytes a loop
    # where the links cannot reduce inline HCCL runs another executor: buffer / ranks as before
    assert loops("reducescatter", 8 * B, inline=False) == math.ceil(8 * B / (B - B % 8))


def test_alltoall_one_pass_up_to_the_buffer_then_full_mesh_blocks():
    assert loops("alltoall", B) == 1  # the staged executor copies the whole send buffer in once
    assert loops("alltoall", B - 3) == 1
    # above it, blocks of B / (8 x 2) = 13,107,200 bytes a peer while a peer's block passes 1 MiB
    assert loops("alltoall", 256 * MiB) == math.ceil(32 * MiB / (B // 16))  # 3
    assert loops("alltoall", 2 << 30) == math.ceil(256 * MiB / (B // 16))  # 21


@pytest.mark.parametrize("kw", [dict(product="910A"), dict(product="910_93"), dict(product=None),
                                dict(algorithm="ring"), dict(servers=(4, 4))])
def test_other_executors_keep_buffer_over_ranks(kw):
    n = 2 << 30
    assert loops("allgather", n, **kw) == math.ceil(n / (B - B % 8))


def test_simulate_reports_hccls_loop_count_and_both_modes_agree():
    topo = atlas800t_a2()
    for collective, n, expected in (("allgather", 2 << 30, 2), ("alltoall", 256 * MiB, 3), ("allreduce", 2 << 30, 2)):
        a = hcsim.simulate(topo, collective, n, "mesh", mode="analytical")
        d = hcsim.simulate(topo, collective, n, "mesh", mode="des", verify=False)
        assert a.config["buffer_loops"] == d.config["buffer_loops"] == expected
        # a contention-free mesh on uncapped links: the event-driven time is the closed form's
        assert d.time_s == pytest.approx(a.time_s, rel=1e-9)


def test_sweep_follows_the_alltoall_rule_by_size():
    topo = atlas800t_a2()
    sizes = [64 * 1024, B, 256 * MiB, 2 << 30]
    df = hcsim.sweep(topo, "alltoall", sizes, algorithms=["mesh"], mode="analytical")
    assert list(df["size_bytes"]) == sizes
    for n, t in zip(sizes, df["time_us"], strict=True):
        assert t == pytest.approx(hcsim.simulate(topo, "alltoall", n, "mesh", mode="analytical").time_us, rel=1e-12)


def test_several_servers_keep_the_old_rule():
    topo = atlas900_a2_pod(servers=2)
    r = hcsim.simulate(topo, "allgather", 16 * 256 * MiB, "auto", mode="analytical", hccl=HcclConfig())
    assert r.config["buffer_loops"] == math.ceil(16 * 256 * MiB / (B - B % 16))


def test_a_jobs_collective_runs_the_same_loops_as_simulate():
    from hcsim.workload import Workload, run

    topo = atlas800t_a2()
    n = 2 << 30  # 2 loops under HCCL's rule; buffer / ranks made 11, each paying its step overheads again
    w = Workload("one allgather")
    w.collective("ag", w.communicator("all", list(range(8))), "allgather", n, algorithm="mesh")
    job = run(topo, w)
    alone = hcsim.simulate(topo, "allgather", n, "mesh", mode="des", verify=False)
    assert alone.config["buffer_loops"] == 2
    assert job.step_time_s == pytest.approx(alone.time_s, rel=1e-9)


def test_one_pass_alltoall_when_ranks_do_not_divide_the_buffer():
    # review: max(B, n) rounded down by piece_bytes left a 1-2 byte second loop
    topo = atlas800t_a2()
    r = hcsim.simulate(topo, "alltoall", B, "mesh", ranks=[0, 1, 2], mode="analytical")
    assert r.config["buffer_loops"] == 1
    a = make_args("alltoall", 8, 1001, servers=(8,))
    assert sum(loop_pieces(a, loop_buffer_bytes(a, 1001, "910B", "mesh")).values()) == 1


def test_a_tiny_buffer_never_gives_a_rank_less_than_buffer_over_ranks():
    # the 16 KiB reserve on a buffer barely above it left 128 bytes a rank (1,024 loops for 1 MiB, where a smaller
    # buffer made 65): the buffer / ranks rule stands there
    for b in (16511, 16512, 20000):
        a = make_args("allgather", 8, 1 << 20, servers=(8,))
        n = sum(loop_pieces(a, loop_buffer_bytes(a, b, "910B", "mesh")).values())
        assert n <= math.ceil((1 << 20) / (b - b % 8)), b
