"""The input contract at the API and CLI boundary: every bad argument is one HcsimError line
naming the field; sizes are exact; work beyond the documented limits is refused before it runs."""

import numpy as np
import pytest

import hcsim
from hcsim.algorithms.registry import get_algorithm, make_args
from hcsim.api import check_work
from hcsim.cli import main
from hcsim.errors import HcsimError
from hcsim.limits import MAX_SIZE_BYTES
from hcsim.topology.builders import full_mesh

MESH = full_mesh(4, 10e9, 1e-6)


def _one_line_error(call, field):
    with pytest.raises(HcsimError) as info:
        call()
    text = str(info.value)
    assert "\n" not in text and text.startswith(field), text
    return text


@pytest.mark.parametrize("kwargs, field", [
    (dict(collective=["allreduce"]), "collective"),
    (dict(collective="allreduse"), "collective"),
    (dict(algorithm=["ring"]), "algorithm"),
    (dict(algorithm=" "), "algorithm"),
    (dict(algorithm=7), "algorithm"),
    (dict(root=None), "root"),
    (dict(root="3"), "root"),
    (dict(root=4), "root"),
    (dict(root=True), "root"),
    (dict(hccl=1), "hccl"),
    (dict(ecmp_seed=None), "ecmp_seed"),
    (dict(ecmp_seed="x"), "ecmp_seed"),
    (dict(ecmp_seed=-1), "ecmp_seed"),
    (dict(mode=["des"]), "mode"),
    (dict(routing="flood"), "routing"),
    (dict(step_overhead_s=float("nan")), "step_overhead_s"),
    (dict(launch_overhead_s=-1.0), "launch_overhead_s"),
    (dict(record="yes"), "record"),
    (dict(verify=1), "verify"),
    (dict(qps=9), "qps"),
    (dict(max_transfers=0), "max_transfers"),
    (dict(size=2**63), "size"),
    (dict(size=-(2**62)), "size"),
    (dict(size="9" * 5000), "size"),
])
def test_bad_simulate_arguments_are_one_line_errors(kwargs, field):
    call = dict(collective="allreduce", size=64)
    call.update(kwargs)
    text = _one_line_error(lambda: hcsim.simulate(MESH, call.pop("collective"), call.pop("size"), **call), field)
    assert len(text) < 400  # a 5,000-digit value is not repeated whole


@pytest.mark.parametrize("matrix", [[[1, 2], [3]], [[1, 2], [3, "a"]], [[1, 2], [3, -1]], 5, [[0.5, 1], [1, 1]],
                                    [[0, 0], [0, 0]]])
def test_bad_send_matrices_are_one_line_errors(matrix):
    _one_line_error(lambda: hcsim.simulate(full_mesh(2, 10e9), "alltoallv", None, send_matrix=matrix),
                    "send_matrix")


def test_every_collective_runs_with_no_algorithm_named():
    for collective in hcsim.COLLECTIVES:
        matrix = [[0, 5], [7, 0]] if collective == "alltoallv" else None
        r = hcsim.simulate(full_mesh(2, 10e9, 1e-6), collective, 64, send_matrix=matrix)
        assert r.time_s > 0


@pytest.mark.parametrize("text, nbytes", [("9007199254740", 9007199254740), ("1.5K", 1536), (" 64 KiB ", 65536),
                                          ("2kB", 2000), ("1.25MB", 1250000), (str(MAX_SIZE_BYTES), MAX_SIZE_BYTES),
                                          (np.int64(5), 5), (8.0, 8)])
def test_sizes_parse_exactly(text, nbytes):
    assert hcsim.parse_size(text) == nbytes


@pytest.mark.parametrize("text", ["1.999999999999999999G", "１２", "1e3", "-5", "0", ".5K", "5.K", "1..5",
                                  float("nan"), float("inf"), 0.5, None, [1], True, MAX_SIZE_BYTES + 1,
                                  "9007199254740993"])
def test_bad_sizes_are_refused_not_rounded(text):
    _one_line_error(lambda: hcsim.parse_size(text), "size")


