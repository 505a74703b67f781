"""Pipelined chain benchmark: wall time of a streamed chain broadcast (hcsim.algorithms.chain).

Run: ``.venv/bin/python benchmarks/bench_chain.py``. A chain of k segments on p ranks is p - 2 + k
steps of up to p - 1 transfers (k at most 1,024). Targets on a 2-core machine: 8 GiB on 8 and on
72 GPUs of one NVLink switch (NCCL's broadcast on an HGX server and an NVL72 rack: 1,030 and 1,094
steps) under 1 s each; 1 GiB on 512 ranks (1,534 steps of up to 511 transfers) under 5 s. Each
case also prints the closed form, which the engine equals on these contention-free topologies.
"""

from __future__ import annotations

import sys
import time

import hcsim
from hcsim.topology import single_switch

CASES = ((8, 8 << 30), (72, 8 << 30), (512, 1 << 30))


def main() -> int:
    print(f"chain broadcast, hcsim {hcsim.__version__}, python {sys.version.split()[0]}")
    print(f"{'ranks':>6} {'size':>12} {'wall_s':>8} {'cpu_s':>8} {'sim_us':>14} {'closed_form_us':>14}")
    for p, n in CASES:
        topo = single_switch(p, 450e9, 1e-6, npus_per_server=min(p, 8))
        t0, c0 = time.perf_counter(), time.process_time()
        r = hcsim.simulate(topo, "broadcast", n, "chain", step_overhead_s=0.6e-6, max_work=None)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        a = hcsim.simulate(topo, "broadcast", n, "chain", step_overhead_s=0.6e-6, mode="analytical", max_work=None)
        print(f"{p:>6} {n:>12} {wall:8.2f} {cpu:8.2f} {r.time_us:14.1f} {a.time_us:14.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
