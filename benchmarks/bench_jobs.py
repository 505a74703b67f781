"""Job benchmark: every shipped scenario as shipped, then the two large ones at the full size
of earlier sessions (``FULL``: overrides, without a work bound).

Run: ``make bench-jobs`` (or ``.venv/bin/python benchmarks/bench_jobs.py [SCENARIO ...]``: only
those files, as shipped). Target (workloads issue): the LLM pod step at 256 NPUs (TP x PP x DP
with micro-batches, ``llm_910b_pod@256``) under 30 s on a 2-core machine. Prints, per case:
NPUs, operations, collectives and send/recvs run, the simulated step time, the wall time of
building the workload and of playing it, and the process's peak resident memory after the case.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import hcsim
from hcsim.scenario import load_scenario, run_scenario

ROOT = Path(__file__).resolve().parent.parent

FULL = {
    "llm_910b_pod@256": ("llm_910b_pod.yaml", 32, {"layout.dp": 8, "options.max_work": 0}),
    "moe_a3_superpod@128": ("moe_a3_superpod.yaml", 8, {"layout.dp": 16, "layout.ep": 16,
                                                        "workload.params.micro_batches": 2, "options.max_work": 0}),
}
"""The shipped LLM and MoE steps at the size they had before they were shrunk to run within
seconds (256 NPUs, 834.850 ms; 128 A3 dies, 79.684 ms): ``name: (file, servers, overrides)``."""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenarios", nargs="*", help="scenario files (default: every file in scenarios/)")
    args = ap.parse_args(argv)
    cases = [(Path(f).stem, Path(f), None, {}) for f in args.scenarios]
    if not cases:
        cases = [(f.stem, f, None, {}) for f in sorted((ROOT / "scenarios").glob("*.yaml"))]
        cases += [(name, ROOT / "scenarios" / f, n, ov) for name, (f, n, ov) in FULL.items()]
    print(f"hcsim {hcsim.__version__}, python {sys.version.split()[0]}")
    print(f"{'scenario':<32} {'npus':>6} {'ops':>7} {'comm ops':>8} {'step ms':>12} {'load s':>7} "
          f"{'run s':>7} {'peak MB':>8}")
    for name, f, servers, overrides in cases:
        t0 = time.perf_counter()
        sc = load_scenario(f, servers=servers, overrides=overrides)
        t1 = time.perf_counter()
        r = run_scenario(sc)
        t2 = time.perf_counter()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{name:<32} {r.ops['rank'].nunique():>6} {r.ops['op'].nunique():>7} {r.config['collectives']:>8} "
              f"{r.step_time_s * 1e3:>12.3f} {t1 - t0:>7.2f} {t2 - t1:>7.2f} {peak:>8.0f}", flush=True)


if __name__ == "__main__":
    main()
