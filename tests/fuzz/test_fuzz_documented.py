"""Every CLI command the README and docs/ show (except the root-only testbed and hardware
ones) under the same guard: a documented command is valid input, so it must exit 0 within
the time and memory limits."""

from __future__ import annotations

import shlex

import pytest

from .harness import record
from .strategies import REPO, out_path
from .test_fuzz_cli import guarded, run_cli_elsewhere

PUB = REPO / "docs/data/published"
DATA = REPO / "docs/data"
DOCUMENTED = [
    # README, Quick start (make demo) and CLI
    f"sweep --topology atlas800t-a2 --op allreduce -b 8 -e 1G -f 2 --plot {out_path('demo.png')}",
    f"sweep --topology atlas800t-a2 --op allreduce -b 8 -e 1G -f 2 --algo ring,mesh,auto --ranks 4 --mode des "
    f"--csv {out_path('out.csv')} --plot {out_path('out.png')}",
    "sweep --topology atlas800t-a2 --op allreduce -b 8 -e 1G -f 2 --mode analytical",
    # README, docs/algorithms.md, docs/performance.md
    # the README runs -e 4G on 16 servers (over 10 s under contention: engine speed is issue 15); a slice here
    f"select --topology atlas900-a2-pod --servers 2 --op allreduce -b 8K -e 64K --plot {out_path('sel.png')}",
    "hccl-test all_reduce_test -p 8 -b 8K -e 64M -f 2 -d fp32 -o sum",
    "hccl-test all_reduce_test -p 8 -b 8K -e 64M -f 2 -d fp32 -o sum -n 2 --hccl-algo level0:NA;level1:H-D_R",
    f"validate --measured {PUB}/ascend910b_8npu_measured.csv --topology atlas800t-a2",
    f"calibrate --measured {PUB}/ascend910b_8npu_measured.csv --topology atlas800t-a2 --out {out_path('T-calibrated.yaml')}",
    f"topo show atlas800t-a2 --draw {out_path('topo.png')}",
    "topo list",
    "algos",
    "algos --op allreduce",
    # docs/scenarios.md (the LLM pod and A3 MoE scenarios take 10-70 s: docs/performance.md, a benchmark)
    f"run {REPO}/scenarios/acl_overlap_allreduce.yaml --trace {out_path('acl.json')} --plot {out_path('acl.png')} "
    f"--csv {out_path('acl.csv')}",
    f"run {REPO}/scenarios/acl_overlap_allreduce.yaml --set 'options.speed={{0: 0.5}}'",
    f"run {REPO}/scenarios/moe_alltoallv_910b.yaml",
    f"run {REPO}/scenarios/hcomm_primitives_dp_loop.yaml --max-rows 12",
    f"run {REPO}/scenarios/resnet50_dp4_b32_fp16.yaml",
    "hccl-test all_reduce_test -p 8 -b 64M -e 64M -d int64 -o sum",
    # docs/validation.md
    f"validate --measured {DATA}/validation_8x100mbit_run5.csv --topology {DATA}/testbed-8x100mbit-run5.yaml "
    "--min-size 65536",
    f"validate --measured {DATA}/validation_8x100mbit_run11.csv --topology {DATA}/testbed-8x100mbit-run11.yaml "
    "--min-size 65536",
]


@pytest.mark.parametrize("command", DOCUMENTED, ids=[c.split(" --")[0][:40] for c in DOCUMENTED])
def test_documented(command):
    """A documented command exits 0 within the limits."""
    argv = shlex.split(command)
    outcome = guarded(run_cli_elsewhere, argv)
    if outcome.cls == "error":  # valid input refused: for a documented command, that breaks the docs
        outcome.cls, outcome.detail = "invariant", f"a documented command is refused: {outcome.detail}"
    record("documented", "hcsim " + command, outcome)
    assert outcome.cls == "ok", f"{outcome.cls}: {outcome.detail} ({outcome.seconds:.1f} s)"
