"""A probe, not a model of hcsim's: NCCL's own ring cost model with nccl-tests' launch loop, on the corpus's rows.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/probe_nccl_launch_model.py [--ll-efficiency 0.25] [--rows]``.

It prices each ring row of the two 8-GPU NVSwitch systems whose nccl-tests ran ``-g 8`` (one thread launching
all eight GPUs: the Together H100 rings and SuperBench's A100 files) as NCCL's tuner does
(``src/graph/tuning.cc``, read at 5067397c): per protocol a base latency per call (Ring ``baseLat`` LL 6.6,
LL128 14.0, Simple 8.4 us), a latency per ring step over NVLink (``hwLat`` 0.6, 1.9, 3.4 us) and the bytes a
rank sends at the protocol's share of one rate (LL ``--ll-efficiency``, LL128 0.92, Simple 1), the cheapest
protocol winning. The device time D so found meets the host's launch L of each call in one of two ways:

* ``overlap``: a call costs max(L, D) -- the back-to-back loop of nccl-tests launches call i + 1 while the
  GPUs run call i (docs/validation.md, change 42);
* ``sum``: a call costs L + D.

L and the rate are fitted on the corpus's two calibration points of the system (its smallest and largest
size), as ``hcsim.corpus.calibration_points`` chooses them; every other ring row is predicted. NVLS rows
are left out (NCCL's NVLS is another algorithm). Broadcast and reduce are priced as a chain: n bytes a
rank, p - 1 hops. What it printed is in docs/validation.md ("what is left", the nccl-tests launch item).
"""

from __future__ import annotations

import argparse

import numpy as np

from hcsim.corpus import NCCL_NVLINK_TUNER, validate_corpus

PROTOCOLS = ("LL", "LL128", "Simple")
BASE_US = dict(zip(PROTOCOLS, NCCL_NVLINK_TUNER["ring_base_us"], strict=True))
"""NCCL's Ring ``baseLat`` per protocol, us (tuning.cc at 5067397c)."""
HOP_US = dict(zip(PROTOCOLS, NCCL_NVLINK_TUNER["ring_hop_us"], strict=True))
"""NCCL's NVLink Ring ``hwLat`` per protocol, us (the same file)."""
SYSTEMS = ("8 x H100 SXM", "8 x A100-SXM4-40GB")


def wire_and_steps(collective: str, nbytes: float, p: int) -> tuple[float, int]:
    """Bytes one rank sends and the ring's step count (nccl-tests' sizes: the whole buffer)."""
    if collective == "allreduce":
        return 2 * (p - 1) / p * nbytes, 2 * (p - 1)
    if collective in ("allgather", "reducescatter"):
        return (p - 1) / p * nbytes, p - 1
    if collective in ("broadcast", "reduce"):
        return float(nbytes), p - 1
    raise ValueError(f"collective = {collective!r}: not a ring collective this probe prices")


def device_us(collective: str, nbytes: float, p: int, rate_Bps: float, ll_efficiency: float) -> float:
    """NCCL's cheapest protocol's time for one call, us."""
    share = {"LL": ll_efficiency, "LL128": 0.92, "Simple": 1.0}
    wire, steps = wire_and_steps(collective, nbytes, p)
    return min(BASE_US[q] + steps * HOP_US[q] + wire / (share[q] * rate_Bps) * 1e6 for q in BASE_US)


def fit(points, p: int, mode: str, ll_efficiency: float) -> tuple[float, float]:
    """(launch us, rate B/s) putting the model through the smallest and the largest calibration point."""
    (c0, n0, t0), (c1, n1, t1) = sorted(points, key=lambda r: r[1])
    lo, hi = 1e9, 1e13
    for _ in range(200):
        rate = (lo * hi) ** 0.5
        launch = t0 if mode == "overlap" else t0 - device_us(c0, n0, p, rate, ll_efficiency)
        d = device_us(c1, n1, p, rate, ll_efficiency)
        pred = max(launch, d) if mode == "overlap" else launch + d
        lo, hi = (rate, hi) if pred > t1 else (lo, rate)
    return launch, rate


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ll-efficiency", type=float, default=0.25, help="LL's share of the rate (NCCL: 0.25 or 0.5)")
    ap.add_argument("--rows", action="store_true", help="print every predicted row")
    args = ap.parse_args(argv)
    df = validate_corpus(systems=list(SYSTEMS))
    for system, rows in df.attrs["rows"].items():
        rows = rows[rows["algorithm"] != "nvls"]
        p = int(rows["ranks"].iloc[0])
        cal = [(r.collective, r.size_bytes, r.time_us) for r in rows[rows["calibration"]].itertuples()]
        pred_rows = rows[~rows["calibration"]]
        print(f"## {system}")
        now = pred_rows["error"].abs()
        big = pred_rows["size_bytes"] >= 1 << 20
        print(f"hcsim now   {len(now)} rows: median {100 * now.median():.1f}% (p90 {100 * now.quantile(0.9):.1f}%); "
              f">= 1 MiB {100 * now[big].median():.1f}% (p90 {100 * now[big].quantile(0.9):.1f}%)")
        for mode in ("overlap", "sum"):
            launch, rate = fit(cal, p, mode, args.ll_efficiency)
            pred = np.array([device_us(r.collective, r.size_bytes, p, rate, args.ll_efficiency)
                             for r in pred_rows.itertuples()])
            pred = np.maximum(launch, pred) if mode == "overlap" else launch + pred
            err = pred / pred_rows["time_us"].to_numpy() - 1
            a = np.abs(err)
            print(f"{mode:8s}    L {launch:.2f} us, rate {rate / 1e9:.1f} GB/s: median {100 * np.median(a):.1f}% "
                  f"(p90 {100 * np.quantile(a, 0.9):.1f}%); >= 1 MiB {100 * np.median(a[big]):.1f}% "
                  f"(p90 {100 * np.quantile(a[big], 0.9):.1f}%)")
            if args.rows:
                for r, pr, e in zip(pred_rows.itertuples(), pred, err, strict=True):
                    print(f"  {r.collective:14s} {r.size_bytes:12d} {r.time_us:10.2f} {pr:10.2f} {100 * e:+6.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