def test_sweep_and_select_refuse_empty_or_unknown_choices():
    _one_line_error(lambda: hcsim.sweep(MESH, "allreduce", ("8", "16"), algorithms=[]), "algorithms")
    _one_line_error(lambda: hcsim.sweep(MESH, "allreduce", ("8", "16"), factor=1), "factor")
    _one_line_error(lambda: hcsim.select(MESH, "allreduse", ("8", "16")), "collective")
    _one_line_error(lambda: hcsim.sweep(MESH, "allreduce", list(range(1, 5000))), "sizes")


def test_work_is_counted_exactly_and_refused_beyond_the_bound():
    spec = get_algorithm("allreduce", "ring")
    assert check_work(spec, make_args("allreduce", 8, 1 << 20), None) == 2 * 7 * 8
    # three CCL-buffer loops of 1 MiB and one of 1 KiB: two distinct pieces are simulated
    assert check_work(spec, make_args("allreduce", 8, (3 << 20) + 1024), 1 << 20) == 2 * (2 * 7 * 8)
    msg = _one_line_error(lambda: check_work(spec, make_args("allreduce", 8, 1 << 20), None, max_transfers=100),
                          "size")
    assert "holds over 104 transfers" in msg and "max_transfers = 100" in msg  # counting stops past the bound
    # above 1024 ranks the count is extrapolated before anything that large is built
    msg = _one_line_error(lambda: check_work(get_algorithm("alltoall", "pairwise"),
                                             make_args("alltoall", 16384, 1 << 20), None), "size")
    assert "extrapolated" in msg
    # NB sends one message per peer and step: 16,384 ranks hold 2 x 14 x 16,384 of them, not 134M chunks
    assert check_work(get_algorithm("allreduce", "nb"), make_args("allreduce", 16384, 1 << 20), None) == 2 * 14 * 16384


def test_buffer_loops_add_up_in_both_modes_and_never_beat_one_piece():
    """Each CCL-buffer loop is a whole collective on its piece, the loops one after another
    (HCCL's executors; docs/architecture.md): 2^20 + 1 loops cost as much as their pieces."""
    from hcsim.hccl.selection import HcclConfig

    one_kib = HcclConfig(buffer_bytes=1024)
    for algo in ("ring", "mesh", "hd"):
        piece = {m: hcsim.simulate(MESH, "allreduce", n, algo, mode=m, launch_overhead_s=0).time_s
                 for m in ("des", "analytical") for n in (1024,)}
        rest = hcsim.simulate(MESH, "allreduce", 512, algo, launch_overhead_s=0).time_s
        for mode in ("des", "analytical"):
            r = hcsim.simulate(MESH, "allreduce", (1 << 30) + 512, algo, mode=mode, hccl=one_kib,
                               launch_overhead_s=0)
            assert r.config["buffer_loops"] == (1 << 20) + 1
            assert r.time_s == pytest.approx((1 << 20) * piece[mode] + rest, rel=1e-9)
            whole = hcsim.simulate(MESH, "allreduce", (1 << 30) + 512, algo, mode=mode, launch_overhead_s=0,
                                   hccl=HcclConfig(buffer_bytes=1 << 40))
            assert r.time_s >= whole.time_s


@pytest.mark.parametrize("argv, expect", [
    (["sweep", "--op", "allreduce", "-e", "64K", "--csv", "README.md/x.csv"], "--csv"),  # a file as its folder
    (["sweep", "--op", "allreduce", "-e", "64K", "--algo", " "], "--algo"),
    (["sweep", "--op", "allreduce", "-e", "64K", "--ranks", "\u00b2"], "ranks"),
    (["sweep", "--op", "allreduce", "-e", "64K", "--plot", "x.png", "--metric", "nope"], "--metric"),
    (["hccl-test", "all_reduce_test", "-p", "16"], "-p"),
    (["sweep", "--op", "allreduce", "-b", "1.999999999999999999G"], "min size"),
])
def test_cli_bad_input_is_one_line_and_status_2_before_any_work(argv, expect, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"hcsim: error: {expect}"), err


