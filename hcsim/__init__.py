"""hcsim: simulate HCCL collective communication on Ascend clusters.

Examples
--------
>>> import hcsim
>>> topo = hcsim.load_topology("atlas800t-a2")
>>> r = hcsim.simulate(topo, "allreduce", "64MiB", algorithm="ring")
>>> r.time_s > 0
True
"""

from .errors import (
    ConfigError,
    HcsimError,
    ScheduleError,
    StuckScheduleError,
    TopologyError,
    WorkLimitError,
)

# Everything else is imported on first use (PEP 562), so ``import hcsim`` costs only this
# module and the errors: pandas, networkx, simpy and the engine load when a call needs them.
_LAZY = {
    "COLLECTIVES": "algorithms", "AlgorithmSpec": "algorithms", "Schedule": "algorithms",
    "algorithms_for": "algorithms", "build_schedule": "algorithms", "register": "algorithms",
    "simulate": "api", "sweep": "api", "Result": "engine", "select": "study",
    "Topology": "topology", "load_topology": "topology", "save_topology": "topology",
    "parse_size": "units", "verify": "verify",
}


def __getattr__(name):
    import importlib

    module = _LAZY.get(name)
    if module is not None:
        importlib.import_module(".algorithms", __name__)  # registers the built-in algorithms
        value = getattr(importlib.import_module("." + module, __name__), name)
        globals()[name] = value
        return value
    try:
        return importlib.import_module("." + name, __name__)  # a subpackage, e.g. hcsim.workload
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


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
