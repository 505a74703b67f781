"""Drawing for capacity planning and what-if: plan frames, what-if frames, link heatmaps.

Every function reads a frame (or a job's per-link table), draws it and writes ``path``
(.png, .pdf or .svg; a PNG with a 256-colour palette), returning the path; without ``path``
it returns the matplotlib Figure (to inspect or to place in a notebook). matplotlib is
imported inside the functions, through :mod:`hcsim.plot`'s helpers, so the simulator never
needs it.

The frames are those of :func:`hcsim.plan` (one row per plan point: ``point``, the axis
columns, ``servers, npus, status, reason, step_time_ms, samples_per_step, samples_per_s,
tokens_per_s, scaling_efficiency, compute_ms, communication_ms, exposed_comm_ms, free_ms,
npu_hours_per_step, cost_per_step, meets_target, pareto``; ``attrs["answer"]``) and of
:func:`hcsim.whatif` (``case, perturbation, status, reason, time_us, baseline_us, delta_us,
delta_pct``). Rows whose ``status`` is not ``ok`` carry NaN metrics: plan plots leave them
out, the what-if chart shows them as hatched, empty bars with their reason.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from .errors import ConfigError, bad_value, is_int
from .plan import COLUMNS

PLAN_COLUMNS = COLUMNS
"""The plan frame's fixed columns (:data:`hcsim.plan.COLUMNS`); any other column is an axis
of the plan (its swept values)."""

BREAKDOWN_PARTS = (("compute_ms", "compute", "#4c72b0"), ("exposed_comm_ms", "exposed communication", "#dd8452"),
                   ("free_ms", "idle (waits, bubbles)", "#c7c7c7"))
"""The stacked parts of a step, bottom to top: (column, legend, colour). They add up to the step time."""

BASELINE_COLOR = "#8c8c8c"
"""The what-if chart's baseline bar: neutral, so the perturbed cases stand out against it."""

MAX_NODE_LABELS = 48
"""A link heatmap names its nodes up to this many; beyond, only its rows are labelled."""

REASON_CHARS = 60
"""How much of a failed case's reason the what-if chart prints."""


# ---- checking the input -----------------------------------------------------------------------

