"""Data types and reduce operations: sizes from counts, HCCL's refusals, the vector-core
fallback, and the reduction-time factor (hcsim/dtypes.py, simulate(count=, dtype=, reduce_op=))."""

from __future__ import annotations

import pytest

from hcsim import dtypes
from hcsim.algorithms.registry import get_algorithm, make_args, run_builder
from hcsim.api import simulate
from hcsim.engine.des import EngineConfig, FlowSimulator
from hcsim.errors import ConfigError
from hcsim.topology.builders import full_mesh


def test_element_sizes_and_aliases():
    assert [dtypes.element_size(d) for d in ("int8", "fp16", "bfp16", "float32", "int64", "fp64")] == [1, 2, 2, 4, 8, 8]
    with pytest.raises(ConfigError, match="dtype = 'fp8'"):
        dtypes.parse_dtype("fp8")
    with pytest.raises(ConfigError, match="reduce_op = 'mean'"):
        dtypes.parse_reduce_op("mean")


def test_size_from_count_follows_hccl_test_convention():
    # per-rank buffer for allreduce / broadcast / reduce; count x ranks for allgather & co.
    assert dtypes.size_from_count("allreduce", 1000, "fp16", 8) == 2000
    assert dtypes.size_from_count("broadcast", 1000, "int64", 8) == 8000
    for c in ("allgather", "reducescatter", "scatter", "alltoall"):
        assert dtypes.size_from_count(c, 1000, "fp32", 8) == 32000


def test_count_path_equals_size_path_bit_for_bit():
    for collective, count, dt in (("allreduce", 12345, "fp16"), ("allgather", 1000, "bf16"),
                                  ("reducescatter", 777, "fp32"), ("alltoall", 64, "int8")):
        nbytes = dtypes.size_from_count(collective, count, dt, 8)
        a = simulate("atlas800t-a2", collective, count=count, dtype=dt)
        b = simulate("atlas800t-a2", collective, nbytes, dtype=dt)
        assert a.time_s == b.time_s and a.size_bytes == nbytes
        assert a.config["count"] == count
    # fp32 sum on the 910B server: the same work as the call in bytes (inline reduce, factor 1)
    for mode in ("des", "analytical"):
        plain = simulate("atlas800t-a2", "allreduce", "64MiB", mode=mode)
        typed = simulate("atlas800t-a2", "allreduce", "64MiB", mode=mode, dtype="fp32")
        assert typed.time_s == plain.time_s
        assert "dtype" not in plain.config and typed.config["dtype"] == "fp32"


def test_whole_elements_per_rank_or_one_line_error():
    with pytest.raises(ConfigError, match=r"^size = 3: allgather of int8 on 8 ranks needs a multiple of 8 bytes"):
        simulate("atlas800t-a2", "allgather", 3, dtype="int8")
    with pytest.raises(ConfigError, match=r"^size = 6: allreduce of fp32 on 8 ranks needs a multiple of 4 bytes"):
        simulate("atlas800t-a2", "allreduce", 6, dtype="fp32")
    simulate("atlas800t-a2", "allgather", 12)  # without a dtype, bytes as before
    with pytest.raises(ConfigError, match="count = 3: needs a dtype"):
        simulate("atlas800t-a2", "allreduce", count=3)
    with pytest.raises(ConfigError, match="either size"):
        simulate("atlas800t-a2", "allreduce", 8, count=2, dtype="fp32")


def test_hccl_refusals_per_product():
    # hccl_test README (CANN 8.1.RC1): prod takes neither int16 nor bfp16 on A2/A3
    with pytest.raises(ConfigError, match="^reduce_op = 'prod': HCCL on 910B does not take prod with bf16"):
        simulate("atlas800t-a2", "allreduce", "1M", dtype="bf16", reduce_op="prod")
    with pytest.raises(ConfigError, match="^dtype = 'uint8'"):
        simulate("atlas800t-a2", "reducescatter", "1M", dtype="uint8")
    with pytest.raises(ConfigError, match="bfp16 only on A2/A3"):
        simulate("atlas800-9000", "allgather", "1M", dtype="bf16")
    with pytest.raises(ConfigError, match="^dtype = 'int16'"):
        simulate("atlas800-9000", "allreduce", "1M", dtype="int16")
    simulate("atlas800t-a2", "allgather", "1M", dtype="uint8")  # non-reducing: any HCCL type
    # a topology without a product is not HCCL: anything goes
    simulate(full_mesh(4, 1e9), "allreduce", 64, dtype="uint64", reduce_op="prod")


