"""Text tables in hccl_test's layout (data size, average time, algorithm bandwidth), with
nccl-tests' bus bandwidth added. Formatting only: no simulation here."""

from __future__ import annotations

import pandas as pd

from .errors import bad_value, check_frame

HEADER = ("data_size(Bytes):", "aveg_time(us):", "alg_bandwidth(GB/s):", "bus_bandwidth(GB/s):")
_SWEEP_COLUMNS = ("size_bytes", "time_us", "algbw_GBps", "busbw_GBps")


def format_rows(df: pd.DataFrame) -> list[str]:
    """hccl_test-style lines for one algorithm's rows of a sweep DataFrame."""
    check_frame(df, "hcsim.sweep", _SWEEP_COLUMNS, _SWEEP_COLUMNS, empty_ok=True)
    return _rows(df)


def _rows(df: pd.DataFrame) -> list[str]:
    """:func:`format_rows` of a frame already checked."""
    lines = [_line(HEADER)]
    for row in df.itertuples(index=False):
        if row.time_us != row.time_us:  # NaN: refused by a work bound
            lines.append(_line((f"{int(row.size_bytes)}", "refused", "-", "-")))
            continue
        lines.append(_line((f"{int(row.size_bytes)}", f"{row.time_us:.2f}", f"{row.algbw_GBps:.5f}",
                            f"{row.busbw_GBps:.5f}")))
    return lines


def _line(cells, header=HEADER) -> str:
    # hccl_test pads every cell to its header's width plus one space, then "| ".
    return "| ".join(c.ljust(len(h) + 1) for c, h in zip(cells, header, strict=True)).rstrip()


def format_sweep(df: pd.DataFrame, topology: str) -> str:
    """One block per algorithm, then the fastest algorithm per size."""
    check_frame(df, "hcsim.sweep", ("algorithm", "collective", "ranks", "mode") + _SWEEP_COLUMNS, _SWEEP_COLUMNS,
                empty_ok=True)
    if not isinstance(topology, str):
        raise bad_value("topology", topology, "the topology's name (a str)")
    out = []
    for algo, part in df.groupby("algorithm", sort=False):
        ran = part[part["time_us"].notna()]
        first = (ran if len(ran) else part).iloc[0]
        chosen = ""
        if "selected" in ran and (ran["selected"] != algo).any():
            chosen = " (ran: " + ", ".join(dict.fromkeys(ran["selected"])) + ")"
        out.append(f"# {first.collective} on {topology}: {int(first.ranks)} ranks, algorithm {algo}{chosen}, "
                   f"mode {first['mode']}")
        out.extend(_rows(part))
        out.append("")
    if "refused" in df and (df["refused"] != "").any():
        first = df[df["refused"] != ""].iloc[0]
        out.append(f"# {int((df['refused'] != '').sum())} point(s) refused, e.g. "
                   f"{first.algorithm} at {int(first.size_bytes)} B: {first.refused}")
        out.append("")
    ran = df[df["time_us"].notna()]
    if df["algorithm"].nunique() > 1 and len(ran):
        best = ran.loc[ran.groupby("size_bytes")["time_us"].idxmin()]
        out.append("# fastest per size")
        head = ("data_size(Bytes):", "algorithm:", "aveg_time(us):")
        out.append(_line(head, head))
        # a size where the work bound refused an algorithm: the fastest of those that ran, marked
        partial = set(df.loc[df["refused"] != "", "size_bytes"]) if "refused" in df else set()
        for row in best.itertuples(index=False):
            mark = "*" if row.size_bytes in partial else ""
            out.append(_line((str(int(row.size_bytes)), row.algorithm + mark, f"{row.time_us:.2f}"), head))
        if partial & set(best["size_bytes"]):
            out.append("# *: the fastest of the algorithms that ran; the others were refused at that size")
    return "\n".join(out).rstrip() + "\n"


def format_select(df: pd.DataFrame) -> str:
    """The selection study as a table: HCCL's choice, the best, every candidate, crossovers."""
    check_frame(df, "hcsim.select", ("size_bytes", "collective", "ranks", "hccl_choice", "hccl_time_us", "best",
                                     "best_time_us", "slowdown"), ("size_bytes", "hccl_time_us", "best_time_us", "slowdown"))
    cands = [c[len("time_us["):-1] for c in df.columns if isinstance(c, str) and c.startswith("time_us[")]
    check_frame(df, "hcsim.select", (), [f"time_us[{c}]" for c in cands])
    first = df.iloc[0]
    out = [f"# {first.collective} on {df.attrs.get('topology', '?')}: {int(first.ranks)} ranks, "
           f"mode {df.attrs.get('mode', 'des')}; times in us"]
    head = ["size(Bytes)", "hccl_choice", "hccl_us", "best", "best_us", "slowdown"] + cands
    ran = df[df["hccl_time_us"] == df["hccl_time_us"]]  # NaN: HCCL's choice refused by the work bound
    rows = [[str(int(r.size_bytes)), r.hccl_choice, f"{r.hccl_time_us:.2f}", r.best, f"{r.best_time_us:.2f}",
             f"{r.slowdown:.3f}x"] + [_us(r[f'time_us[{c}]']) for c in cands] if r.hccl_time_us == r.hccl_time_us
            else [str(int(r.size_bytes)), "refused"] + ["-"] * (4 + len(cands)) for _, r in df.iterrows()]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    out.append(" | ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip())
    for row in rows:
        out.append(" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    cross = df.attrs.get("crossovers", [])
    out.append("# crossovers (fastest algorithm changes at): " +
               ("; ".join(f"{size} B: {a} -> {b}" for size, a, b in cross) if cross else "none"))
    worst = ran.loc[ran["slowdown"].idxmax()]
    out.append(f"# HCCL's choice is at most {100 * (ran['slowdown'].max() - 1):.1f}% slower than the fastest "
               f"(worst at {int(worst.size_bytes)} B: {worst.hccl_choice} vs {worst.best})")
    if len(ran) < len(df):
        first = df[df["hccl_time_us"] != df["hccl_time_us"]].iloc[0]
        out.append(f"# {len(df) - len(ran)} size(s) refused, e.g. {int(first.size_bytes)} B: {first.refused}")
    if cands and (df[[f"time_us[{c}]" for c in cands]].isna().to_numpy() & (df["hccl_time_us"] == df["hccl_time_us"])
                  .to_numpy()[:, None]).any():
        out.append("# '-': a candidate the work bound refused at that size (left out of the race)")
    return "\n".join(out) + "\n"


def _us(t) -> str:
    return "-" if t != t else f"{t:.2f}"