def _require(df, columns, what: str) -> None:
    """One-line error when ``df`` is not a DataFrame, lacks ``columns`` or has no rows."""
    if not isinstance(df, pd.DataFrame):
        raise bad_value("df", df, f"a pandas DataFrame ({what})")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ConfigError(f"df: missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                          f"(expected {what})")
    if df.empty:
        raise ConfigError(f"df: no rows (expected {what})")


def _valid_points(df, needed) -> pd.DataFrame:
    """The rows a plan plot draws: status ``ok`` with every ``needed`` metric finite."""
    ok = df["status"].astype(str) == "ok"
    for c in needed:
        ok &= np.isfinite(pd.to_numeric(df[c], errors="coerce").to_numpy(dtype=float))
    kept = df[ok]
    if kept.empty:
        raise ConfigError(f"df: no valid point to draw ({len(df)} rows, none with status ok and finite "
                          f"{', '.join(needed)})")
    return kept


def _axis_columns(df) -> list:
    """The plan's swept axes: ``attrs["axes"]`` when the frame names them, else every column
    beyond the fixed ones (and beyond ``collective_ms``, which a plan adds when asked)."""
    named = df.attrs.get("axes")
    if isinstance(named, (list, tuple)) and all(c in df.columns for c in named):
        return [c for c in named if c not in ("servers", "npus")]
    return [c for c in df.columns if c not in PLAN_COLUMNS and c != "collective_ms"]


def _varying_with(df, x: str) -> list:
    """Columns (axes, servers, npus) that take several values at one ``x``: each of their
    combinations is its own curve, and they tell bars with the same ``x`` apart."""
    cols = [c for c in [*_axis_columns(df), "servers", "npus"] if c != x and c in df.columns]
    return [c for c in cols if df.groupby(x, sort=False)[c].nunique(dropna=False).max() > 1]


def _fmt(v) -> str:
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return f"{v:.3g}"
    return str(v)


def _is_numeric(s: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)


def _check_x(df, x) -> None:
    if not isinstance(x, str) or x not in df.columns:
        raise bad_value("x", x, f"a column of the frame ({', '.join(map(str, df.columns))})")


def _finish(fig, path):
    if path is None:
        return fig
    from .plot import _save

    out = _save(fig, path)
    if out.suffix.lower() == ".png":
        _to_palette(out)
    return out


PNG_COLORS = 256
"""Colours of a written PNG: these pictures need no more, and a palette PNG is 3-4 times
smaller than matplotlib's RGBA one (a notebook that stores a link heatmap stays small)."""


def _to_palette(path) -> None:
    from PIL import Image  # Pillow comes with matplotlib

    with Image.open(path) as im:
        # octree keeps a colour bar's gradient smooth (median cut bands it) and packs smaller
        octree = Image.Quantize.FASTOCTREE if hasattr(Image, "Quantize") else Image.FASTOCTREE  # Pillow < 9.1
        small = im.convert("RGB").quantize(PNG_COLORS, method=octree)
    small.save(path, optimize=True)


# ---- plan frames --------------------------------------------------------------------------------

def plot_breakdown(df: pd.DataFrame, path=None, x: str = "npus", title: str | None = None):
    """Stacked bars per plan point: compute, exposed communication and idle time, which add up
    to the step time (a black tick marks ``step_time_ms``, so a breakdown that does not add up
    shows).

    Parameters
    ----------
    df : DataFrame
        A plan frame (:func:`hcsim.plan`); invalid points are left out.
    path : str or Path, optional
        Write the picture here and return the path; without it, return the Figure.
    x : str
        The column that labels the bars (default ``npus``); columns that vary at one ``x``
        (another axis of the plan) are added to the labels.
    title : str, optional

    Examples
    --------
    >>> from hcsim.plan import plan
    >>> df = plan("scenarios/whatif_dp_pod.yaml", {"servers": [2, 4]})  # doctest: +SKIP
    >>> plot_breakdown(df, "breakdown.png", x="servers")  # doctest: +SKIP
    PosixPath('breakdown.png')
    """
    parts = [c for c, _, _ in BREAKDOWN_PARTS]
    _require(df, ["status", "step_time_ms", *parts], "a plan frame from hcsim.plan")
    _check_x(df, x)
    pts = _valid_points(df, ["step_time_ms", *parts])
    labels, upright = _labels(pts, x)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(min(12.0, max(5.0, 1.0 + 0.45 * len(pts))), 4.0 if upright else 5.0))
    pos = np.arange(len(pts))
    bottom = np.zeros(len(pts))
    for col, legend, color in BREAKDOWN_PARTS:
        h = pts[col].to_numpy(dtype=float)
        ax.bar(pos, h, bottom=bottom, color=color, label=legend, width=0.7, edgecolor="white", linewidth=0.5)
        bottom += h
    step = pts["step_time_ms"].to_numpy(dtype=float)
    ax.plot(pos, step, ls="none", marker="_", ms=18, mew=1.5, color="black", label="step time")
    ax.set_xticks(pos)
    ax.set_xticklabels(labels, fontsize=8 if upright else 7, rotation=0 if upright else 90)
    ax.set_xlabel(x)
    ax.set_ylabel("time per step (ms)")
    ax.set_title(title or f"where a step's time goes ({len(pts)} of {len(df)} points valid)", fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    return _finish(fig, path)


def _labels(pts, x: str) -> tuple:
    """Bar labels and whether they stand upright: short lines stacked under a bar when they
    fit, else one line each, turned on end."""
    extra = _varying_with(pts, x)
    lines = [[_fmt(row[x])] + [f"{c}={_fmt(row[c])}" for c in extra] for _, row in pts.iterrows()]
    if len(lines) <= 16 and max(len(t) for ls in lines for t in ls) <= 12:
        return ["\n".join(ls) for ls in lines], True
    return [", ".join(ls) for ls in lines], False


def _throughput_column(pts) -> str:
    tok = pd.to_numeric(pts["tokens_per_s"], errors="coerce")
    return "tokens_per_s" if np.isfinite(tok.to_numpy(dtype=float)).any() else "samples_per_s"


def plot_scaling(df: pd.DataFrame, path=None, x: str = "npus", title: str | None = None):
    """Scaling curves: step time, throughput (with the ideal: linear from the fastest point at
    the smallest ``x``) and scaling efficiency (ideal 1) against ``x``.

    Throughput is ``tokens_per_s``, or ``samples_per_s`` when the frame has no token counts;
    a job of written-out operations has neither (its throughput panel says so, and its
    efficiency compares steps per second). Points with the same other axes form one curve (a plan over servers and oversubscription
    draws one curve per oversubscription).

    Parameters
    ----------
    df : DataFrame
        A plan frame (:func:`hcsim.plan`); invalid points are left out.
    path : str or Path, optional
        Write the picture here and return the path; without it, return the Figure.
    x : str
        The column on the horizontal axis (default ``npus``; ``servers`` is the other usual one).
    title : str, optional

    Examples
    --------
    >>> from hcsim.plan import plan
    >>> space = {"servers": [1, 2, 4], "tp": [4], "global_batch": [32]}
    >>> df = plan("scenarios/plan_llm_910b_pod.yaml", space)  # doctest: +SKIP
    >>> plot_scaling(df, "scaling.png", x="servers")  # doctest: +SKIP
    PosixPath('scaling.png')
    """
    _require(df, ["status", "step_time_ms", "samples_per_s", "tokens_per_s", "scaling_efficiency"],
             "a plan frame from hcsim.plan")
    _check_x(df, x)
    pts = _valid_points(df, ["step_time_ms"])
    thr = _throughput_column(pts)
    has_thr = bool(np.isfinite(pd.to_numeric(pts[thr], errors="coerce").to_numpy(dtype=float)).any())
    numeric = _is_numeric(pts[x])
    groups = _varying_with(pts, x)
    plt = _pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8))
    cmap = plt.get_cmap("tab10")
    curves = pts.groupby(groups, sort=False, dropna=False) if groups else [((), pts)]
    # a category's place on the axis is its first appearance: every curve puts its value there
    places = {} if numeric else {v: i for i, v in enumerate(dict.fromkeys(pts[x]))}
    for i, (key, part) in enumerate(curves):
        part = part.sort_values(x, kind="stable") if numeric else part
        key = key if isinstance(key, tuple) else (key,)
        label = ", ".join(f"{c}={_fmt(v)}" for c, v in zip(groups, key, strict=True)) or None
        color = cmap(i % 10)
        xs = part[x].to_numpy(dtype=float) if numeric else np.array([places[v] for v in part[x]], dtype=float)
        axes[0].plot(xs, part["step_time_ms"].to_numpy(dtype=float), marker="o", ms=4, color=color, label=label)
        if has_thr:
            axes[1].plot(xs, pd.to_numeric(part[thr], errors="coerce").to_numpy(dtype=float), marker="o", ms=4,
                         color=color, label=label)
        eff = pd.to_numeric(part["scaling_efficiency"], errors="coerce").to_numpy(dtype=float)
        axes[2].plot(xs, eff, marker="o", ms=4, color=color, label=label)
    if not has_thr:
        axes[1].text(0.5, 0.5, "no throughput:\nthe job's operations carry\nno sample count", ha="center",
                     va="center", transform=axes[1].transAxes, fontsize=8, color="#555555")
    elif numeric:  # one ideal line, not one per curve: the best the smallest cluster does, scaled linearly
        x0 = float(pts[x].min())
        if x0 > 0:
            start = float(pd.to_numeric(pts.loc[pts[x] == x0, thr], errors="coerce").max())
            ends = np.array([x0, float(pts[x].max())])
            axes[1].plot(ends, start * ends / x0, ls="--", lw=1, color="black", label="ideal (linear)", gid="ideal")
    axes[2].axhline(1.0, ls="--", lw=1, color="black", label="ideal")
    names = {"tokens_per_s": "tokens / s", "samples_per_s": "samples / s"}
    for ax, ylabel in zip(axes, ("step time (ms)", names[thr], "scaling efficiency"), strict=True):
        ax.set_xlabel(x)
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        if numeric:
            lo, hi = float(pts[x].min()), float(pts[x].max())
            if lo > 0 and hi / lo >= 8:
                ax.set_xscale("log", base=2)
                ax.xaxis.set_major_formatter(_plain_ticks())
        else:
            ax.set_xticks(np.arange(len(places)))
            ax.set_xticklabels([_fmt(v) for v in places], fontsize=7, rotation=30, ha="right")
    axes[2].set_ylim(0, max(1.1, float(np.nanmax(pd.to_numeric(pts["scaling_efficiency"], errors="coerce")
                                               .to_numpy(dtype=float), initial=1.0)) * 1.05))
    if not has_thr:
        axes[1].set_xticks([])
        axes[1].set_yticks([])
    for ax in axes[1:]:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.suptitle(title or f"scaling ({len(pts)} of {len(df)} points valid)", fontsize=10)
    return _finish(fig, path)


