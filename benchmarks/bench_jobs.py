"""Job benchmark: every shipped scenario at full size, one process each case.

Run: ``make bench-jobs`` (or ``.venv/bin/python benchmarks/bench_jobs.py [SCENARIO ...]``).
Target (workloads issue): ``scenarios/llm_910b_pod.yaml`` (256 NPUs, TP x PP x DP with
micro-batches) under 30 s on a 2-core machine. Prints, per scenario: NPUs, operations,
collectives and send/recvs run, the simulated step time, the wall time of building the
workload and of playing it, and the process's peak resident memory after the case.
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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenarios", nargs="*", help="scenario files (default: every file in scenarios/)")
    args = ap.parse_args(argv)
    files = [Path(f) for f in args.scenarios] or sorted((ROOT / "scenarios").glob("*.yaml"))
    print(f"hcsim {hcsim.__version__}, python {sys.version.split()[0]}")
    print(f"{'scenario':<32} {'npus':>6} {'ops':>7} {'comm ops':>8} {'step ms':>12} {'load s':>7} "
          f"{'run s':>7} {'peak MB':>8}")
    for f in files:
        t0 = time.perf_counter()
        sc = load_scenario(f)
        t1 = time.perf_counter()
        r = run_scenario(sc)
        t2 = time.perf_counter()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{f.stem:<32} {r.ops['rank'].nunique():>6} {r.ops['op'].nunique():>7} {r.config['collectives']:>8} "
              f"{r.step_time_s * 1e3:>12.3f} {t1 - t0:>7.2f} {t2 - t1:>7.2f} {peak:>8.0f}", flush=True)


if __name__ == "__main__":
    main()
