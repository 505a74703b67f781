"""The semantic verifier: every built-in schedule passes; broken ones fail with a clear reason."""

import dataclasses

import numpy as np
import pytest

import hcsim
from hcsim.algorithms import REGISTRY, Schedule, build_schedule, make_step
from hcsim.errors import ScheduleError
from hcsim.verify import verify

PAIRS = [(c, a) for c, algos in REGISTRY.items() for a in algos]


@pytest.mark.parametrize("collective,algorithm", PAIRS)
def test_every_builtin_algorithm_verifies_for_p_2_to_33(collective, algorithm):
    for p in range(2, 34):
        for n in (p * 48, 1000, 7):  # even split, uneven split, fewer bytes than chunks
            verify(build_schedule(collective, algorithm, p, n, root=(p * 2) // 3))


def _replace_steps(s: Schedule, steps):
    return dataclasses.replace(s, steps=list(steps))


def test_missing_step_fails():
    s = build_schedule("allreduce", "ring", 4, 4096)
    with pytest.raises(ScheduleError, match="rank .* chunk"):
        verify(_replace_steps(s, list(s.steps)[:-1]))


def test_double_counting_fails():
    s = build_schedule("allreduce", "ring", 3, 3000)
    steps = list(s.steps)
    with pytest.raises(ScheduleError, match="contribution 2 times"):
        verify(_replace_steps(s, steps[:2] + steps[1:2] + steps[2:]))


def test_wrong_byte_count_fails():
    s = build_schedule("allgather", "ring", 4, 4000)
    st = s.steps[0]
    bad = make_step(st.src, st.dst, st.nbytes + 1, st.reduce, st.chunk_lo, st.chunk_hi)
    with pytest.raises(ScheduleError, match="carries 1001 bytes"):
        verify(_replace_steps(s, [bad] + list(s.steps)[1:]))


def test_sending_a_chunk_not_held_fails():
    s = build_schedule("allgather", "ring", 4, 4000)
    st = s.steps[0]
    lo = (st.chunk_lo + 1) % 4  # everyone forwards the block of its right neighbour: not yet theirs
    bad = make_step(st.src, st.dst, st.nbytes, st.reduce, lo, lo + 1)
    with pytest.raises(ScheduleError, match="does not hold"):
        verify(_replace_steps(s, [bad] + list(s.steps)[1:]))


def test_reduce_flag_on_a_non_reducing_collective_fails():
    s = build_schedule("allgather", "mesh", 3, 300)
    st = s.steps[0]
    bad = make_step(st.src, st.dst, st.nbytes, True, st.chunk_lo, st.chunk_hi)
    with pytest.raises(ScheduleError, match="cannot reduce"):
        verify(_replace_steps(s, [bad]))


def test_out_of_range_rank_and_self_transfer_fail():
    s = build_schedule("allgather", "mesh", 3, 300)
    st = s.steps[0]
    with pytest.raises(ScheduleError, match="outside"):
        verify(_replace_steps(s, [make_step(st.src, st.dst + 5, st.nbytes, False, st.chunk_lo, st.chunk_hi)]))
    with pytest.raises(ScheduleError, match="both rank"):
        verify(_replace_steps(s, [make_step(st.src, st.src, st.nbytes, False, st.chunk_lo, st.chunk_hi)]))


def test_user_algorithm_is_verified_before_it_is_simulated():
    def half_ring(args):
        full = build_schedule("allreduce", "ring", args.p, args.nbytes)
        return dataclasses.replace(full, steps=list(full.steps)[: args.p - 1], algorithm="half_ring")

    with pytest.raises(ScheduleError, match="half_ring allreduce"):
        hcsim.simulate("atlas800t-a2", "allreduce", "1M", half_ring)


def test_user_algorithm_that_is_correct_runs():
    def star_allgather(args):
        s = build_schedule("allgather", "mesh", args.p, args.nbytes)
        return dataclasses.replace(s, algorithm="my_mesh")

    r = hcsim.simulate("atlas800t-a2", "allgather", "8M", star_allgather)
    assert r.algorithm == "star_allgather"
    ref = hcsim.simulate("atlas800t-a2", "allgather", "8M", "mesh")
    assert r.time_s == pytest.approx(ref.time_s, rel=1e-12)


def test_verifier_follows_reduced_data_not_just_counts():
    # Allreduce on 2 ranks where rank 1 copies instead of reducing: rank 0 lacks rank 1's share.
    s = build_schedule("allreduce", "mesh", 2, 200)
    rs, ag = s.steps
    bad_rs = make_step(rs.src, rs.dst, rs.nbytes, np.array([True, False]), rs.chunk_lo, rs.chunk_hi)
    with pytest.raises(ScheduleError):
        verify(_replace_steps(s, [bad_rs, ag]))


def _outcome(schedule):
    try:
        verify(schedule)
        return "ok"
    except ScheduleError as exc:
        return str(exc)


@pytest.mark.parametrize("seed", range(6))
def test_whole_step_verification_agrees_with_the_transfer_by_transfer_replay(seed, monkeypatch):
    """The verifier applies a valid step at once; the replay (what it does on a fault) is the
    reference: on built and on randomly corrupted schedules both say the same, word for word."""
    import hcsim.verify as v

    rng = np.random.default_rng(seed)
    cases = []
    for collective in ("allreduce", "allgather", "reducescatter", "broadcast", "alltoall", "reduce"):
        for algorithm in REGISTRY[collective]:
            spec = REGISTRY[collective][algorithm]
            if spec.levels > 1:
                continue
            p = int(rng.integers(2, 9))
            try:
                s = build_schedule(collective, algorithm, p, p * 64)
            except hcsim.HcsimError:
                continue
            cases.append(s)
            steps = [st.chunks() for st in s.steps]
            k = int(rng.integers(len(steps))) if steps else 0
            if not steps or not len(steps[k]):
                continue
            st = steps[k]
            i = int(rng.integers(len(st)))
            kind = rng.integers(3)
            src, dst, red = st.src.copy(), st.dst.copy(), np.asarray(st.reduce, dtype=bool).copy()
            if kind == 0:
                src[i] = (src[i] + 1) % p  # another sender, who may not hold the chunk
                if src[i] == dst[i]:
                    src[i] = (src[i] + 1) % p
            elif kind == 1:
                dst[i] = (dst[i] + 1) % p  # another receiver: may receive twice
                if src[i] == dst[i]:
                    dst[i] = (dst[i] + 1) % p
            elif collective in ("allreduce", "reducescatter", "reduce"):
                red[i] = not red[i]  # copy where it should reduce, or the other way round
            bad = dataclasses.replace(st, src=src, dst=dst, reduce=red, expand=None)
            cases.append(dataclasses.replace(s, steps=[*steps[:k], bad, *steps[k + 1:]]))
    fast = [_outcome(s) for s in cases]
    monkeypatch.setattr(v, "_apply_step", lambda state, step, c: False)  # always replay
    assert fast == [_outcome(s) for s in cases]
    assert "ok" in fast and any(o != "ok" for o in fast)


def _malformed(kind):
    """A user algorithm: ring's schedule with one thing wrong (fuzz findings C1, I2)."""
    def build(a):
        s = build_schedule(a.collective, "ring", a.p, a.nbytes)
        st = s.steps[0]
        if kind == "none":
            return dataclasses.replace(s, steps=[*s.steps, None])
        if kind == "generator":
            return dataclasses.replace(s, steps=(x for x in s.steps))
        if kind == "list":
            return dataclasses.replace(s, steps=[dataclasses.replace(st, src=st.src.tolist()), *s.steps[1:]])
        if kind == "float":
            return dataclasses.replace(s, steps=[dataclasses.replace(st, src=st.src.astype(float)), *s.steps[1:]])
        if kind == "2d":
            return dataclasses.replace(s, steps=[dataclasses.replace(st, src=st.src.reshape(1, -1)), *s.steps[1:]])
        return dataclasses.replace(s, steps=[])  # "empty": moves nothing
    return build


@pytest.mark.parametrize("kind, words", [("none", "is a NoneType, not a Step"),
                                         ("generator", "schedule.steps is a generator"),
                                         ("list", "src is a list"), ("float", "1-dimensional float64"),
                                         ("2d", "2-dimensional"), ("empty", "moves no bytes")])
@pytest.mark.parametrize("verify", [True, False])
def test_a_malformed_user_schedule_is_one_schedule_error(kind, words, verify):
    from hcsim.topology import full_mesh

    with pytest.raises(ScheduleError) as info:
        hcsim.simulate(full_mesh(4, 10e9, 1e-6), "allgather", 1024, _malformed(kind), verify=verify)
    assert words in str(info.value) and "\n" not in str(info.value)
