"""Drawing a job's timeline: a Gantt chart of operations per rank and stream.
matplotlib is imported inside the function, like :mod:`hcsim.plot`."""

from __future__ import annotations

from .errors import bad_value, is_int

KIND_COLORS = {"compute": "#4c72b0", "collective": "#dd8452", "sendrecv": "#c44e52",
               "recordevent": "#2ca02c", "waitevent": "#9467bd"}
"""Bar colour per operation kind."""

DEFAULT_MAX_RANKS = 16
"""Ranks drawn when none are named (the first ones)."""


def plot_timeline(result, path=None, ranks=None, title: str | None = None):
    """Draw every operation of ``ranks`` as a bar on its (rank, stream) row.

    Parameters
    ----------
    result : JobResult
        Anything with ``ops`` (the operation table) and ``step_time_s``.
    path : str or Path, optional
        Write the picture here (.png, .pdf, .svg) and return the path; without it, return
        the matplotlib Figure.
    ranks : iterable of int, optional
        Ranks to draw; default the first :data:`DEFAULT_MAX_RANKS`.
    title : str, optional

    Examples
    --------
    >>> import hcsim  # doctest: +SKIP
    >>> plot_timeline(hcsim.run("scenarios/acl_overlap_allreduce.yaml"), "timeline.png")  # doctest: +SKIP
    PosixPath('timeline.png')
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    ops = result.ops
    ran = ops[ops["start_s"].notna() & ops["end_s"].notna()]
    every = sorted({int(r) for r in ran["rank"]})
    if ranks is None:
        chosen = every[:DEFAULT_MAX_RANKS]
    else:
        if isinstance(ranks, (str, bytes)):
            raise bad_value("ranks", ranks, "a list of rank numbers")
        known, picked = set(every), set()
        try:
            for r in ranks:  # the first rank the job lacks stops it (range(10**12) is not built)
                if not is_int(r):
                    raise TypeError
                if int(r) not in known:
                    raise bad_value("ranks", r, f"a rank of the job (0 to {max(every, default=0)} with operations)")
                picked.add(int(r))
        except TypeError:
            raise bad_value("ranks", ranks, "a list of rank numbers") from None
        chosen = sorted(picked)
    part = ran[ran["rank"].isin(chosen)]
    streams = sorted(set(part["stream"].astype(str)), key=lambda s: (s != "compute", s))
    rows = [(r, s) for r in chosen for s in streams if ((part["rank"] == r) & (part["stream"] == s)).any()]
    y = {key: i for i, key in enumerate(rows)}
    scale, unit = (1e3, "ms") if result.step_time_s >= 1e-3 else (1e6, "us")
    fig, ax = plt.subplots(figsize=(10, 1.0 + 0.32 * max(len(rows), 1)))
    for kind, group in part.groupby("kind", sort=False):
        color = KIND_COLORS.get(str(kind), "#55a868")
        for (rank, stream), bars in group.groupby(["rank", "stream"], sort=False):
            row = y[(int(rank), str(stream))]
            if kind in ("recordevent", "waitevent"):  # markers: a tick where the stream records or waits
                ax.vlines(bars["start_s"] * scale, row - 0.45, row + 0.45, colors=color, linewidth=1.5,
                          linestyles="solid" if kind == "recordevent" else "dotted")
                continue
            spans = [(s * scale, max((e - s) * scale, 0.0)) for s, e in zip(bars["start_s"], bars["end_s"],
                                                                             strict=True)]
            ax.broken_barh(spans, (row - 0.4, 0.8), facecolors=color, edgecolors="black", linewidth=0.3)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"npu {r} {s}" for r, s in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(result.step_time_s * scale, 1e-12))
    ax.set_xlabel(f"time ({unit})")
    shown = "" if len(chosen) == len(every) else f" (ranks {', '.join(map(str, chosen[:8]))}" \
        f"{', ...' if len(chosen) > 8 else ''} of {len(every)})"
    ax.set_title((title or f"step {result.step_time_s * scale:.3f} {unit}") + shown)
    kinds = [k for k in KIND_COLORS if k in set(part["kind"])]
    ax.legend(handles=[Patch(color=KIND_COLORS[k], label=k) for k in kinds], loc="upper left",
              bbox_to_anchor=(1.01, 1.0), fontsize=8, borderaxespad=0.0)
    ax.grid(True, axis="x", alpha=0.3)
    if path is None:
        return fig
    from .plot import _save

    return _save(fig, path)
