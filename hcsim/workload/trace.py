"""A job's timeline as a Chrome trace (the JSON Perfetto and chrome://tracing open).

The Ascend profiler writes one ``trace_view.json`` per rank in this format (FACTS s9); hcsim
writes the whole job in one file. Every operation on every rank is a complete event
(``"ph": "X"``, ``ts`` and ``dur`` in microseconds) on the track of its stream:

* ``group="npu"`` (default): a process per NPU (``pid`` = rank, named ``npu 3``), a thread per
  stream (``compute``, ``comm``, ...);
* ``group="server"``: a process per server, a thread per (NPU, stream) named ``npu 3 comm``,
  for a large job where one process per NPU is too many tracks.

Metadata events (``"ph": "M"``) name and order the processes and threads. The file opens in
https://ui.perfetto.dev (Open trace file).

Examples
--------
>>> import pandas as pd
>>> from types import SimpleNamespace
>>> ops = pd.DataFrame({"op": ["fwd"], "kind": ["compute"], "rank": [0], "stream": ["compute"],
...                     "start_s": [0.0], "end_s": [1e-3]})
>>> doc = chrome_trace(SimpleNamespace(ops=ops, step_time_s=1e-3))
>>> [e["ph"] for e in doc["traceEvents"]]
['M', 'M', 'M', 'M', 'X']
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from ..errors import bad_value

GROUPS = ("npu", "server")
"""How :func:`write_chrome_trace` makes processes: one per NPU, or one per server."""

_ARGS = ("comm", "collective", "algorithm", "size_bytes")
"""Operation columns copied into each event's ``args`` (when present and set)."""

_CATEGORY = {"compute": "compute", "collective": "communication", "sendrecv": "communication",
             "recordevent": "event", "waitevent": "event"}


def _plain(value):
    """A JSON value for a table cell (NaN and None are dropped by the caller)."""
    if hasattr(value, "item"):  # numpy scalar
        value = value.item()
    if isinstance(value, float):
        return None if not math.isfinite(value) else (int(value) if value.is_integer() else value)
    if isinstance(value, (int, str, bool)):
        return value
    return None if value is None else str(value)


def rank_servers(topology) -> dict:
    """``{rank: server index}`` of a topology, servers numbered in order of their first rank."""
    from ..topology.model import Topology

    if not isinstance(topology, Topology):
        raise bad_value("topology", topology, "the Topology the job ran on (group='server' needs it to "
                        "know each rank's server)")
    topo = topology
    out, index = {}, {}
    for rank, name in enumerate(topo.npus):
        spec = topo.graph.nodes[name]["spec"]
        key = (spec.pod, spec.server)
        out[rank] = index.setdefault(key, len(index))
    return out


def chrome_trace(result, group: str = "npu", topology=None) -> dict:
    """The Chrome trace document (``{"traceEvents": [...], ...}``) of a job's result.

    Parameters
    ----------
    result : JobResult
        Anything with ``ops`` (the operation table) and ``step_time_s``.
    group : {"npu", "server"}
        A process per NPU, or per server with a thread per NPU and stream.
    topology : Topology, optional
        The topology the job ran on; needed by ``group="server"``.
    """
    if group not in GROUPS:
        raise bad_value("group", group, "one of " + ", ".join(GROUPS))
    ops = result.ops
    ran = ops[ops["start_s"].notna() & ops["end_s"].notna()]
    ranks = sorted({int(r) for r in ran["rank"]})
    streams = list(dict.fromkeys(sorted(ran["stream"].astype(str), key=lambda s: (s != "compute", s))))
    stream_index = {s: i for i, s in enumerate(streams)}
    server = rank_servers(topology) if group == "server" else {}
    events = []

    def track(rank: int, stream: str) -> tuple[int, int]:
        if group == "npu":
            return rank, stream_index[stream]
        return server.get(rank, 0), rank * len(streams) + stream_index[stream]

    named_pids = set()
    for rank in ranks:
        for stream in streams:
            pid, tid = track(rank, stream)
            if pid not in named_pids:
                named_pids.add(pid)
                label = f"npu {rank}" if group == "npu" else f"server {pid}"
                events.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": label}})
                events.append({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0,
                               "args": {"sort_index": pid}})
            thread = stream if group == "npu" else f"npu {rank} {stream}"
            events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": thread}})
            events.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid,
                           "args": {"sort_index": tid}})
    # only the tracks that hold something keep their metadata
    used = {track(int(r), str(s)) for r, s in zip(ran["rank"], ran["stream"], strict=True)}
    events = [e for e in events if e["name"].startswith("process") or (e["pid"], e["tid"]) in used]
    cols = [c for c in _ARGS if c in ran.columns]
    for row in ran.itertuples(index=False):
        rank, stream = int(row.rank), str(row.stream)
        pid, tid = track(rank, stream)
        start_us = float(row.start_s) * 1e6
        dur_us = max(float(row.end_s) * 1e6 - start_us, 0.0)
        args = {"rank": rank, "kind": str(row.kind)}
        for c in cols:
            v = _plain(getattr(row, c))
            if v is not None and v != "":
                args[c] = v
        events.append({"name": str(row.op), "cat": _CATEGORY.get(str(row.kind), str(row.kind)), "ph": "X",
                       "ts": start_us, "dur": dur_us, "pid": pid, "tid": tid, "args": args})
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"generator": "hcsim", "step_time_us": float(result.step_time_s) * 1e6,
                          "group": group}}


def write_chrome_trace(result, path, group: str = "npu", topology=None) -> Path:
    """Write the job's timeline as Chrome trace JSON (see the module docs); return the path.

    Examples
    --------
    >>> import hcsim  # doctest: +SKIP
    >>> write_chrome_trace(hcsim.run("scenarios/acl_overlap_allreduce.yaml"), "trace.json")  # doctest: +SKIP
    PosixPath('trace.json')
    """
    doc = chrome_trace(result, group, topology)
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str) or not path.strip():
        raise bad_value("path", path, "a file path")
    path = Path(path)
    try:
        with open(path, "w", encoding="utf-8") as f:
            # dumps, not dump: json.dump always takes the pure-Python encoder (a 16 MB trace of 16,384
            # NPUs took 17 s), dumps the C one (one string in memory, the file's size)
            f.write(json.dumps(doc, allow_nan=False, separators=(",", ":")))
    except OSError as exc:
        raise bad_value("path", str(path), f"cannot be written ({exc.strerror or exc})") from None
    return path
