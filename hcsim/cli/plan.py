"""``hcsim plan``: a scenario over a search space, and the smallest cluster that meets a target.

Parses, calls :func:`hcsim.plan.plan`, prints one row per point (invalid points with their
reason) and the answer, and writes the CSV and the pictures (:mod:`hcsim.plot_plan`) when asked.

::

    hcsim plan scenarios/plan_llm_910b_pod.yaml --plot out/plan.png
    hcsim plan SCENARIO --vary servers=4,8,16 --vary tp=4,8 --target-step-ms 900 --price-per-npu-hour 2.5
"""

from __future__ import annotations

import argparse
import math

from ..errors import HcsimError


def register(sub) -> None:
    """Add the ``plan`` subcommand to ``sub`` (argparse subparsers)."""
    p = sub.add_parser("plan", help="capacity planning: a scenario over servers, layouts, rates, ...; the smallest "
                       "cluster meeting a step-time target, the Pareto front of time against cost")
    p.add_argument("scenario", help="a scenario file (its plan: section gives the defaults)")
    p.add_argument("--vary", action="append", default=[], metavar="AXIS=V1,V2,...",
                   help="an axis of the search space and its values (YAML each, or one YAML list [V1, V2]), "
                   "repeatable; replaces the file's "
                   "space: servers, npus, tp, pp, dp (or auto), ep, global_batch, policy, a generator parameter "
                   "(micro_batches, grad_dtype, ...) or a topology parameter (oversubscription, "
                   "roce_bandwidth_GBps, ...)")
    p.add_argument("--target-step-ms", type=float, default=None, help="the question: smallest cluster whose step "
                   "time is at most this")
    p.add_argument("--target-collective-ms", type=float, default=None,
                   help="also ask that --collective's longest operation take at most this")
    p.add_argument("--collective", default=None, help="a collective name (allreduce) or the start of operation "
                   "names: adds its longest duration (coll ms)")
    p.add_argument("--price-per-npu-hour", type=float, default=None, help="cost of one NPU for one hour: adds the "
                   "cost per step (the Pareto front is then time against cost)")
    p.add_argument("--policy", default=None, help="auto (HCCL's selection) or best (each distinct collective the "
                   "fastest candidate simulated alone); default: the file's, else auto")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="change one field of the scenario file before it is checked (VALUE is YAML; repeatable)")
    p.add_argument("--csv", help="write every row (every column) here")
    p.add_argument("--plot", help="draw step time against cost with the Pareto front here (PNG, PDF or SVG)")
    p.add_argument("--plot-scaling", help="draw step time, throughput and efficiency against NPUs here")
    p.add_argument("--workers", type=int, default=None,
                   help="run the points on a local Dask cluster of N worker processes (hcsim[dask])")
    p.add_argument("--scheduler", default=None,
                   help="run the points on a running Dask scheduler, tcp://HOST:PORT (hcsim[dask])")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="a progress bar on stderr (default: only on a terminal)")
    p.set_defaults(handler=command)


def parse_vary(items) -> dict | None:
    """``--vary AXIS=V1,V2`` (or ``AXIS=[V1, V2]``) options as a space ``{axis: [values]}``
    (each value read as YAML), in the order given; None when there is none.

    >>> parse_vary(["servers=4,8", "grad_dtype=bf16,fp32", "dp=auto"])
    {'servers': [4, 8], 'grad_dtype': ['bf16', 'fp32'], 'dp': ['auto']}
    >>> parse_vary(["servers=[4, 8]"])  # a YAML list says the same
    {'servers': [4, 8]}
    """
    from . import _yaml_value

    if not items:
        return None
    space: dict = {}
    for item in items:
        axis, sep, text = item.partition("=")
        axis = axis.strip()
        if not sep or not axis or not text.strip():
            raise HcsimError(f"--vary = {item!r}: AXIS=V1,V2,..., such as servers=4,8,16")
        if axis in space:
            raise HcsimError(f"--vary = {item!r}: axis {axis!r} given twice (list its values once)")
        if text.strip().startswith("[") and text.strip().endswith("]"):  # a YAML list, servers=[4, 8]
            space[axis] = _yaml_value(text)[1] if len(text) <= 100_000 else None
            if not isinstance(space[axis], list):
                raise HcsimError(f"--vary = {item!r}: {text.strip()!r} is not a YAML list (or write V1,V2,...)")
            continue
        values = []
        for part in text.split(","):
            ok, value = _yaml_value(part.strip()) if len(part) <= 1000 else (True, part)
            if not ok:
                raise HcsimError(f"--vary = {item!r}: value {part.strip()!r} is not YAML")
            values.append(value)
        space[axis] = values
    return space