def _plain_ticks():
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda v, _pos: _fmt(v))


def _cost_column(pts) -> str:
    cost = pd.to_numeric(pts["cost_per_step"], errors="coerce").to_numpy(dtype=float)
    return "cost_per_step" if np.isfinite(cost).any() else "npu_hours_per_step"


def _truthy(s: pd.Series) -> np.ndarray:
    """``True`` only where the value is True (NaN or None: no target was set)."""
    return np.array([v is True or (isinstance(v, (bool, np.bool_)) and bool(v)) for v in s], dtype=bool)


def plot_pareto(df: pd.DataFrame, path=None, title: str | None = None):
    """Step time against cost: every valid point, the Pareto front (``pareto``) joined and
    highlighted, the points that meet the target ringed, and the answer
    (``df.attrs["answer"]["point"]``) annotated.

    Cost is ``cost_per_step``, or ``npu_hours_per_step`` when the plan has no prices.

    Parameters
    ----------
    df : DataFrame
        A plan frame (:func:`hcsim.plan`); invalid points are left out.
    path : str or Path, optional
        Write the picture here and return the path; without it, return the Figure.
    title : str, optional
        Default: the question the plan answers.

    Examples
    --------
    >>> from hcsim.plan import plan
    >>> df = plan("scenarios/plan_llm_910b_pod.yaml")  # its own plan: section  # doctest: +SKIP
    >>> plot_pareto(df, "pareto.png")  # doctest: +SKIP
    PosixPath('pareto.png')
    """
    _require(df, ["point", "status", "step_time_ms", "cost_per_step", "npu_hours_per_step", "meets_target",
                  "pareto"], "a plan frame from hcsim.plan")
    pts = _valid_points(df, ["step_time_ms"])
    cost = _cost_column(pts)
    pts = _valid_points(pts, ["step_time_ms", cost])
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.6))
    cx = pts[cost].to_numpy(dtype=float)
    ty = pts["step_time_ms"].to_numpy(dtype=float)
    ax.scatter(cx, ty, s=22, color="#8c8c8c", zorder=2, label="plan point")
    front = pts[_truthy(pts["pareto"])].sort_values([cost, "step_time_ms"], kind="stable")
    if len(front):
        ax.plot(front[cost].to_numpy(dtype=float), front["step_time_ms"].to_numpy(dtype=float), marker="o", ms=6,
                lw=1.8, color="#d62728", zorder=3, label="Pareto front", gid="pareto-front")
    meets = pts[_truthy(pts["meets_target"])]
    if len(meets):
        ax.scatter(meets[cost].to_numpy(dtype=float), meets["step_time_ms"].to_numpy(dtype=float), s=110,
                   facecolors="none", edgecolors="#2ca02c", linewidths=1.5, zorder=4, label="meets target",
                   gid="meets-target")
    answer = df.attrs.get("answer") or {}
    chosen = pts[pts["point"] == answer.get("point")] if answer.get("point") is not None else pts.iloc[:0]
    # one label per spot on the front (equal points share it); the answer has its own
    spots: dict = {}
    for _, row in front.iterrows():
        if len(chosen) and row["point"] == chosen.iloc[0]["point"]:
            continue
        spots.setdefault((row[cost], row["step_time_ms"]), []).append(_point_text(pts, row))
    for xy, texts in spots.items():
        ax.annotate(" / ".join(texts), xy, textcoords="offset points", xytext=(6, 3), fontsize=6.5, color="#d62728")
    if len(chosen):
        row = chosen.iloc[0]
        ax.annotate(f"answer: {_point_text(pts, row)}",
                    (row[cost], row["step_time_ms"]), textcoords="offset points", xytext=(20, 22), fontsize=8,
                    arrowprops={"arrowstyle": "->", "color": "black"}, gid="answer")
    ax.set_xlabel({"cost_per_step": "cost per step", "npu_hours_per_step": "NPU hours per step"}[cost])
    ax.set_ylabel("step time (ms)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    text = answer.get("text")
    # the answer's text starts with its question: show it alone then
    heading = title or (text if text and str(text).startswith(str(answer.get("question"))) else
                        answer.get("question") or "step time against cost")
    extra = f"\n{_wrap(text, 100)}" if text and not title and heading != text else ""
    ax.set_title(_wrap(heading, 90) + extra, fontsize=8)
    return _finish(fig, path)


def _point_text(pts, row) -> str:
    """A point in words: its NPUs and the other axes that vary in the plan."""
    axes = [c for c in _axis_columns(pts) if c not in ("servers", "npus") and pts[c].nunique(dropna=False) > 1]
    return ", ".join([f"{_fmt(row['npus'])} NPUs" if "npus" in row.index else f"point {_fmt(row['point'])}"]
                     + [f"{c}={_fmt(row[c])}" for c in axes])


def _wrap(text, width: int) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(str(text), width)) or str(text)


