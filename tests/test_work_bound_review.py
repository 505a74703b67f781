"""Review of the engine work bound (max_work): cases a demanding user tried that broke it."""

import re

import pytest

import hcsim
from hcsim.errors import WorkLimitError
from hcsim.topology import leaf_spine


def _contended():
    return leaf_spine(2, 4, 1, 10e9, 1e-6, oversubscription=4)


def test_best_stopped_by_its_bound_names_the_calls_bound_and_all_its_work():
    # a later candidate stopped: the error is in terms of the call's bound and carries what every
    # candidate did (a sweep's budget takes it off); it named what was left and one candidate's work
    full = hcsim.simulate(_contended(), "alltoall", "1MiB", "best", max_work=None).config["work"]
    with pytest.raises(WorkLimitError) as info:
        hcsim.simulate(_contended(), "alltoall", "1MiB", "best", max_work=full - 1)
    assert str(info.value).startswith(f"max_work = {full - 1}: ")
    assert info.value.work > full - 1
    assert "\n" not in str(info.value)


def test_sweep_of_best_spends_what_a_refused_point_did():
    full = hcsim.simulate(_contended(), "alltoall", "1MiB", "best", max_work=None).config["work"]
    df = hcsim.sweep(_contended(), "alltoall", sizes=["1MiB", "1MiB", "1MiB"], algorithms=["best"],
                     max_work=2 * full - 1)
    assert list(df["refused"] != "") == [False, True, True]
    # the second point ran candidates until the bound: all of their work is spent, past the bound
    spent = int(re.search(r"passed it here \((\d+) units", df["refused"].iloc[1]).group(1))
    assert spent > 2 * full - 1
    assert "took all of it" in df["refused"].iloc[2]


def test_a_later_buffer_loop_stopped_names_the_calls_bound():
    full = hcsim.simulate("atlas800t-a2", "allreduce", "300MiB", "ring", max_work=None)
    assert full.config["buffer_loops"] == 2
    with pytest.raises(WorkLimitError) as info:
        hcsim.simulate("atlas800t-a2", "allreduce", "300MiB", "ring", max_work=full.config["work"] - 1)
    assert str(info.value).startswith(f"max_work = {full.config['work'] - 1}: the run passed {info.value.work} ")


def test_a_job_stopped_by_its_bound_says_how_a_job_raises_it():
    # hcsim run / whatif / plan have no --max-work flag: a job's bound is run(max_work=) or a
    # scenario's options.max_work, and a job has no analytical mode
    from hcsim.workload import Workload, run

    w = Workload("pairs")
    c = w.communicator("all", list(range(8)))
    w.collective("a2a", c, "alltoall", 1 << 20, algorithm="pairwise")
    free = run(_contended(), w, max_work=None).config["work"]
    with pytest.raises(WorkLimitError) as info:
        run(_contended(), w, max_work=free - 1)
    msg = str(info.value)
    assert msg.startswith(f"max_work = {free - 1}: ")
    assert "--max-work" not in msg and "mode='analytical'" not in msg
    assert "options.max_work" in msg and "\n" not in msg


def test_analytical_bound_does_not_depend_on_an_earlier_unbounded_call():
    # the path parameters are cached per topology: a cached answer skipped the routing bound, so
    # the same bounded call was refused on a fresh topology and answered after an unbounded one
    topo = leaf_spine(2, 4, 1, 10e9, 1e-6)

    def call(max_work):
        return hcsim.simulate(topo, "alltoall", "1MiB", "pairwise", mode="analytical", max_work=max_work)

    with pytest.raises(WorkLimitError, match="max_work = 100: mode 'analytical' routes"):
        call(100)
    free = call(None)
    with pytest.raises(WorkLimitError, match="max_work = 100: mode 'analytical' routes"):
        call(100)
    with pytest.raises(WorkLimitError, match="every point refused"):
        hcsim.sweep(topo, "alltoall", sizes=["1MiB", "2MiB"], algorithms=["pairwise"], mode="analytical",
                    max_work=100)
    assert call(None).time_s == free.time_s