def test_inline_reduce_support_table():
    # hcomm device_capacity.cc IsDataTypeSupport / IsRedOpSupport
    assert dtypes.inline_reduce_supported("910B", "bf16", "max")
    assert not dtypes.inline_reduce_supported("910B", "int64", "sum")
    assert not dtypes.inline_reduce_supported("910_93", "fp32", "prod")
    assert dtypes.inline_reduce_supported("910A", "fp32", "sum")
    assert not dtypes.inline_reduce_supported("910A", "fp16", "sum")
    assert not dtypes.inline_reduce_supported("910A", "fp32", "max")


def test_vector_core_fallback_changes_the_prediction():
    # HCCS reduces inline on the 910B server; int64 and prod go to the 10 GB/s vector core
    kw = dict(algorithm="mesh")
    base = simulate("atlas800t-a2", "allreduce", "64MiB", dtype="fp32", **kw)
    same = simulate("atlas800t-a2", "allreduce", "64MiB", dtype="fp16", reduce_op="max", **kw)
    assert same.time_s == base.time_s
    for slow in (dict(dtype="int64"), dict(dtype="fp32", reduce_op="prod"), dict(reduce_op="prod")):
        r = simulate("atlas800t-a2", "allreduce", "64MiB", **slow, **kw)
        assert r.time_s > base.time_s * 1.5
        assert r.config["inline_reduce"] is False
        a = simulate("atlas800t-a2", "allreduce", "64MiB", mode="analytical", **slow, **kw)
        assert a.config["gamma_s_per_B"] == pytest.approx(1 / 10e9)
    assert simulate("atlas800t-a2", "allreduce", "64MiB", mode="analytical", dtype="fp32",
                    **kw).config["gamma_s_per_B"] == 0
    # allgather moves no reduction: the op does not matter
    g = [simulate("atlas800t-a2", "allgather", "8MiB", dtype="int64", reduce_op=op).time_s for op in ("sum", "prod")]
    assert g[0] == g[1]


def _ring_allreduce_time(nbytes, factor, bw=1e12, reduce_Bps=1e9, lat=1e-6):
    topo = full_mesh(2, bw, lat, reduce_Bps=reduce_Bps)
    sched = run_builder(get_algorithm("allreduce", "ring"), make_args("allreduce", 2, nbytes))
    sim = FlowSimulator(topo, topo.npus, sched, EngineConfig(reduce_time_factor=factor))
    return sim.run()


def test_reduce_time_factor_hand_worked():
    # 2-rank ring allreduce of N bytes on a full mesh: step 0 each rank sends N/2 and reduces
    # them at reduce_Bps x 1/f, step 1 sends N/2: 2 lat + N/bw + f N/2 / reduce_Bps
    n, bw, red, lat = 1 << 20, 1e12, 1e9, 1e-6
    for f in (1.0, 2.0, 0.5, 3.0):
        want = 2 * lat + n / bw + f * (n / 2) / red
        assert _ring_allreduce_time(n, f) == pytest.approx(want, rel=1e-12)
    # the reduction part scales by exactly f
    t1, t4 = _ring_allreduce_time(n, 1.0), _ring_allreduce_time(n, 4.0)
    assert (t4 - (2 * lat + n / bw)) == pytest.approx(4 * (t1 - (2 * lat + n / bw)), rel=1e-12)
    with pytest.raises(ConfigError, match="reduce_time_factor = 0"):
        EngineConfig(reduce_time_factor=0)


def test_reduce_time_factor_table_is_one_where_hccl_says_per_byte():
    # task_profiling.h: the CCE reduce is "10 GB for all" types; documented as 1.0
    assert {dtypes.reduce_time_factor(d, o) for d in dtypes.DTYPES for o in dtypes.REDUCE_OPS} == {1.0}


def test_hccl_test_cli_dtype_and_op(capsys):
    from hcsim.cli import main

    def run(*extra):
        code = main(["hccl-test", "all_reduce_test", "-b", "64M", "-e", "64M", *extra])
        return code, capsys.readouterr()

    code, out = run()
    base = out.out.splitlines()[-1]
    code, out = run("-d", "fp16", "-o", "max")
    assert out.out.splitlines()[-1] == base  # inline either way, same bytes
    code, out = run("-d", "int64")
    assert out.out.splitlines()[-1] != base
    code, out = run("-d", "bfp16", "-o", "prod")
    assert code == 2
    err = out.err.strip().splitlines()
    assert len(err) == 1 and "prod" in err[0]