def test_engine_stops_deterministically_at_its_flow_update_bound():
    from hcsim.errors import WorkLimitError

    topo = hcsim.load_topology("atlas800t-a2")
    free = hcsim.simulate(topo, "allreduce", "1M", "mesh")
    with pytest.raises(WorkLimitError) as first:
        hcsim.simulate(topo, "allreduce", "1M", "mesh", max_flow_updates=10)
    with pytest.raises(WorkLimitError) as again:
        hcsim.simulate(topo, "allreduce", "1M", "mesh", max_flow_updates=10)
    assert str(first.value) == str(again.value) and "\n" not in str(first.value)
    assert str(first.value).startswith("max_flow_updates = 10: the run passed")
    # a bound the run stays within changes nothing
    assert hcsim.simulate(topo, "allreduce", "1M", "mesh", max_flow_updates=10**9).time_s == free.time_s


def test_a_sweep_reports_points_over_the_work_bound_and_keeps_the_rest(capsys):
    df = hcsim.sweep("atlas800t-a2", "allreduce", ("1M", "2M"), algorithms=["ring", "mesh"], max_flow_updates=10)
    refused = df[df["refused"] != ""]
    assert set(refused["algorithm"]) == {"mesh"} and refused["time_us"].isna().all()
    assert df[df["algorithm"] == "ring"]["time_us"].gt(0).all()
    assert main(["sweep", "--op", "allreduce", "-b", "1M", "-e", "2M", "--algo", "ring,mesh",
                 "--max-flow-updates", "10"]) == 0
    out = capsys.readouterr().out
    assert out.count("| refused") == 2 and "2 point(s) refused, e.g. mesh" in out


@pytest.mark.parametrize("collective, algo", [("allreduce", "ring"), ("allgather", "hd"), ("broadcast", "ring"),
                                              ("alltoall", "pairwise"), ("reducescatter", "mesh")])
def test_simulating_each_distinct_piece_once_equals_the_looped_schedule_with_barriers(collective, algo):
    """simulate() runs each distinct CCL-buffer piece once; the reference is the whole looped
    schedule (every piece behind a barrier of all ranks) through the engine, on a contended
    leaf-spine."""
    from hcsim.engine.des import EngineConfig, FlowSimulator
    from hcsim.hccl.buffer import looped
    from hcsim.hccl.selection import HcclConfig
    from hcsim.topology.builders import leaf_spine

    topo = leaf_spine(2, 4, 1, 10e9, 1e-6)
    schedule = looped(get_algorithm(collective, algo), make_args(collective, 8, 1 << 20), 300_000)
    assert len(schedule.barriers) >= 3
    cfg = EngineConfig(step_overhead_s=1e-6, launch_overhead_s=2e-6, record=False)
    reference = FlowSimulator(topo, topo.npus, schedule, cfg).run()
    r = hcsim.simulate(topo, collective, 1 << 20, algo, hccl=HcclConfig(buffer_bytes=300_000),
                       step_overhead_s=1e-6, launch_overhead_s=2e-6)
    assert r.time_s == pytest.approx(reference, rel=1e-12)


def test_sizes_below_one_byte_per_rank_are_refused_where_the_size_is_count_x_ranks():
    for collective in ("allgather", "reducescatter", "scatter", "gather", "alltoall"):
        _one_line_error(lambda c=collective: hcsim.simulate(MESH, c, 3), "size")
        assert hcsim.simulate(MESH, collective, 4).time_s > 0
    assert hcsim.simulate(MESH, "allreduce", 1, launch_overhead_s=0, step_overhead_s=0).time_s > 0
    df = hcsim.sweep(MESH, "allgather", ("2", "8"), algorithms=["ring"])
    assert list(df["refused"] != "") == [True, False, False]


