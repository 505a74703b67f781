"""NVLink SHARP allreduce benchmark: wall time of hcsim's in-network allreduce (hcsim.algorithms.nvls).

Run: ``.venv/bin/python benchmarks/bench_nvls.py``. NVLS on p ranks of one switch is k + 3 steps of up
to 4p transfers (k segments, at most 256), the switch an extra endpoint. Targets on a 2-core machine:
16 GiB on 8 GPUs (an HGX H100 server, the corpus' largest NVLS row) and 8 GiB on 72 (an NVL72 rack)
under 1 s each; 1 GiB on 512 ranks of one switch (259 steps of 2,048 transfers) under 5 s; and a
two-point bottleneck calibration on an NVLS allreduce's 32 MiB and 16 GiB (the xxrjun H100 system of
the corpus, `hcsim calibrate --max-work 20000000`: about 190 evaluations) under 60 s. Each simulation
also prints the closed form, which the engine equals on these contention-free topologies.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import hcsim
from hcsim.algorithms import AlphaBetaGamma, CollectiveArgs, get_algorithm
from hcsim.topology import single_switch

CASES = ((8, 16 << 30), (72, 8 << 30), (512, 1 << 30))
PUBLISHED = Path(__file__).resolve().parents[1] / "docs" / "data" / "published"


def main() -> int:
    print(f"nvls allreduce, hcsim {hcsim.__version__}, python {sys.version.split()[0]}")
    print(f"{'ranks':>6} {'size':>12} {'wall_s':>8} {'cpu_s':>8} {'sim_us':>14} {'closed_form_us':>14}")
    cost = get_algorithm("allreduce", "nvls").cost
    for p, n in CASES:
        topo = single_switch(p, 450e9, 1e-6, npus_per_server=min(p, 8), in_network_efficiency=0.85)
        t0, c0 = time.perf_counter(), time.process_time()
        r = hcsim.simulate(topo, "allreduce", n, "nvls", step_overhead_s=0.6e-6, max_work=None)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        closed = cost(CollectiveArgs("allreduce", p, n), AlphaBetaGamma(1.6e-6, 1 / (0.85 * 450e9), 0.0))
        print(f"{p:>6} {n:>12} {wall:8.2f} {cpu:8.2f} {r.time_us:14.1f} {closed * 1e6:14.1f}", flush=True)
    from hcsim.backends import load_measured
    from hcsim.calibrate import calibrate
    from hcsim.corpus import calibration_points, library_algorithms, transport_calibration

    rows = load_measured(PUBLISHED / "h100_8gpu_nccl229_5tests.txt", "allreduce")
    pts = rows.loc[calibration_points(rows)]
    topo, defaults, forced = transport_calibration("nccl-nvlink", PUBLISHED / "h100_8gpu_nvswitch.yaml",
                                                   ll_point=pts.loc[pts.size_bytes.idxmax()], nccl_ll_max_GBps=141.0)
    t0, c0 = time.perf_counter(), time.process_time()
    _, rep = calibrate(topo, library_algorithms(pts, topo, "nccl-nvlink", 141e9), fit="bottleneck",
                       max_work=20_000_000, **defaults, **forced)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    scale = next(iter(rep["link_scale"].values()))
    print(f"calibration on {len(pts)} NVLS points: {wall:.1f} s wall, {cpu:.1f} s cpu, {rep['evaluations']} evaluations, "
          f"link x{scale:.4f}, rms log error {rep['rms_log_error_after']:.2g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