# ---- what-if frames -----------------------------------------------------------------------------

def plot_whatif(df: pd.DataFrame, path=None, title: str | None = None):
    """Baseline against perturbed: one horizontal bar per case (``time_us``; the baseline
    first, in grey), each labelled with its change (``delta_pct``); cases that did not run
    (``status`` not ``ok``) are hatched and empty, with their reason shortened.

    Parameters
    ----------
    df : DataFrame
        A what-if frame (:func:`hcsim.whatif` or :func:`hcsim.whatif.whatif_collective`).
    path : str or Path, optional
        Write the picture here and return the path; without it, return the Figure.
    title : str, optional

    Examples
    --------
    >>> from hcsim.whatif import whatif_collective
    >>> from hcsim.topology import leaf_spine
    >>> df = whatif_collective(leaf_spine(2, 2, 2, 100e9), "alltoall", "64M",
    ...                        ["fail-link=leaf0,spine0"])  # doctest: +SKIP
    >>> plot_whatif(df, "whatif.png")  # doctest: +SKIP
    PosixPath('whatif.png')
    """
    _require(df, ["case", "status", "reason", "time_us", "delta_pct"], "a what-if frame from hcsim.whatif")
    ok = (df["status"].astype(str) == "ok").to_numpy() & np.isfinite(
        pd.to_numeric(df["time_us"], errors="coerce").to_numpy(dtype=float))
    if not ok.any():
        raise ConfigError(f"df: no case ran (all {len(df)} have a status other than ok)")
    base = df["case"].astype(str) == "baseline"
    rows = pd.concat([df[base], df[~base]])  # the baseline first, whatever the frame's order
    ok = (rows["status"].astype(str) == "ok").to_numpy() & np.isfinite(
        pd.to_numeric(rows["time_us"], errors="coerce").to_numpy(dtype=float))
    times = pd.to_numeric(rows["time_us"], errors="coerce").to_numpy(dtype=float)
    scale, unit = (1e-3, "ms") if np.nanmax(times) >= 1e4 else (1.0, "us")
    widest = float(np.nanmax(times)) * scale
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.42 * len(rows)))
    pos = np.arange(len(rows))
    for i, (is_ok, (_, row)) in enumerate(zip(ok, rows.iterrows(), strict=True)):
        if is_ok:
            t = float(row["time_us"]) * scale
            is_base = str(row["case"]) == "baseline"
            delta = pd.to_numeric(pd.Series([row["delta_pct"]]), errors="coerce").iloc[0]
            color = BASELINE_COLOR if is_base else ("#d62728" if delta > 0 else "#2ca02c" if delta < 0
                                                    else "#4c72b0")
            ax.barh(i, t, color=color, height=0.65, gid=f"case:{row['case']}")
            note = "baseline" if is_base else ("" if math.isnan(delta) else f"{delta:+.1f}%")
            ax.text(t + widest * 0.01, i, f"{t:.4g} {unit}  {note}", va="center", fontsize=7)
        else:
            ax.barh(i, widest, height=0.65, facecolor="none", edgecolor="#8c8c8c", hatch="//", lw=0.8,
                    gid=f"case:{row['case']}")
            reason = str(row["reason"])
            if reason.startswith(f"{row['case']}: "):  # the row's label already says which case
                reason = reason[len(str(row["case"])) + 2:]
            ax.text(widest * 0.02, i, f"{row['status']}: {_short(reason)}", va="center", fontsize=7,
                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 1})
    ax.set_yticks(pos)
    ax.set_yticklabels([_short(c, 40) for c in rows["case"].astype(str)], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, widest * 1.3)
    ax.set_xlabel(f"time ({unit})")
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_title(title or f"what-if: {int(ok.sum()) - 1} perturbed case(s) against the baseline", fontsize=10)
    return _finish(fig, path)