def test_a_sweep_in_which_nothing_runs_is_an_error():
    _one_line_error(lambda: hcsim.sweep(MESH, "allgather", ("1", "2")), "every point refused")
    _one_line_error(lambda: hcsim.simulate(MESH, "allreduce", 8, step_overhead_s=10**400), "step_overhead_s")


# Workload API (independent fuzz run, issue 12): bad arguments are one HcsimError line naming the field,
# never a TypeError from inside or a MemoryError from materialising the ranks.
def _workload_with_comm():
    from hcsim.workload import Workload

    w = Workload()
    w.communicator("c", [0, 1])
    return w


@pytest.mark.parametrize("call, field", [
    (lambda w: w.communicator("d", float("nan")), "communicator 'd': ranks"),
    (lambda w: w.communicator("d", None), "communicator 'd': ranks"),
    (lambda w: w.communicator(["d"], [0, 1]), "communicator.name"),
    (lambda w: w.communicator("d", range(10**12)), "communicator 'd': ranks"),
    (lambda w: w.compute("f", range(10**12), 1e-3), "op 'f': ranks"),
    (lambda w: w.record("r", iter(range(10**12)), "e", stream="comm"), "op 'r': ranks"),
    (lambda w: w.collective("x", "c", "alltoallv", 0, send_matrix=[[0, "a"], [1, 0]]), "op 'x': send_matrix"),
    (lambda w: w.collective("x", "c", "alltoallv", 0, send_matrix=3), "op 'x': send_matrix"),
    (lambda w: w.collective("x", "c", "alltoallv", 0, send_matrix=[[0, 1.5], [1, 0]]), "op 'x': send_matrix"),
    (lambda w: w.collective("x", "c", "allreduce", 2**63), "op 'x': size_bytes"),
    (lambda w: w.collective("x", "c", "allreduce", 1024, algorithm=3j), "op 'x': algorithm"),
    (lambda w: w.collective("x", "c", "allreduce", 1024, algorithm="nope"), "op 'x': algorithm"),
    (lambda w: w.collective("x", "c", "broadcast", 1024, root="1"), "op 'x': root"),
    (lambda w: w.collective("x", "c", "broadcast", 1024, root=2), "op 'x': root"),
    (lambda w: w.collective("x", "c", "allreduce", 1024, reduce_op=["sum"]), "op 'x': reduce_op"),
    (lambda w: w.send("s", 0, 1, 2**63), "op 's': size_bytes"),
    (lambda w: w.compute("f", [0], 1e-3, stream=["x"]), "op 'f': stream"),
])
def test_bad_workload_arguments_are_one_line_errors(call, field):
    _one_line_error(lambda: call(_workload_with_comm()), field)


def test_workload_arguments_that_are_fine_still_run():
    from hcsim.workload import run

    w = _workload_with_comm()
    w.collective("a", "c", "alltoallv", 0, send_matrix=np.array([[0, 8], [16, 0]]), algorithm="pairwise")
    w.collective("b", "c", "broadcast", 4096, root=np.int64(1), algorithm=None)
    w.send("s", np.int64(0), 1, 2048)
    assert run(MESH, w).step_time_s > 0


@pytest.mark.parametrize("overrides", [np.ones((2, 3)), [("servers", 2)], "servers=2", 3])
@pytest.mark.parametrize("entry", ["load_scenario", "plan", "run"])
def test_overrides_that_are_not_a_mapping_are_one_line_errors(entry, overrides):
    # independent fuzz run (issue 12): an array was tested for truth (ValueError), a list or a
    # string was silently ignored
    import hcsim.plan
    from hcsim.scenario import load_scenario

    doc = {"topology": "atlas800t-a2", "workload": {"ops": [
        {"kind": "compute", "name": "f", "ranks": [0, 1], "duration_us": 10}]}}
    call = {"load_scenario": lambda: load_scenario(doc, overrides=overrides),
            "plan": lambda: hcsim.plan.plan(doc, {"servers": [1]}, overrides=overrides),
            "run": lambda: hcsim.run(doc, overrides=overrides)}[entry]
    _one_line_error(call, "<dict>: overrides")
