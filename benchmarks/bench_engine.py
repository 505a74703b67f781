"""Engine benchmark: wall time and peak memory of AllReduce at scale.

Run: ``make bench`` (or ``.venv/bin/python benchmarks/bench_engine.py [--quick] [--pod-servers
64,128,256] [--big] [--pods-only]``).
Targets on a 2-core machine (core issue): p = 1024 under 1 s, p = 4096 under 15 s, under 2 GB;
(cluster-scale issue) the flat ring on the 512 x 8 leaf-spine under 3 s, the Atlas 900 A2 PoD
allreduce 64 MiB ``auto`` at 256 servers under 1 s and at 2,048 servers (16,384 NPUs, ``--big``)
under 10 s and 4 GB; ``--select``: the 64-server PoD alltoall selection study under 60 s. Peak
memory is the process's peak resident set (ru_maxrss), sampled after each case, so a case's
figure includes everything before it. ``cpu_s`` is the process CPU time of the case (on a
machine shared with other jobs, steadier than the wall time).
"""

from __future__ import annotations

import argparse
import resource
import sys
import time

import hcsim
from hcsim.topology import leaf_spine, load_topology, single_switch

SIZE = "64MiB"


def peak_rss_MB() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def run(label, topo, algorithm="ring", closed_form=True, **kw):
    t0, c0 = time.perf_counter(), time.process_time()
    r = hcsim.simulate(topo, "allreduce", SIZE, algorithm, max_work=None, **kw)  # speed, not the work bound
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    a = (hcsim.simulate(topo, "allreduce", SIZE, r.algorithm, mode="analytical",
                        **{k: v for k, v in kw.items() if k == "step_overhead_s"}) if closed_form else None)
    print(f"{label:<44} {wall:9.2f} {cpu:9.2f} {peak_rss_MB():9.0f} {r.time_us:14.1f} "
          f"{a.time_us if a else float('nan'):14.1f} {r.config['instants']:9d}", flush=True)
    return wall


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="only p = 256 and 1024")
    ap.add_argument("--pod-servers", default="64,128,256",
                    help="A2 PoD sizes for the pod allreduce cases (comma-separated; '' for none)")
    ap.add_argument("--big", action="store_true", help="also the 2,048-server (16,384-NPU) PoD")
    ap.add_argument("--pods-only", action="store_true",
                    help="only the PoD cases (after one 16-server PoD call that loads the compiled kernels, "
                         "as the cases before them do in a full run)")
    ap.add_argument("--select", action="store_true",
                    help="also hcsim.select on the 64-server PoD, alltoall 8K..4G (minutes; goal 60 s)")
    args = ap.parse_args(argv)
    print(f"ring allreduce {SIZE}, hcsim {hcsim.__version__}, python {sys.version.split()[0]}")
    print(f"{'case':<44} {'wall_s':>9} {'cpu_s':>9} {'peak_MB':>9} {'sim_us':>14} {'closed_form_us':>14} {'instants':>9}")
    if args.pods_only:
        hcsim.simulate(load_topology("atlas900-a2-pod", servers=16), "allreduce", SIZE, "auto", max_work=None)
    for p in () if args.pods_only else (256, 1024) if args.quick else (256, 1024, 4096):
        run(f"single switch, p={p}, 25 GB/s, 1 us/hop", single_switch(p, 25e9, 1e-6), step_overhead_s=1e-6)
    if not args.quick and not args.pods_only:
        topo = leaf_spine(64, 64, 16, 25e9, 1e-6, npus_per_server=8)
        run("leaf-spine 512 servers x 8 NPUs (64 leaves x 64, 16 spines), flat ring", topo, step_overhead_s=1e-6)
    servers = [int(x) for x in args.pod_servers.split(",") if x.strip()] + ([2048] if args.big else [])
    for n in [] if args.quick else servers:
        t0 = time.perf_counter()
        topo = load_topology("atlas900-a2-pod", servers=n)
        built = time.perf_counter() - t0
        run(f"atlas900-a2-pod {n} servers ({8 * n} NPUs), auto", topo, "auto", closed_form=False,
            max_transfers=1 << 40, max_flow_updates=1 << 40)
        print(f"{'':<44} (+ {built:.2f} s to build the topology; the case's time is the simulate call)")
    if args.select:
        topo = load_topology("atlas900-a2-pod", servers=64)
        t0, c0 = time.perf_counter(), time.process_time()
        df = hcsim.select(topo, "alltoall", sizes=("8K", "4G"), max_work=None, progress=False)
        print(f"select atlas900-a2-pod 64 servers, alltoall 8K..4G: {time.perf_counter() - t0:.1f} s "
              f"({time.process_time() - c0:.1f} s CPU), {len(df)} sizes, peak {peak_rss_MB():.0f} MB", flush=True)


if __name__ == "__main__":
    main()