def _short(text, limit: int = REASON_CHARS) -> str:
    """The first ``limit`` characters of one line of ``text``."""
    text = " ".join(str(text if text == text else "").split())  # NaN reads as empty
    return text if len(text) <= limit else text[:limit - 3] + "..."


# ---- a job's links over the topology ------------------------------------------------------------

def plot_link_utilization(topology, links, path=None, top: int | None = None, vmax: float | None = None,
                          title: str | None = None):
    """A heatmap of link utilisation drawn over the topology.

    Nodes sit in rows by tier, NPUs at the bottom in rank order, then NICs, then switches by
    their distance from the NPUs (leaves, spines, ...), each row ordered under its neighbours;
    a topology of NPUs only (ring, torus, mesh) takes networkx's layout instead. Links inside
    a row (HCCS between NPUs of a server) are drawn as arcs below it. Each link is coloured by
    the larger utilisation of its two directions; idle links are thin and grey, and links the
    table does not list (failed in a what-if) are dashed. Node names are shown up to
    :data:`MAX_NODE_LABELS` nodes.

    Parameters
    ----------
    topology : Topology or str
        The network the job ran on (a built-in name or YAML path is loaded).
    links : DataFrame or JobResult
        Per directed link: ``src, dst, utilization`` (``JobResult.links``).
    path : str or Path, optional
        Write the picture here and return the path; without it, return the Figure.
    top : int, optional
        Label the ``top`` busiest links with their utilisation.
    vmax : float, optional
        Utilisation at the top of the colour scale (default: the busiest link's); give the
        same value to compare two runs.
    title : str, optional

    Examples
    --------
    >>> from hcsim.topology import leaf_spine
    >>> from hcsim.workload import Workload, run
    >>> t = leaf_spine(2, 2, 2, 100e9)
    >>> w = Workload("a2a")
    >>> _ = w.collective("a2a", w.communicator("all", range(4)), "alltoall", 1 << 20)
    >>> plot_link_utilization(t, run(t, w), "links.png", top=3)  # doctest: +SKIP
    PosixPath('links.png')
    """
    from .topology.io import load_topology
    from .topology.model import Topology

    topo = topology if isinstance(topology, Topology) else load_topology(topology)
    table = getattr(links, "links", links)
    if not isinstance(table, pd.DataFrame):
        raise bad_value("links", links, "a DataFrame of src, dst, utilization (JobResult.links) or a JobResult")
    missing = [c for c in ("src", "dst", "utilization") if c not in table.columns]
    if missing:
        raise ConfigError(f"links: missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                          "(expected JobResult.links: src, dst, utilization)")
    if top is not None and (not is_int(top) or top < 0):
        raise bad_value("top", top, "a number of links >= 0, or None")
    top = None if top is None else int(top)
    if vmax is not None and not (isinstance(vmax, (int, float)) and vmax > 0 and math.isfinite(vmax)):
        raise bad_value("vmax", vmax, "a utilisation > 0, or None")
    from .plot import check_drawable

    check_drawable(topo, "plot_link_utilization")
    g = topo.graph
    util = _undirected_utilization(table, g, topo.name)
    edges = sorted({_key(u, v) for u, v in g.edges()})
    pos, rows = _layout(topo)
    peak = max(util.values(), default=0.0)
    scale = vmax if vmax is not None else (peak if peak > 0 else 1.0)

    import matplotlib.colors as mcolors
    from matplotlib.collections import LineCollection

    plt = _pyplot()
    n = g.number_of_nodes()
    fig, ax = plt.subplots(figsize=(min(14.0, 6.0 + n / 40), 5.6 if rows else 6.4))
    cmap = plt.get_cmap("plasma")
    norm = mcolors.Normalize(vmin=0.0, vmax=scale)
    down = [e for e in edges if e not in util]
    idle = [e for e in edges if e in util and util[e] <= 0]
    busy = sorted((e for e in edges if util.get(e, 0) > 0), key=lambda e: util[e])  # busiest drawn last
    if down:
        ax.add_collection(LineCollection([_segment(pos, e, rows) for e in down], colors="#bbbbbb", linewidths=0.8,
                                         linestyles="dashed", label="not in links (failed)", gid="down"))
    if idle:
        ax.add_collection(LineCollection([_segment(pos, e, rows) for e in idle], colors="#dddddd", linewidths=0.5,
                                         label="idle", gid="idle"))
    if busy:
        values = np.array([util[e] for e in busy])
        ax.add_collection(LineCollection([_segment(pos, e, rows) for e in busy], colors=cmap(norm(values)),
                                         linewidths=0.8 + 2.2 * np.minimum(values / scale, 1.0), gid="busy"))
    if top:
        chosen = sorted(busy, key=lambda e: -util[e])[:top]
        for i, e in enumerate(chosen):
            # each label at its own fraction along its link: equally busy links that share an
            # end (the usual case) do not stack their labels on one spot
            x, y = _along(_segment(pos, e, rows), (i + 1) / (len(chosen) + 1))
            ax.text(x, y, f"{100 * util[e]:.0f}%", fontsize=6, ha="center", va="center", zorder=5,
                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.5, "alpha": 0.8})
    kinds = dict(g.nodes(data="kind"))
    colors = {"npu": "#d62728", "switch": "#1f77b4", "nic": "#2ca02c", "pcie": "#9467bd"}
    names = list(g.nodes)
    xy = np.array([pos[v] for v in names])
    ax.scatter(xy[:, 0], xy[:, 1], s=max(4.0, min(60.0, 2400.0 / n)), zorder=3,
               c=[colors.get(kinds.get(v), "#7f7f7f") for v in names], edgecolors="none")
    if n <= MAX_NODE_LABELS:
        for v in names:
            ax.annotate(v, pos[v], textcoords="offset points", xytext=(0, 5), ha="center", fontsize=6, zorder=4)
    for y, label in rows:
        ax.text(-0.02, y, label, ha="right", va="center", fontsize=8)
    sm = plt.cm.ScalarMappable(norm=norm, cmap=cmap)
    bar = fig.colorbar(sm, ax=ax, fraction=0.03, pad=0.01)
    bar.set_label("link utilisation (busier direction)", fontsize=8)
    bar.ax.tick_params(labelsize=7)
    bar.ax.yaxis.set_major_formatter(_percent_ticks())
    ax.autoscale_view()
    ax.margins(0.04)
    if rows:
        left, right = ax.get_xlim()
        ax.set_xlim(min(left, -0.16), right)
    ax.axis("off")
    if down or idle:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2, fontsize=7, frameon=False)
    ax.set_title(title or f"{topo.name}: link utilisation, busiest {100 * peak:.0f}% ({len(busy)} of "
                 f"{len(edges)} links used)", fontsize=10)
    return _finish(fig, path)


