"""Shared test helpers."""

import functools

from hcsim.topology import full_mesh


@functools.lru_cache(maxsize=64)
def mesh_topology(p: int, bandwidth_Bps: float, latency_s: float, reduce_Bps: float):
    """A cached full mesh: every algorithm hcsim ships is contention-free on it."""
    return full_mesh(p, bandwidth_Bps, latency_s, reduce_Bps=reduce_Bps)


def job_through_ccl_buffer(topo, collective: str, algorithm: str, size: int, buffer_bytes: int):
    """A one-op job of ``collective`` on 4 ranks through a CCL buffer: (the job's step time, simulate's time of
    the same call, the looped schedule) -- a job must cost what simulate gives."""
    import hcsim
    from hcsim.algorithms.registry import get_algorithm, make_args
    from hcsim.hccl.buffer import looped
    from hcsim.hccl.selection import HcclConfig
    from hcsim.workload import Workload, run

    hccl = HcclConfig(buffer_bytes=buffer_bytes)
    w = Workload("w")
    w.collective("op", w.communicator("c", [0, 1, 2, 3]), collective, size, algorithm=algorithm)
    job = run(topo, w, hccl=hccl).step_time_s
    alone = hcsim.simulate(topo, collective, size, algorithm, hccl=hccl).time_s
    return job, alone, looped(get_algorithm(collective, algorithm), make_args(collective, 4, size), buffer_bytes)