def command(a) -> int:
    import time

    from ..parallel import dask_client
    from ..plan import plan
    from . import PLOT_FORMATS, _settings, _writable, _write_csv

    _writable(a.csv, "--csv")
    _writable(a.plot, "--plot")
    _writable(a.plot_scaling, "--plot-scaling")
    if a.plot_scaling and not a.plot_scaling.lower().endswith(PLOT_FORMATS):
        raise HcsimError(f"--plot-scaling = {a.plot_scaling!r}: a picture file ending " + ", ".join(PLOT_FORMATS))
    space = parse_vary(a.vary)
    start = time.perf_counter()
    with dask_client(a.workers, a.scheduler, flags=True) as client:
        df = plan(a.scenario, space, target_step_ms=a.target_step_ms, target_collective_ms=a.target_collective_ms,
                  collective=a.collective, price_per_npu_hour=a.price_per_npu_hour, policy=a.policy,
                  overrides=_settings(a.set), client=client, progress=a.progress)
    took = time.perf_counter() - start
    print(format_plan(df), end="")
    print(f"# {len(df)} points in {took:.1f} s")
    _write_csv(df, a.csv)
    drawable = bool((df["status"] == "ok").any())  # the plan's answer stands without its pictures
    for flag, path in (("--plot", a.plot), ("--plot-scaling", a.plot_scaling)):
        if path and not drawable:
            print(f"# {flag}: nothing drawn, no valid point")
    if a.plot and drawable:
        from ..plot_plan import plot_pareto

        print(f"# Pareto plot written to {plot_pareto(df, a.plot)}")
    if a.plot_scaling and drawable:  # written-out operations too: step time and efficiency, no throughput
        from ..plot_plan import plot_scaling

        print(f"# scaling plot written to {plot_scaling(df, a.plot_scaling)}")
    return 0


def _num(x, fmt: str) -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, fmt)


def format_plan(df) -> str:
    """The plan as a table (``point``, the axes, NPUs, status, step ms, throughput, efficiency,
    exposed communication, NPU-hours and cost per step, meets, Pareto; an invalid point's
    reason in the last column) and the answer line."""
    import pandas as pd

    from ..plan import ms_text as _ms
    from . import _table

    axes = list(df.attrs.get("axes", ()))
    if df["tokens_per_s"].notna().any():
        rate, rate_head = "tokens_per_s", "tokens/s"
    elif df["samples_per_s"].notna().any():
        rate, rate_head = "samples_per_s", "samples/s"
    else:
        rate, rate_head = None, "steps/s"
    coll = "collective_ms" in df.columns
    head = ["point", *axes, *([] if "npus" in axes else ["npus"]), "status", "step ms", rate_head, "efficiency",
            "exposed ms", *(["coll ms"] if coll else []), "NPU-h/step", "cost", "meets", "pareto", "reason"]
    rows = []
    for r in df.to_dict("records"):
        ok = r["status"] == "ok"
        thr = r[rate] if rate else (1e3 / r["step_time_ms"] if ok else math.nan)
        meets = r["meets_target"]
        row = [str(r["point"]), *(str(r[c]) for c in axes), *([] if "npus" in axes else [_num(r["npus"], ".0f")]),
               r["status"], _ms(r["step_time_ms"]), _num(thr, ",.0f" if rate else ".2f"),
               _num(r["scaling_efficiency"], ".2f"), _ms(r["exposed_comm_ms"]),
               *([_ms(r["collective_ms"])] if coll else []), _num(r["npu_hours_per_step"], ".3g"),
               _num(r["cost_per_step"], ".3g"), "-" if pd.isna(meets) else ("yes" if meets else "no"),
               "*" if r["pareto"] else "", "" if ok else r["reason"]]
        rows.append(row)
    invalid = int((df["status"] == "invalid").sum())
    refused = int((df["status"] == "refused").sum())
    policy = "per point (an axis)" if "policy" in axes else df.attrs.get("policy", "auto")
    out = [f"# plan of {df.attrs.get('scenario', '?')}: {len(df)} points ({invalid} invalid, not run"
           + (f"; {refused} refused by the work bound" if refused else "") + "), policy "
           f"{policy}; pareto * = on the front of step time against "
           + ("cost" if df["cost_per_step"].notna().any() else "NPU-hours"), *_table(head, rows),
           f"answer: {df.attrs['answer']['text']}"]
    return "\n".join(out) + "\n"
