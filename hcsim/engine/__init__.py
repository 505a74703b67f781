"""The event-driven engine: fluid max-min flows on a SimPy clock.

Names load on first use (PEP 562): ``hcsim.topology`` needs only ``engine.regimes``, and
importing it must not pull in SimPy and pandas through this package.
"""

_LAZY = {"EngineConfig": "des", "FlowSimulator": "des", "Result": "result", "max_min_rates": "fairshare"}

__all__ = ["EngineConfig", "FlowSimulator", "Result", "max_min_rates"]


def __getattr__(name):
    import importlib

    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