def _percent_ticks():
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda v, _pos: f"{100 * v:.0f}%")


def _key(u, v) -> tuple:
    return (u, v) if str(u) <= str(v) else (v, u)


def _undirected_utilization(table, g, name: str) -> dict:
    """``{(a, b): max utilisation of a -> b and b -> a}`` for the links in ``table``."""
    util: dict = {}
    values = pd.to_numeric(table["utilization"], errors="coerce").to_numpy(dtype=float)
    for u, v, x in zip(table["src"], table["dst"], values, strict=True):
        if not g.has_edge(u, v):
            raise bad_value("links", f"{u}->{v}", f"links of topology {name!r} (this row's link is not in it)")
        k = _key(u, v)
        x = 0.0 if math.isnan(x) else float(x)
        util[k] = max(util.get(k, 0.0), x)
    return util


def _natural(name) -> list:
    """Sort key that puts npu2 before npu10."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(name))]


ROW_NAMES = ("leaves", "spines", "core")
"""Names of the switch rows, from the NPUs up."""


def _layout(topo):
    """Node positions and the row labels ``[(y, label)]`` (empty for networkx's layout)."""
    import networkx as nx

    g = topo.graph.to_undirected(as_view=True)
    npus = list(topo.npus)
    kinds = dict(g.nodes(data="kind"))
    others = [v for v in g.nodes if kinds.get(v) != "npu"]
    if not others:  # NPUs only: a ring, a torus, a mesh
        layout = nx.spring_layout(g, seed=0) if len(npus) <= 300 else nx.circular_layout(g)
        return {v: (float(x), float(y)) for v, (x, y) in layout.items()}, []
    # hops from the nearest NPU: NICs and leaves at 1 or 2, spines one further, ...
    depth = {v: 0 for v in npus}
    frontier = list(npus)
    while frontier:
        nxt = []
        for v in frontier:
            for w in g.neighbors(v):
                if w not in depth:
                    depth[w] = depth[v] + 1
                    nxt.append(w)
        frontier = nxt
    far = max(depth.values(), default=0) + 1
    order = {"nic": 0, "pcie": 1}
    keys = sorted({(depth.get(v, far), order.get(kinds.get(v), 2)) for v in others})
    members = {k: [] for k in keys}
    for v in others:
        members[(depth.get(v, far), order.get(kinds.get(v), 2))].append(v)
    pos, rows = {}, []
    _place(npus, 0.0, pos)
    rows.append((0.0, f"NPUs ({len(npus)})"))
    switch_rows = 0
    for y, k in enumerate(keys, start=1):
        row = members[k]
        # under its neighbours already placed (barycentre), names in natural order for ties
        bary = {v: np.mean([pos[w][0] for w in g.neighbors(v) if w in pos] or [0.5]) for v in row}
        row.sort(key=lambda v: (round(bary[v], 9), _natural(v)))
        _place(row, float(y), pos)
        kind = kinds.get(row[0])
        if kind in ("nic", "pcie"):
            label = f"{'NICs' if kind == 'nic' else 'PCIe'} ({len(row)})"
        else:
            label = f"{ROW_NAMES[switch_rows] if switch_rows < len(ROW_NAMES) else 'switches'} ({len(row)})"
            switch_rows += 1
        rows.append((float(y), label))
    return pos, rows


def _along(seg: np.ndarray, f: float) -> tuple:
    """The point a fraction ``f`` of the way along polyline ``seg`` (by vertex index)."""
    t = f * (len(seg) - 1)
    i = min(int(t), len(seg) - 2)
    x, y = seg[i] + (seg[i + 1] - seg[i]) * (t - i)
    return float(x), float(y)


def _place(row, y: float, pos: dict) -> None:
    for i, v in enumerate(row):
        pos[v] = ((i + 0.5) / len(row), y)


def _segment(pos, e, rows) -> np.ndarray:
    """The polyline of link ``e``: straight between rows, an arc below a row within it."""
    (x0, y0), (x1, y1) = pos[e[0]], pos[e[1]]
    if not rows or y0 != y1:
        return np.array([(x0, y0), ((x0 + x1) / 2, (y0 + y1) / 2), (x1, y1)])
    t = np.linspace(0.0, 1.0, 13)
    depth = 0.15 + 0.6 * abs(x1 - x0)  # wider arcs dip further, so nested ones stay apart
    xs = x0 + (x1 - x0) * t
    ys = y0 - depth * 4 * t * (1 - t)
    return np.column_stack([xs, ys])


def _pyplot():
    from .plot import _pyplot as pyplot

    return pyplot()
