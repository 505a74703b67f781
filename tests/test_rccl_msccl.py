"""RCCL on one 8-GPU MI300X node: MSCCL's all-pairs allreduce where it applies, RCCL's own ring
below 256 elements, and RCCL's LL and Simple protocols as message regimes (hcsim.corpus.rccl_msccl_rule,
hcsim.calibrate.rccl_msccl_regimes; docs/validation.md, change 22)."""

from __future__ import annotations

import dataclasses

import pytest

from hcsim.api import simulate
from hcsim.calibrate import (
    LL_DATA_SHARE,
    MSCCL_ALLPAIRS_MAX_BYTES,
    MSCCL_ALLPAIRS_SIMPLE_FROM,
    RCCL_BASE_LATENCY_S,
    RCCL_HW_LATENCY_RATIO,
    rccl_msccl_regimes,
)
from hcsim.corpus import (
    LIBRARY_RULES,
    load_corpus,
    rccl_msccl_rule,
    transport_regimes,
    validate_system,
)
from hcsim.topology import full_mesh


def test_rule_follows_msccls_size_and_count_conditions():
    rule = LIBRARY_RULES["rccl"]
    assert rule is rccl_msccl_rule
    # fewer than 256 fp32 elements, or a count that is no multiple of 256: RCCL's own ring
    assert [rule("allreduce", n, 8) for n in (8, 512, 1020, 1280)] == ["ring"] * 4
    # MSCCL's all-pairs (and, above 16 MiB, the mesh standing in for RCCL's rings on every link)
    assert [rule("allreduce", n, 8) for n in (1024, 2048, 1 << 20, 16 << 20, 8 << 30)] == ["mesh"] * 5
    assert rule("allreduce", 1024, 16) is None and rule("allgather", 1024, 8) is None
    assert rule("allreduce", 512, 8, element_bytes=2) == "mesh"  # 256 bf16 elements


def test_regimes_switch_where_the_simple_program_starts_and_the_programs_end():
    a = 1e-6
    reg = rccl_msccl_regimes()(a, 40e9)
    assert reg.from_bytes == (0, MSCCL_ALLPAIRS_SIMPLE_FROM // 8, MSCCL_ALLPAIRS_MAX_BYTES // 8 + 1) \
        == (0, 65536, 2097153)
    assert reg.efficiency == (LL_DATA_SHARE, 1.0, 1.0) == (0.5, 1.0, 1.0)
    extra = RCCL_BASE_LATENCY_S["Simple"] - RCCL_BASE_LATENCY_S["LL"]
    r = RCCL_HW_LATENCY_RATIO
    # over the mesh's two steps: all-pairs Simple pays 17 + 2 Simple hops a call, RCCL's ring 17 + 14
    assert reg.overhead_s == (0.0, pytest.approx((extra + 2 * r * a - 2 * a) / 2),
                              pytest.approx((extra + 14 * r * a - 2 * a) / 2))
    assert transport_regimes("rccl")(a, 40e9) == reg
    with pytest.raises(Exception, match="ranks"):
        rccl_msccl_regimes(16)


@pytest.mark.parametrize("size, algorithm, hand_us", [
    # LL all-pairs: launch 12 us, two steps of 0.5 us, each moving 1/8 at half the link rate
    (1024, "mesh", 12 + 2 * 0.5 + 2 * 128 / (0.5 * 40e9) * 1e6),
    # Simple all-pairs: each step 2.625 x 0.5 us + 2.5 us (Simple's 5 us more base latency over two hops)
    (1 << 20, "mesh", 12 + 2 * (0.5 * 2.1 / 0.8 + 2.5) + 2 * (1 << 20) / 8 / 40e9 * 1e6),
    # above 16 MiB, RCCL's own rings: 17 us + 14 Simple hops a call, the mesh's bytes
    (32 << 20, "mesh", 17 + 14 * 0.5 * 2.1 / 0.8 + 2 * (32 << 20) / 8 / 40e9 * 1e6),
    # RCCL's ring under LL: 14 steps
    (512, "ring", 12 + 14 * (0.5 + 64 / (0.5 * 40e9) * 1e6)),
])
def test_hand_worked_times_on_a_full_mesh(size, algorithm, hand_us):
    t = full_mesh(8, 40e9)
    t.defaults = dataclasses.replace(t.defaults, step_overhead_s=0.5e-6, launch_overhead_s=12e-6,
                                     message_regimes=rccl_msccl_regimes()(0.5e-6, 40e9))
    assert simulate(t, "allreduce", size, algorithm).time_us == pytest.approx(hand_us, rel=1e-9)


def test_the_mi300x_rows_run_rccls_choice_and_fit_a_sub_rccl_step():
    mi = next(s for s in load_corpus() if "MI300X" in s["system"])
    rows, report = validate_system(mi)
    algo = dict(zip(rows["size_bytes"], rows["algorithm"], strict=True))
    assert algo[8] == algo[512] == "ring" and algo[1024] == algo[16 << 20] == algo[8 << 30] == "mesh"
    assert report["launch_overhead_us"] == pytest.approx(12.0)
    # the 8 B point is RCCL's 14-step ring: the step fitted below RCCL's own 0.8 us LL hop latency
    assert 0.3 < report["step_overhead_us"] < 0.8
    # the MSCCL LL floor (1-128 KiB) is predicted within 15%, where one 19 us floor was +37% to +41%
    ll = rows[(rows.size_bytes >= 1024) & (rows.size_bytes <= 131072)]
    assert ll["error"].abs().max() < 0.15
