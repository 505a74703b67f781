"""Shared test helpers."""

import functools

from hcsim.topology import full_mesh


@functools.lru_cache(maxsize=64)
def mesh_topology(p: int, bandwidth_Bps: float, latency_s: float, reduce_Bps: float):
    """A cached full mesh: every algorithm hcsim ships is contention-free on it."""
    return full_mesh(p, bandwidth_Bps, latency_s, reduce_Bps=reduce_Bps)
