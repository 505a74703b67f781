"""Engine benchmark: wall time and peak memory of ring AllReduce at scale.

Run: ``make bench`` (or ``.venv/bin/python benchmarks/bench_engine.py [--quick]``).
Targets on a 2-core machine (core issue): p = 1024 under 1 s, p = 4096 under 15 s, under 2 GB.
Peak memory is the process's peak resident set (ru_maxrss), sampled after each case, so a
case's figure includes everything before it.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time

import hcsim
from hcsim.topology import leaf_spine, single_switch

SIZE = "64MiB"


def peak_rss_MB() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def run(label, topo, **kw):
    t0 = time.perf_counter()
    r = hcsim.simulate(topo, "allreduce", SIZE, "ring", step_overhead_s=1e-6, **kw)
    wall = time.perf_counter() - t0
    a = hcsim.simulate(topo, "allreduce", SIZE, "ring", step_overhead_s=1e-6, mode="analytical")
    print(f"{label:<44} {wall:9.2f} {peak_rss_MB():9.0f} {r.time_us:14.1f} {a.time_us:14.1f} "
          f"{r.config['instants']:9d}", flush=True)
    return wall


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="only p = 256 and 1024")
    args = ap.parse_args(argv)
    print(f"ring allreduce {SIZE}, hcsim {hcsim.__version__}, python {sys.version.split()[0]}")
    print(f"{'case':<44} {'wall_s':>9} {'peak_MB':>9} {'sim_us':>14} {'closed_form_us':>14} {'instants':>9}")
    for p in (256, 1024) if args.quick else (256, 1024, 4096):
        run(f"single switch, p={p}, 25 GB/s, 1 us/hop", single_switch(p, 25e9, 1e-6))
    if not args.quick:
        topo = leaf_spine(64, 64, 16, 25e9, 1e-6, npus_per_server=8)
        run("leaf-spine 512 servers x 8 NPUs (64 leaves x 64, 16 spines), flat ring", topo)


if __name__ == "__main__":
    main()
