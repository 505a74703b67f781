"""Text tables in hccl_test's layout (data size, average time, algorithm bandwidth), with
nccl-tests' bus bandwidth added. Formatting only: no simulation here."""

from __future__ import annotations

import pandas as pd

HEADER = ("data_size(Bytes):", "aveg_time(us):", "alg_bandwidth(GB/s):", "bus_bandwidth(GB/s):")


def format_rows(df: pd.DataFrame) -> list[str]:
    """hccl_test-style lines for one algorithm's rows of a sweep DataFrame."""
    lines = [_line(HEADER)]
    for row in df.itertuples(index=False):
        lines.append(_line((f"{int(row.size_bytes)}", f"{row.time_us:.2f}", f"{row.algbw_GBps:.5f}",
                            f"{row.busbw_GBps:.5f}")))
    return lines


def _line(cells, header=HEADER) -> str:
    # hccl_test pads every cell to its header's width plus one space, then "| ".
    return "| ".join(c.ljust(len(h) + 1) for c, h in zip(cells, header, strict=True)).rstrip()


def format_sweep(df: pd.DataFrame, topology: str) -> str:
    """One block per algorithm, then the fastest algorithm per size."""
    out = []
    for algo, part in df.groupby("algorithm", sort=False):
        first = part.iloc[0]
        out.append(f"# {first.collective} on {topology}: {int(first.ranks)} ranks, algorithm {algo}, "
                   f"mode {first['mode']}")
        out.extend(format_rows(part))
        out.append("")
    if df["algorithm"].nunique() > 1:
        best = df.loc[df.groupby("size_bytes")["time_us"].idxmin()]
        out.append("# fastest per size")
        head = ("data_size(Bytes):", "algorithm:", "aveg_time(us):")
        out.append(_line(head, head))
        for row in best.itertuples(index=False):
            out.append(_line((str(int(row.size_bytes)), row.algorithm, f"{row.time_us:.2f}"), head))
    return "\n".join(out).rstrip() + "\n"
