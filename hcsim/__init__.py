"""hcsim: simulate HCCL collective communication on Ascend clusters.

Examples
--------
>>> import hcsim
>>> topo = hcsim.load_topology("atlas800t-a2")
>>> r = hcsim.simulate(topo, "allreduce", "64MiB", algorithm="ring")
>>> r.time_s > 0
True
"""

from . import algorithms  # noqa: F401  (registers the built-in algorithms)
from .algorithms import (
    COLLECTIVES,
    AlgorithmSpec,
    Schedule,
    algorithms_for,
    build_schedule,
    register,
)
from .api import simulate, sweep
from .engine import Result
from .errors import (
    ConfigError,
    HcsimError,
    ScheduleError,
    StuckScheduleError,
    TopologyError,
    WorkLimitError,
)
from .study import select
from .topology import Topology, load_topology, save_topology
from .units import parse_size
from .verify import verify

__version__ = "0.1.0"


def run(scenario, **kwargs):
    """Run a scenario (a YAML file, a mapping or a :class:`hcsim.scenario.Scenario`) and
    return its :class:`~hcsim.workload.JobResult`; ``kwargs`` are
    :func:`hcsim.scenario.load_scenario`'s (``servers``, ``overrides``). docs/scenarios.md."""
    from .scenario import run_scenario

    return run_scenario(scenario, **kwargs)


__all__ = [
    "COLLECTIVES", "AlgorithmSpec", "ConfigError", "HcsimError", "Result", "Schedule", "ScheduleError",
    "StuckScheduleError", "Topology", "TopologyError", "WorkLimitError", "algorithms_for", "build_schedule",
    "load_topology", "parse_size", "register", "run", "save_topology", "select", "simulate", "sweep", "verify",
]
