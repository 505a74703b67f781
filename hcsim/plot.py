"""Drawing: sweeps and topologies. matplotlib is imported inside each function."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .errors import bad_value, check_frame, check_topology

_LABEL = {"busbw_GBps": "bus bandwidth (GB/s)", "algbw_GBps": "algorithm bandwidth (GB/s)",
          "time_us": "time (us)"}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path) -> Path:
    """Write ``fig`` to ``path`` (its folders made as needed) and close it; a path that is not a
    picture file matplotlib writes, or cannot be written, is a one-line error."""
    import matplotlib.pyplot as plt

    from .errors import ConfigError

    try:
        path = Path(path)
        formats = fig.canvas.get_supported_filetypes()
        if path.suffix.lower().lstrip(".") not in formats:
            raise bad_value("path", str(path), "a picture file ending .png, .pdf or .svg (or another suffix "
                            "matplotlib writes: " + ", ".join(sorted(formats)) + ")")
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=120)
    except TypeError:
        raise bad_value("path", path, "a file path (str or Path)") from None
    except OSError as exc:
        raise ConfigError(f"path = {str(path)!r}: cannot be written ({exc.strerror or type(exc).__name__})") from None
    finally:
        plt.close(fig)
    return path


def _check_choice(field: str, value, allowed) -> None:
    if not isinstance(value, str) or value not in allowed:
        raise bad_value(field, value, "one of " + ", ".join(allowed))


def _check_title(title) -> None:
    if title is not None and not isinstance(title, str):
        raise bad_value("title", title, "a str, or None for the default title")


def plot_sweep(df: pd.DataFrame, path, metric: str = "busbw_GBps", title: str | None = None) -> Path:
    """Plot ``metric`` against message size (log x), one line per algorithm; write ``path``.

    ``df`` is what :func:`hcsim.sweep` returns; ``metric`` one of its number columns (bad input is
    a one-line :class:`~hcsim.errors.ConfigError`)."""
    _check_choice("metric", metric, [c for c in _LABEL if c in getattr(df, "columns", ())] or list(_LABEL))
    check_frame(df, "hcsim.sweep", ("algorithm", "size_bytes", metric), ("size_bytes", metric))
    _check_title(title)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for algo, part in df.groupby("algorithm", sort=False):
        ax.plot(part["size_bytes"], part[metric], marker="o", ms=3, label=algo)
    ax.set_xscale("log", base=2)
    if metric == "time_us":
        ax.set_yscale("log")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel(_LABEL.get(metric, metric))
    if title is None and {"collective", "ranks", "mode"} <= set(df.columns):
        first = df.iloc[0]
        title = f"{first['collective']}, {first['ranks']} ranks ({first['mode']})"
    ax.set_title(title or "")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return _save(fig, path)


MAX_DRAW_LINKS = 100_000
"""Most directed links :func:`draw_topology` draws: about 3 s of CPU on a 2-core machine
(drawing costs about 30 us a directed link: a 2,048-server A2 PoD's 184,320 took 7.8 s, a
1,000-NPU full mesh's 999,000 about 31 s). Past a few thousand NPUs a drawing is a blur anyway."""


def check_drawable(topo, what: str) -> None:
    """Refuse, in one line, to draw a topology of more than :data:`MAX_DRAW_LINKS` links."""
    from .errors import ConfigError

    links = topo.graph.number_of_edges()
    if links > MAX_DRAW_LINKS:
        raise ConfigError(f"{what}: topology {topo.name!r} has {links:,} links, more than the {MAX_DRAW_LINKS:,} "
                          "a drawing takes (about 3 s); draw a smaller instance of it (fewer servers or NPUs)")


def draw_topology(topo, path) -> Path:
    """Draw a topology: NPUs by server, switches and NICs, links coloured by tier.

    A topology of more than :data:`MAX_DRAW_LINKS` links is refused (a one-line
    :class:`~hcsim.errors.ConfigError`) before anything is drawn."""
    import networkx as nx

    check_topology(topo)
    check_drawable(topo, "draw")
    plt = _pyplot()
    g = topo.graph.to_undirected(as_view=False)
    colors = {"npu": "#d62728", "switch": "#1f77b4", "nic": "#2ca02c", "pcie": "#9467bd"}
    tiers = sorted({d["spec"].tier for _, _, d in topo.graph.edges(data=True)})
    cmap = plt.get_cmap("tab10")
    tier_color = {t: cmap(i % 10) for i, t in enumerate(tiers)}
    # Shells need only numpy (no scipy): NPUs outside in rank order, NICs, then switches.
    shells = [topo.npus] + [[n for n, k in g.nodes(data="kind") if k == kind] for kind in ("nic", "pcie", "switch")]
    pos = nx.shell_layout(g, nlist=[s for s in shells if s][::-1])
    fig, ax = plt.subplots(figsize=(7, 7))
    for tier in tiers:
        edges = [(u, v) for u, v, d in g.edges(data=True) if d["spec"].tier == tier]
        nx.draw_networkx_edges(g, pos, edgelist=edges, edge_color=[tier_color[tier]], ax=ax, alpha=0.6,
                               label=tier)
    kinds = nx.get_node_attributes(g, "kind")
    nx.draw_networkx_nodes(g, pos, node_color=[colors[kinds[n]] for n in g.nodes], node_size=120, ax=ax)
    if g.number_of_nodes() <= 64:
        nx.draw_networkx_labels(g, pos, font_size=6, ax=ax)
    ax.set_title(f"{topo.name}: {topo.num_npus} NPUs")
    ax.legend(loc="lower right", fontsize=7)
    ax.axis("off")
    return _save(fig, path)


def plot_select(df: pd.DataFrame, path, metric: str = "time_us") -> Path:
    """Every candidate's time (or busbw) against size, the fastest algorithm's regions shaded
    and HCCL's choice marked. ``df`` is what :func:`hcsim.select` returns; ``metric``
    ``"time_us"`` or ``"algbw_GBps"``."""
    _check_choice("metric", metric, ("time_us", "algbw_GBps"))
    check_frame(df, "hcsim.select", ("size_bytes", "best", "hccl_time_us"), ("size_bytes", "hccl_time_us"))
    cands = [c[len("time_us["):-1] for c in df.columns if isinstance(c, str) and c.startswith("time_us[")]
    check_frame(df, "hcsim.select", (), tuple(f"time_us[{a}]" for a in cands))
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.6))
    cmap = plt.get_cmap("tab10")
    color = {a: cmap(i % 10) for i, a in enumerate(cands)}
    sizes = df["size_bytes"].to_numpy(dtype=float)
    for a in cands:
        t = df[f"time_us[{a}]"].to_numpy()
        y = t if metric == "time_us" else sizes / (t * 1e-6) / 1e9
        ax.plot(sizes, y, marker="o", ms=3, color=color[a], label=a)
    # winning regions: from halfway (in log) between sizes to halfway
    edges = [sizes[0] / 2 ** 0.5] + [float((a * b) ** 0.5) for a, b in zip(sizes[:-1], sizes[1:], strict=True)] + \
        [sizes[-1] * 2 ** 0.5]
    for i, best in enumerate(df["best"]):
        ax.axvspan(edges[i], edges[i + 1], color=color.get(best, "grey") if isinstance(best, str) else "grey", alpha=0.08, lw=0)
    hccl_y = df["hccl_time_us"].to_numpy() if metric == "time_us" else sizes / (df["hccl_time_us"].to_numpy() * 1e-6) / 1e9
    ax.plot(sizes, hccl_y, ls="none", marker="x", ms=7, color="black", label="HCCL's choice")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("time (us)" if metric == "time_us" else "algorithm bandwidth (GB/s)")
    first = df.iloc[0]
    if {"collective", "ranks"} <= set(df.columns):
        ax.set_title(f"{first['collective']}, {first['ranks']} ranks: candidates (shade = fastest)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    return _save(fig, path)


def plot_validation(df: pd.DataFrame, path, title: str | None = None) -> Path:
    """Predicted against measured time (log-log), one marker per collective, colour per
    algorithm, with the y = x line and a +-10% band; write ``path``.

    ``df`` is what :func:`hcsim.validate.validate_measured` or
    :func:`hcsim.validate.validate_mpi` returns (``time_us``, ``predicted_us``).
    """
    label_col = "mpi_algorithm" if "mpi_algorithm" in getattr(df, "columns", ()) else "algorithm"
    check_frame(df, "hcsim.validate.validate_measured", ("collective", label_col, "time_us", "predicted_us"),
                 ("time_us", "predicted_us"))
    _check_title(title)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 5.6))
    markers = "osD^v<>Ph*X"
    colls = list(dict.fromkeys(df["collective"]))
    algos = list(dict.fromkeys(df[label_col]))
    colours = plt.get_cmap("tab20").colors
    for (coll, algo), part in df.groupby(["collective", label_col], sort=False):
        ax.scatter(part["time_us"], part["predicted_us"], s=28, marker=markers[colls.index(coll) % len(markers)],
                   color=colours[algos.index(algo) % len(colours)], label=f"{coll} / {algo}", alpha=0.85)
    lo = min(df["time_us"].min(), df["predicted_us"].min()) / 1.3
    hi = max(df["time_us"].max(), df["predicted_us"].max()) * 1.3
    ax.plot([lo, hi], [lo, hi], color="k", lw=1)
    ax.fill_between([lo, hi], [lo * 0.9, hi * 0.9], [lo * 1.1, hi * 1.1], color="grey", alpha=0.2, label="+-10%")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured time (us)")
    ax.set_ylabel("predicted time (us)")
    a = df.attrs
    if title is None and "median_abs_error" in a:
        title = (f"{a.get('topology', '')}: median |error| {100 * a['median_abs_error']:.1f}%, "
                 f"p90 {100 * a['p90_abs_error']:.1f}% ({a.get('points')} points)")
    ax.set_title(title or "", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6, ncol=2, loc="upper left")
    return _save(fig, path)
