"""hcsim's accuracy on the public corpus (docs/data/published/corpus.yaml).

Run: ``.venv/bin/python benchmarks/validate_corpus.py [--system TEXT ...] [--rows]``.
Every system with a topology is calibrated on at most two points of its sweep (the fixed rule
of :func:`hcsim.corpus.calibration_points`: the first row's sweep, its smallest and largest
size) and every other row is predicted (with the library's own algorithm where its rule is
known, ``--algorithm library``, the default; ``selected``: HCCL's choice everywhere); the table prints median and 90th-percentile |error|
over all sizes and over sizes >= 1 MiB, and the fastest-algorithm agreement where a file
compares algorithms. docs/validation.md keeps the table; tests/test_corpus_validation.py
recomputes it.
"""

from __future__ import annotations

import argparse
import datetime
import time

import pandas as pd

from hcsim.corpus import format_corpus_table, overall, validate_corpus
from hcsim.errors import HcsimError


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--system", action="append", help="only systems whose name contains this (repeatable)")
    ap.add_argument("--fit", default=None, choices=("tiers", "bottleneck"),
                    help="calibrate's fit (default: the corpus rule's, bottleneck)")
    ap.add_argument("--algorithm", default=None, choices=("library", "selected"),
                    help="rows that name no algorithm: the library's own rule where known (default), "
                         "or HCCL's choice everywhere")
    ap.add_argument("--network-latency", action="store_true",
                    help="put each MPI system's published two-node ping-pong latency (corpus.yaml pingpong_us) on the "
                         "links between its nodes before the fit (docs/validation.md change 30; not the table's default)")
    ap.add_argument("--network-fit", action="store_true",
                    help="on the MPI systems fit a latency on the links between nodes in place of the per-step "
                         "overhead (calibrate fixed_cost='network'; docs/validation.md change 32)")
    ap.add_argument("--spec-network-rate", action="store_true",
                    help="keep the links between the nodes at their spec line rate, not the source's published "
                         "two-node osu_bw (corpus.yaml p2p_bw_MBps; docs/validation.md change 33; the table before it)")
    ap.add_argument("--sweep-bands", type=int, default=None,
                    help="calibrate each system on its whole first sweep (a line and an efficiency curve of this many "
                         "bands of message size, hcsim.calibrate_sweep; docs/validation.md change 34), not on two points")
    ap.add_argument("--leave-one-out", action="store_true",
                    help="with --sweep-bands: also each sweep's leave-one-out errors (a whole fit per point: slow)")
    ap.add_argument("--launch-overlap", action="store_true",
                    help="on the hccl_test and nccl-tests systems, a call's launch overlaps the call before it (a call costs "
                         "the larger of its launch and its device time; docs/validation.md change 42; not the table's default)")
    ap.add_argument("--nccl-base-latency", action="store_true",
                    help="on the NCCL systems, each call pays its protocol's base latency once (NCCL's baseLat; "
                         "docs/validation.md change 47; not the table's default)")
    ap.add_argument("--rows", action="store_true", help="also print every predicted row")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    try:
        df = validate_corpus(systems=args.system, **({"fit": args.fit} if args.fit else {}),
                             **({"algorithm": args.algorithm} if args.algorithm else {}),
                             **({"network_latency": True} if args.network_latency else {}),
                             **({"network_fit": True} if args.network_fit else {}),
                             **({"network_rate": False} if args.spec_network_rate else {}),
                             **({"sweep_bands": args.sweep_bands} if args.sweep_bands is not None else {}),
                             **({"sweep_leave_one_out": True} if args.leave_one_out else {}),
                             **({"launch_overlap": True} if args.launch_overlap else {}),
                             **({"nccl_base_latency": True} if args.nccl_base_latency else {}))
    except HcsimError as e:
        ap.exit(2, f"{ap.prog}: error: {e}\n")
    took = time.perf_counter() - t0
    print(format_corpus_table(df))
    o = overall(df)
    print(f"\nall systems pooled: {o['points']} predicted rows, median |error| {100 * o['median_all']:.1f}% "
          f"(p90 {100 * o['p90_all']:.1f}%); >= 1 MiB: median {100 * o['median_1mib']:.1f}% "
          f"(p90 {100 * o['p90_1mib']:.1f}%)")
    if args.sweep_bands is not None:
        print("\n| system | sweep points | curve | in-sample median | in-sample p90 | leave-one-out median | "
              "leave-one-out max |\n|---|---:|---|---:|---:|---:|---:|")
        for system, rep in df.attrs["reports"].items():
            rows = df.attrs["rows"][system]
            cal = rows[rows["calibration"]]["error"].abs()
            curve = ", ".join(f"{c['from_bytes']}: x{c['efficiency']:.3g}" for c in rep.get("efficiency_curve", []))
            loo = rep.get("leave_one_out")
            print(f"| {system} | {len(cal)} | {rep.get('direction', '-')} {curve or '(two points)'} | "
                  f"{100 * cal.median():.1f}% | {100 * cal.quantile(0.9):.1f}% | "
                  + (f"{100 * loo['median_abs_error']:.1f}% | {100 * loo['max_abs_error']:.1f}% |" if loo else "- | - |"))
    for system, rep in df.attrs["reports"].items():
        rep = {**rep, **rep.get("line", {})}  # a sweep's fit reports its line apart
        scale = ", ".join(f"{t} x{s:.3g}" for t, s in {**rep["tier_bandwidth_scale"], **rep["link_scale"]}.items())
        net = f", network {rep['network_latency_us']:.3g} us a link" if "network_latency_us" in rep else ""
        net += f", network links at {rep['network_rate_GBps']:.4g} GB/s (osu_bw)" if "network_rate_GBps" in rep else ""
        print(f"# {system[:60]}: {scale}; step {rep['step_overhead_us']:.3g} us, "
              f"launch {rep['launch_overhead_us']:.3g} us{net}")
    if args.rows:
        with pd.option_context("display.width", 200, "display.max_rows", None):
            for system, rows in df.attrs["rows"].items():
                print(f"\n## {system}")
                keep = [c for c in ("collective", "ranks", "size_bytes", "algorithm", "time_us", "predicted_us", "local_us",
                                    "error", "calibration") if c in rows.columns]
                print(rows[keep].to_string(index=False))
    print(f"\n# {datetime.date.today().isoformat()}, {took:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