def test_hccl_test_stopped_by_its_bound_advises_what_hccl_test_has(capsys):
    # hccl-test has no mode (it simulates hccl_test, event-driven): its advice named mode='analytical'
    from hcsim.cli import main
    from hcsim.hccl.hccl_test import run_hccl_test

    # (2000: each size runs HCCL's small-count reduce_bcast, 14 transfers a call, not mesh's 112)
    out = run_hccl_test("all_reduce_test", minbytes="8K", maxbytes="64K", max_work=2000)
    stopped = out.splitlines()[-1]
    assert stopped.startswith("# stopped before 16384 B: max_work = 2000: ")
    assert "analytical" not in stopped and "--max-work" in stopped
    assert main(["hccl-test", "all_reduce_test", "-b", "8K", "-e", "64K", "--max-work", "100"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "max_work = 100: " in err and "analytical" not in err


def test_a_job_takes_a_numpy_integer_bound_as_simulate_does():
    import numpy as np

    from hcsim.workload import Workload, run

    w = Workload("ar")
    w.collective("ar", w.communicator("all", list(range(8))), "allreduce", 1 << 20)
    bound = np.int64(10**7)
    assert hcsim.simulate("atlas800t-a2", "allreduce", "1MiB", "ring", max_work=bound).time_s > 0
    assert run("atlas800t-a2", w, max_work=bound).step_time_s == run("atlas800t-a2", w, max_work=10**7).step_time_s


def _records(sched, event_driven):
    import simpy

    from hcsim.engine import EngineConfig, FlowSimulator
    from hcsim.engine.result import tables_from_engine
    from hcsim.topology import single_switch

    topo = single_switch(4, 10e9, 1e-6)
    sim = FlowSimulator(topo, topo.npus, sched, EngineConfig(step_overhead_s=1e-6, record=True))
    t = sim.run(simpy.Environment()) if event_driven else sim.run()
    assert sim.contention_free != event_driven
    return tables_from_engine(sim, t)[1]


@pytest.mark.parametrize("barriers", [(), (1,)])
def test_contention_free_records_name_the_transfer_that_last_ended_for_a_rank(barriers):
    # rank 0 sends 1 MB (ends late) and receives nothing (0 B from rank 2, ends at once) in step
    # 0; its step-1 transfer waited for the 1 MB one. The contention-free pass let a rank's
    # receive overwrite its send whatever their ends, so the critical path skipped the 1 MB send
    import numpy as np

    from hcsim.algorithms import CollectiveArgs, Schedule, make_step

    steps = [make_step(np.array([0, 2]), np.array([1, 0]), np.array([1_000_000, 0]), False, 0, 1),
             make_step(np.array([0]), np.array([2]), np.array([1000]), False, 0, 1)]
    sched = Schedule(CollectiveArgs("sendrecv", 4, 1), 1, steps, np.ones(1, dtype=np.int64), "two", barriers=barriers)
    lone, events = _records(sched, False), _records(sched, True)
    assert list(events["pred"]) == [-1, -1, 0]
    assert list(lone["pred"]) == list(events["pred"])


def test_sweep_table_does_not_call_a_size_fastest_where_a_rival_was_refused():
    # mesh beats ring at 8 KiB; at 16 KiB the bound refused mesh: the table named ring the fastest
    from hcsim.report import format_sweep

    df = hcsim.sweep("atlas800t-a2", "allreduce", sizes=["8KiB", "16KiB"], algorithms=["ring", "mesh"],
                     max_work=7000)
    assert list(df["refused"] != "") == [False, False, False, True]
    text = format_sweep(df, "atlas800t-a2")
    fastest = text.split("# fastest per size")[1].splitlines()
    row = next(line for line in fastest if line.startswith("16384"))
    assert "ring*" in row
    assert any(line.startswith("# *: ") and "refused" in line for line in fastest)
    assert "*" not in next(line for line in fastest if line.startswith("8192"))


def test_a_sweep_point_stopped_by_max_flow_updates_is_not_called_a_max_work_refusal():
    # best's second candidate (mesh/mesh, 112 flow-rate updates) passes max_flow_updates = 50;
    # the first (28) does not: the refusal is max_flow_updates', not the command's work bound
    with pytest.raises(WorkLimitError, match=r"^every point refused, e\.g\. max_flow_updates = 50: "):
        hcsim.sweep(_contended(), "alltoall", sizes=["64KiB", "1MiB"], algorithms=["best"],
                    max_flow_updates=50, max_work=10**9)


def test_best_workload_names_the_candidates_the_bound_refused():
    from hcsim.plan import best_workload
    from hcsim.topology import leaf_spine
    from hcsim.workload import Workload

    topo = leaf_spine(2, 4, 1, 10e9, 1e-6, oversubscription=4)
    w = Workload("one")
    w.collective("ar", w.communicator("c", range(8)), "allreduce", 1 << 20, algorithm="auto")
    _, free = best_workload(topo, w, max_work=None)
    assert free[0]["refused"] == []
    from hcsim.workload import run

    bound = run(topo, w, max_work=None).config["work"]  # HCCL's own choice fits; costlier candidates do not
    _, bounded = best_workload(topo, w, max_work=bound)
    refused = bounded[0]["refused"]
    assert refused and bounded[0]["best"] not in refused
    from hcsim.errors import WorkLimitError

    for cand in refused:  # each alone passes the bound: left out of the race, and named
        alone = Workload("x")
        alone.collective("a", alone.communicator("c", range(8)), "allreduce", 1 << 20, algorithm=cand)
        with pytest.raises(WorkLimitError):
            run(topo, alone, max_work=bound)


def test_schedule_memory_is_extrapolated_by_its_own_growth():
    """A Bruck alltoall's messages each hold p / 2 blocks: its memory grows as p^2 log p while its
    transfers grow as p log p. On 4,096 ranks it held 4.8 GB; the probes now extrapolate the
    memory itself and refuse it before building (found by the fuzz judge)."""
    import hcsim
    from hcsim.errors import WorkLimitError
    from hcsim.topology.builders import single_switch

    with pytest.raises(WorkLimitError, match="MAX_SCHEDULE_BYTES"):
        hcsim.simulate(single_switch(4096, 25e9, 1e-6), "alltoall", "16M", "bruck")
