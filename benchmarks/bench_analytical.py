"""Analytical-mode benchmark: closed-form predictions per second of hcsim.sweep.

Run: ``make bench-analytical`` (or ``.venv/bin/python benchmarks/bench_analytical.py [--quick]``).
Two cases (issue 15): every collective x every registered algorithm on atlas800t-a2 at sizes
8 B..4 GiB doubling, and HCCL's candidate algorithms (plus "auto") for every collective on a
64-server Atlas 900 A2 PoD (512 NPUs). Each case is timed ``--repeats`` times in one process:
``cold`` is the first pass (the topology loaded from its name, schedules built, verified and
routed), ``warm`` the median of the later passes on the same Topology object, whose path
parameters and schedule structure are then cached. Points/s counts every row the sweeps return;
``warm_cpu_pts/s`` divides by the process's CPU time instead of the wall clock (what a quiet
machine would show, near enough, when other work shares this one).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import hcsim
from hcsim.algorithms.registry import get_algorithm
from hcsim.algorithms.schedule import COLLECTIVES
from hcsim.api import rank_layout
from hcsim.hccl.selection import candidates
from hcsim.topology.io import load_topology


def a2_server(topo):
    """Every collective, every registered algorithm the server can run (sweep's default: no NVLS, whose
    in-network switch an Ascend server has not)."""
    return [(c, None) for c in COLLECTIVES]


def pod(topo):
    """Every collective with a closed form among HCCL's candidates, and "auto"."""
    servers, pods = rank_layout(topo, topo.npus)
    out = []
    for c in COLLECTIVES:
        algos = [a for a in candidates(c, servers, pods, topo.product) if get_algorithm(c, a).cost is not None]
        if algos:
            out.append((c, algos + ["auto"]))
    return out


def run(topo, plan, sizes) -> tuple[int, float, float]:
    """(points, wall s, CPU s) of one pass."""
    t0, c0 = time.perf_counter(), time.process_time()
    points = 0
    for collective, algos in plan:
        points += len(hcsim.sweep(topo, collective, sizes=sizes, algorithms=algos, mode="analytical"))
    return points, time.perf_counter() - t0, time.process_time() - c0


def case(label, load, make_plan, sizes, repeats):
    t0 = time.perf_counter()
    topo = load()
    plan = make_plan(topo)
    points, cold, _ = run(topo, plan, sizes)
    cold += time.perf_counter() - t0
    passes = [run(topo, plan, sizes) for _ in range(repeats - 1)]
    w = statistics.median(p[1] for p in passes) if passes else float("nan")
    c = statistics.median(p[2] for p in passes) if passes else float("nan")
    print(f"{label:<52} {points:7d} {cold * 1e3:10.1f} {points / cold:12,.0f} {w * 1e3:10.1f} {points / w:12,.0f}"
          f" {points / c:14,.0f}", flush=True)
    return points / cold, points / w


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="sizes 8 B..1 GiB x4 and a 16-server pod")
    ap.add_argument("--repeats", type=int, default=7, help="passes per case (the first is cold)")
    args = ap.parse_args(argv)
    sizes, factor = ("8", "4GiB"), 2
    servers = 64
    if args.quick:
        servers = 16
    print(f"hcsim {hcsim.__version__}, python {sys.version.split()[0]}; mode analytical, sizes "
          f"{sizes[0]}..{sizes[1]} x{factor}, {args.repeats} passes")
    print(f"{'case':<52} {'points':>7} {'cold_ms':>10} {'cold_pts/s':>12} {'warm_ms':>10} {'warm_pts/s':>12} {'warm_cpu_pts/s':>14}")
    size_list = hcsim.api.resolve_sizes(sizes, factor)
    if args.quick:
        size_list = size_list[::2]
    case("atlas800t-a2: all collectives x all algorithms", lambda: load_topology("atlas800t-a2"), a2_server,
         size_list, args.repeats)
    case(f"atlas900-a2-pod, {servers} servers: candidates + auto",
         lambda: load_topology("atlas900-a2-pod", servers=servers), pod, size_list, args.repeats)


if __name__ == "__main__":
    main()
